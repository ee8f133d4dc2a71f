"""The one writer of a ``kueue.decisions`` partition on Kafka: fenced, transactional, never twice.

Why not Faust's transactions. With ``processing_guarantee="exactly_once"``
faust-streaming 0.15.3 commits what an agent sent in whatever transaction is
open when its commit timer fires, and across a rebalance it reuses producers
that are still in a transaction; in tests with a worker killed mid-stream both
led to decisions committed twice or lost. So decisions do not ride on Faust's
transactions; exactly-once comes from determinism plus fencing:

- Each admission partition p has one transactional id, ``<app>-decisions-<p>``.
  A worker that takes p over starts a producer with that id, which fences the
  previous owner (its open transaction is aborted, it can write no more).
- Only then does it count the decisions already committed to partition p.
  The decisions of p are a pure function of admission partition p, in a fixed
  order, so the new owner rebuilds its engines (from a snapshot and the records
  after it, or from offset 0) and writes only what comes after that count: what
  the old owner committed is skipped, what it lost is written now.
- Counting reads the decisions partition from a :class:`WriterMark` kept with
  the snapshot (``committed`` decisions lie before offset ``end``), or from 0.
  The writer takes a mark after each of its commits: the offset after its last
  record, and its count. Nothing else can commit in between, as any other
  producer with the id would have fenced it and failed that commit.
- Writes are grouped into transactions (a group commit: while one commits, the
  next decisions wait and go together), so a reader (``read_committed``) never
  sees half of a group, and a crash mid-transaction only loses what the next
  owner writes again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from kueuestream.agents.faust_worker.snapshots import WriterMark
from kueuestream.streams.kafka_settings import KafkaTarget, kafka_settings

log = logging.getLogger(__name__)


class WriterFenced(Exception):
    """Another worker took the partition over; this writer can write no more."""


class DecisionWriter:
    def __init__(self, broker: KafkaTarget, app_id: str, topic: str, partition: int) -> None:
        self.settings = kafka_settings(broker)
        self.topic = topic
        self.partition = partition
        self.transactional_id = f"{app_id}-decisions-{partition}"
        self.skip = 0  # decisions produced again that are already committed
        self.committed = 0  # decisions in the partition, committed (counted at start, then written)
        self.mark = WriterMark(0, 0)  # see the module docstring
        self.failed: BaseException | None = None
        self._progress = asyncio.Condition()
        self._producer: AIOKafkaProducer | None = None
        self._pending: list[tuple[bytes, bytes]] = []
        self._flushing: asyncio.Task[None] | None = None

    async def start(self, since: WriterMark | None = None) -> None:
        """Fence the previous owner, then count the committed decisions (from ``since``, or from 0)."""
        producer = AIOKafkaProducer(
            **self.settings.client_options(),
            transactional_id=self.transactional_id,
            enable_idempotence=True,
            acks="all",
        )
        # Starting a transactional producer fences every earlier one with this id.
        await producer.start()
        self._producer = producer
        self.mark = await self._committed(since or WriterMark(0, 0))
        self.committed = self.skip = self.mark.committed
        log.info(
            "%s[%d]: %d decisions already committed (counted from offset %d)",
            self.topic,
            self.partition,
            self.committed,
            since.end if since else 0,
        )

    def resume_after(self, made: int) -> None:
        """The decisions produced from now on are those after the first ``made``."""
        if made > self.committed:
            raise ValueError(f"{made} decisions made but only {self.committed} committed")
        self.skip = self.committed - made

    async def _committed(self, since: WriterMark) -> WriterMark:
        """How many decisions partition p holds (committed ones: aborted ones are not read), and its end."""
        consumer = AIOKafkaConsumer(
            **self.settings.client_options(),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        await consumer.start()
        try:
            tp = TopicPartition(self.topic, self.partition)
            consumer.assign([tp])
            end = (await consumer.end_offsets([tp]))[tp]
            if since.end > end:
                # The mark is not of this topic's history (recreated?): count everything.
                log.warning(
                    "%s[%d]: ends at %d, before the mark %d", self.topic, self.partition, end, since.end
                )
                since = WriterMark(0, 0)
            # An explicit seek: seek_to_beginning() sometimes resolves to the end.
            consumer.seek(tp, since.end)
            count = since.committed
            while await consumer.position(tp) < end:
                batch = await consumer.getmany(tp, timeout_ms=500, max_records=10_000)
                count += len(batch.get(tp, []))
            return WriterMark(end, count)
        finally:
            await consumer.stop()

    def write(self, decisions: list[tuple[bytes, bytes]]) -> None:
        """Queue decisions in the order they were made; those already committed are dropped."""
        if self.failed is not None:
            raise WriterFenced(f"{self.topic}[{self.partition}]: {self.failed}")
        drop = min(self.skip, len(decisions))
        self.skip -= drop
        self._pending += decisions[drop:]
        if self._pending and (self._flushing is None or self._flushing.done()):
            self._flushing = asyncio.ensure_future(self._flush_loop())

    async def _flush_loop(self) -> None:
        assert self._producer is not None
        while self._pending:
            group, self._pending = self._pending, []
            try:
                async with self._producer.transaction():
                    sent = [
                        await self._producer.send(self.topic, value=value, key=key, partition=self.partition)
                        for key, value in group
                    ]
                    last = (await asyncio.gather(*sent))[-1].offset
            except KafkaError as exc:
                # Fenced (another worker owns the partition now) or the broker gave up:
                # what was not committed is written by whoever rebuilds the partition next.
                self.failed = exc
                self._pending = []
                log.warning("%s[%d]: writer stopped: %r", self.topic, self.partition, exc)
                await self._notify()
                return
            self.committed += len(group)
            self.mark = WriterMark(last + 1, self.committed)
            await self._notify()

    async def _notify(self) -> None:
        async with self._progress:
            self._progress.notify_all()

    async def committed_through(self, count: int) -> WriterMark | None:
        """Wait until the first ``count`` decisions are committed: the mark then, or None if the
        writer failed or stopped."""
        async with self._progress:
            await self._progress.wait_for(
                lambda: self.committed >= count or self.failed is not None or self._producer is None
            )
        return self.mark if self.committed >= count and self.failed is None else None

    async def drain(self) -> None:
        """Wait until everything queued is committed (or the writer failed)."""
        while self._flushing is not None and not self._flushing.done():
            await asyncio.shield(self._flushing)

    async def stop(self) -> None:
        if self._flushing is not None and not self._flushing.done():
            self._flushing.cancel()
            with contextlib.suppress(asyncio.CancelledError, KafkaError):
                await self._flushing
        if self._producer is not None:
            with contextlib.suppress(KafkaError):
                await self._producer.stop()
            self._producer = None
        await self._notify()
