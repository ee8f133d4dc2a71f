"""The Faust workers for real, on the test broker: starting them, feeding them, reading their topics."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Self

from aiokafka import AIOKafkaConsumer, TopicPartition

from kueuestream.agents.audit.replay import Verdict, verify
from kueuestream.agents.faust_worker.processes import WorkerProcesses
from kueuestream.agents.faust_worker.publish import send_watch
from kueuestream.agents.log_entries import decode_entry
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams.kafka_log import KafkaLog, parse_broker_url
from kueuestream.streams.log import Record
from kueuestream.streams.schemas import DecisionRecord
from tests.pipeline.checks import decode_all

# Upper bound for one wait on the pipeline; a test normally waits a fraction of it.
TIMEOUT = 60.0


# Records between two snapshots of an admission partition in the tests: small, so that every
# rebalance and restart takes a partition up from a snapshot.
SNAPSHOT_EVERY = 16


def worker_group(broker: str, tmp: Path, count: int, *, tag: str = "") -> WorkerProcesses:
    """``count`` workers on topics of their own, writing no clock ticks: time moves only with the
    events the test writes, so their decisions compare with an embedded run's. They write a
    snapshot every :data:`SNAPSHOT_EVERY` records."""
    return WorkerProcesses.isolated(broker, count, tmp, tag=tag, clock=False, snapshot_every=SNAPSHOT_EVERY)


async def read_topic(kafka: KafkaLog, topic: str) -> list[list[Record]]:
    count = await kafka.partitions(topic)
    return [[r async for r in kafka.read(topic, p)] for p in range(count)]


async def decisions_of(broker: str, names: TopicNames) -> list[list[DecisionRecord]]:
    """Every decision written to ``names.decisions`` so far, per partition."""
    async with KafkaLog(broker) as kafka:
        return [decode_all(r.value for r in part) for part in await read_topic(kafka, names.decisions)]


async def wait_until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.1)


class TopicReader:
    """Everything committed to a topic so far, read by one long-lived ``read_committed`` consumer."""

    def __init__(self, broker: str, topic: str, partitions: int) -> None:
        self.topic = topic
        self.parts: list[list[bytes]] = [[] for _ in range(partitions)]
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=parse_broker_url(broker),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )

    async def __aenter__(self) -> Self:
        await self.consumer.start()
        tps = [TopicPartition(self.topic, p) for p in range(len(self.parts))]
        self.consumer.assign(tps)
        for tp in tps:
            self.consumer.seek(tp, 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()

    async def poll(self, timeout_ms: int = 100) -> list[list[bytes]]:
        batches = await self.consumer.getmany(timeout_ms=timeout_ms, max_records=10_000)
        for tp, messages in batches.items():
            self.parts[tp.partition] += [m.value for m in messages]
        return self.parts

    def decisions(self) -> list[list[DecisionRecord]]:
        return [decode_all(part) for part in self.parts]


async def wait_for_count(reader: TopicReader, count: int, timeout: float = TIMEOUT) -> None:
    """Wait until exactly ``count`` records are committed (more is a failure)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = total(await reader.poll())
        assert seen <= count, f"{seen} records committed to {reader.topic}, expected {count}"
        if seen == count:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s: {seen} of {count} records in {reader.topic}")


def total(parts: Sequence[Sequence[object]]) -> int:
    return sum(len(p) for p in parts)


async def settled(
    kafka: KafkaLog, w: WorkerProcesses, watch_end: int
) -> tuple[Verdict, list[list[Record]]] | None:
    """The replay verdict once every watch event is ingested and every decision written; else None."""
    admission = await read_topic(kafka, w.names.admission)
    ingested = max(
        (
            e.origin.offset
            for part in admission
            for r in part
            if (e := decode_entry(r.value)).origin.stream == "watch"
        ),
        default=-1,
    )
    if ingested < watch_end - 2:  # the last watch event is a workload's TICK-closed upsert
        return None
    decisions = [[r.value for r in part] for part in await read_topic(kafka, w.names.decisions)]
    verdict = verify(admission, decisions)
    return None if verdict.mismatches else (verdict, admission)


async def stream_with_a_kill(
    broker: str, w: WorkerProcesses, events: list[bytes], kill_at: int | None = None
) -> tuple[Verdict, list[list[Record]]]:
    """Send ``events`` one by one (SIGKILL worker 0 and start it again after ``kill_at``); then
    wait until everything is processed, and return the replay verdict and the admission log."""
    async with KafkaLog(broker) as kafka:
        for i, value in enumerate(events):
            await send_watch(kafka, w.names, [value])
            if kill_at is not None and i == kill_at:
                w.kill(0, signal.SIGKILL)
                w.start(0)
            await asyncio.sleep(0.01)
        return await caught_up(kafka, w, "the kill")


async def caught_up(kafka: KafkaLog, w: WorkerProcesses, after: str) -> tuple[Verdict, list[list[Record]]]:
    """The replay verdict and the admission log once every watch event so far is processed."""
    watch_end = (await kafka.end_offsets(w.names.watch))[0]
    deadline = time.monotonic() + 2 * TIMEOUT
    while time.monotonic() < deadline:
        done = await settled(kafka, w, watch_end)
        if done is not None:
            return done
        await asyncio.sleep(1.0)
    raise AssertionError(f"the pipeline did not catch up with the stream after {after}")
