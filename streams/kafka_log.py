"""The Kafka :class:`~kueuestream.streams.log.Log` on aiokafka.

Appends go through one idempotent producer (``enable_idempotence=True``,
``acks="all"``): a retried send is never written twice and records of one
partition keep their order. The partition of every record is chosen here with
:func:`kueuestream.streams.topics.partition_for_key` and passed explicitly, so it never
depends on a client's partitioner (which, for the standard ones, agrees anyway).

Reads use a short-lived consumer without a group (assigned to one partition,
nothing committed) with ``isolation_level="read_committed"``, so records of
aborted transactions (Faust's exactly-once mode) are never replayed.

Topics are created by :meth:`KafkaLog.ensure_topic` through the admin client,
never by the broker's auto-creation (which would give them the broker's
default partition count and move every shard): lookups use an all-topics
metadata request, which cannot auto-create anything.

The Kafka record timestamp is left to the client (the producer's clock): the
broker uses it for time-based retention, and nothing in Kueuestream reads it;
event time is inside the records.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Self

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, for_code

from kueuestream.streams.kafka_access import check_access
from kueuestream.streams.kafka_settings import KafkaTarget, kafka_settings
from kueuestream.streams.kafka_urls import parse_broker_url
from kueuestream.streams.log import (
    KeyedRecords,
    LogError,
    Position,
    Record,
    TopicMismatchError,
    UnknownTopicError,
)
from kueuestream.streams.topics import TOPIC_SPECS, partition_counts, partition_for_key, validate_topic_name

__all__ = ["KafkaLog", "parse_broker_url"]

_TOPIC_ALREADY_EXISTS = 36
# A getmany round: short enough to notice the end of a partition promptly.
_POLL_MS = 200
_POLL_RECORDS = 2000


class KafkaLog:
    """A :class:`~kueuestream.streams.log.Log` on a Kafka cluster.

    ``brokers`` is the :class:`~kueuestream.streams.kafka_settings.KafkaSettings`
    every client uses (TLS, SASL), or broker URLs taken with no other setting.
    Clients start on first use (or with :meth:`start`), after one connection
    checked that a broker accepts these settings; use ``async with`` or
    :meth:`close` to stop them. ``partitions`` overrides the default partition
    counts of :mod:`kueuestream.streams.topics`; ``topic_configs`` adds Kafka topic configs
    to the defaults of :data:`kueuestream.streams.topics.TOPICS` when creating topics.
    ``replication_factor`` must be explicit because aiokafka's CreateTopics
    request predates the broker-default value (-1).
    """

    def __init__(
        self,
        brokers: KafkaTarget,
        *,
        client_id: str = "kueuestream",
        partitions: Mapping[str, int] | None = None,
        replication_factor: int = 1,
        topic_configs: Mapping[str, Mapping[str, str]] | None = None,
        request_timeout_ms: int = 30_000,
        read_timeout_s: float = 30.0,
    ) -> None:
        self.settings = kafka_settings(brokers)
        self.bootstrap = list(self.settings.brokers)
        self.client_id = client_id
        self.replication_factor = replication_factor
        self._default_partitions = partition_counts(partitions)
        self._topic_configs = {k: dict(v) for k, v in (topic_configs or {}).items()}
        self._request_timeout_ms = request_timeout_ms
        self._read_timeout_s = read_timeout_s
        self._producer: Any = None
        self._admin: Any = None
        self._offsets_consumer: Any = None
        self._start_lock = asyncio.Lock()
        self._topic_lock = asyncio.Lock()
        # Partition counts of topics known to exist; a count never changes
        # behind our back because we never add partitions.
        self._known: dict[str, int] = {}
        self._closed = False

    # --- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        async with self._start_lock:
            if self._closed:
                raise LogError("the Kafka log is closed")
            if self._producer is not None:
                return
            await check_access(self.settings, client_id=self.client_id, timeout_ms=self._request_timeout_ms)
            admin = AIOKafkaAdminClient(
                **self.settings.client_options(),
                client_id=self.client_id,
                request_timeout_ms=self._request_timeout_ms,
            )
            producer = AIOKafkaProducer(
                **self.settings.client_options(),
                client_id=self.client_id,
                enable_idempotence=True,
                acks="all",
                request_timeout_ms=self._request_timeout_ms,
            )
            consumer = self._consumer()
            started: list[Any] = []
            try:
                for client in (admin, producer, consumer):
                    await client.start()
                    started.append(client)
            except (KafkaError, OSError) as exc:
                for client in reversed(started):
                    await _stop(client)
                reason = self.settings.redact(str(exc))
                raise LogError(f"cannot connect to Kafka at {self.settings.describe()}: {reason}") from exc
            self._admin, self._producer, self._offsets_consumer = admin, producer, consumer

    async def close(self) -> None:
        async with self._start_lock:
            self._closed = True
            clients = (self._producer, self._offsets_consumer, self._admin)
            self._producer = self._offsets_consumer = self._admin = None
            for client in clients:
                if client is not None:
                    await _stop(client)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _consumer(self) -> Any:
        return AIOKafkaConsumer(
            **self.settings.client_options(),
            client_id=self.client_id,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            request_timeout_ms=self._request_timeout_ms,
        )

    async def _started(self) -> None:
        if self._producer is None:
            await self.start()

    # --- topics -------------------------------------------------------------------

    async def _describe(self, topic: str) -> dict[str, Any] | None:
        """The metadata of ``topic``, or None if it does not exist."""
        await self._started()
        # All topics, not [topic]: a metadata request naming a missing topic
        # makes a broker with auto.create.topics.enable create it.
        for entry in await self._admin.describe_topics():
            if entry["topic"] == topic and entry["error_code"] == 0:
                return dict(entry)
        return None

    async def _existing_partitions(self, topic: str) -> int | None:
        if topic in self._known:
            return self._known[topic]
        entry = await self._describe(topic)
        if entry is None:
            return None
        count = len(entry["partitions"])
        self._known[topic] = count
        return count

    async def ensure_topic(self, topic: str, partitions: int | None = None) -> int:
        async with self._topic_lock:
            count = await self._existing_partitions(topic)
            if count is None:
                count = await self._create(topic, partitions)
            if partitions is not None and partitions != count:
                raise TopicMismatchError(f"Kafka topic {topic} has {count} partitions, not {partitions}")
            return count

    async def _create(self, topic: str, partitions: int | None) -> int:
        validate_topic_name(topic)
        count = partitions if partitions is not None else self._default_partitions.get(topic)
        if count is None:
            raise UnknownTopicError(
                f"unknown topic {topic}: create it with an explicit partition count first"
            )
        spec = TOPIC_SPECS.get(topic)
        config = {**(spec.kafka_config if spec else {}), **self._topic_configs.get(topic, {})}
        new = NewTopic(topic, count, self.replication_factor, topic_configs=config)
        try:
            response = await self._admin.create_topics([new])
        except KafkaError as exc:
            raise LogError(f"creating Kafka topic {topic} failed: {exc}") from exc
        for error in response.to_object()["topic_errors"]:
            code = error["error_code"]
            # Already existing means another process won the race: use its topic.
            if code not in (0, _TOPIC_ALREADY_EXISTS):
                reason = error.get("error_message") or for_code(code).__name__
                raise LogError(f"creating Kafka topic {topic} failed: {reason}")
        return await self._await_leaders(topic)

    async def _await_leaders(self, topic: str) -> int:
        """Wait until every partition of a new topic has a leader; returns the count."""
        loop = asyncio.get_running_loop()
        # A timeout on I/O, measured on the loop's monotonic clock; no event time.
        deadline = loop.time() + self._request_timeout_ms / 1000
        while True:
            entry = await self._describe(topic)
            parts = entry["partitions"] if entry is not None else []
            if parts and all(p["error_code"] == 0 and p["leader"] >= 0 for p in parts):
                self._known[topic] = len(parts)
                return len(parts)
            if loop.time() > deadline:
                raise LogError(f"Kafka topic {topic} was created but its partitions have no leader yet")
            await asyncio.sleep(0.1)

    async def partitions(self, topic: str) -> int:
        count = await self._existing_partitions(topic)
        if count is not None:
            return count
        default = self._default_partitions.get(topic)
        if default is None:
            raise UnknownTopicError(f"unknown Kafka topic {topic}")
        return default

    async def topics(self) -> list[str]:
        await self._started()
        names: list[str] = await self._admin.list_topics()
        return sorted(name for name in names if not name.startswith("__"))

    async def delete_topic(self, topic: str) -> None:
        """Delete ``topic`` (tests and tooling; the pipeline never deletes)."""
        await self._started()
        async with self._topic_lock:
            self._known.pop(topic, None)
            await self._admin.delete_topics([topic])

    async def end_offsets(self, topic: str) -> dict[int, int]:
        count = await self.partitions(topic)
        if topic not in self._known:
            return dict.fromkeys(range(count), 0)
        tps = [TopicPartition(topic, p) for p in range(count)]
        try:
            ends = await self._offsets_consumer.end_offsets(tps)
        except KafkaError as exc:
            raise LogError(f"cannot read the end offsets of Kafka topic {topic}: {exc}") from exc
        return {tp.partition: int(offset) for tp, offset in sorted(ends.items())}

    async def committed_offsets(self, group_id: str, topic: str) -> dict[int, int]:
        """The offsets consumer group ``group_id`` committed in ``topic``, per partition that has one."""
        await self._started()
        count = await self.partitions(topic)
        tps = [TopicPartition(topic, p) for p in range(count)]
        try:
            offsets = await self._admin.list_consumer_group_offsets(group_id, partitions=tps)
        except KafkaError as exc:
            raise LogError(f"cannot read the offsets group {group_id} committed in {topic}: {exc}") from exc
        return {tp.partition: int(o.offset) for tp, o in sorted(offsets.items()) if o.offset >= 0}

    # --- appending ----------------------------------------------------------------

    async def append(self, topic: str, key: bytes, value: bytes, *, partition: int | None = None) -> Position:
        return (await self.append_many(topic, ((key, value),), partition=partition))[0]

    async def append_many(
        self, topic: str, records: KeyedRecords, *, partition: int | None = None
    ) -> list[Position]:
        count = await self.ensure_topic(topic)
        if partition is not None and not 0 <= partition < count:
            raise ValueError(f"topic {topic} has partitions 0..{count - 1}, not {partition}")
        try:
            # Queue everything first, then wait: the producer batches what is
            # queued, and per-partition order is the order of the send calls.
            pending = [
                await self._producer.send(
                    topic,
                    value=bytes(value),
                    key=bytes(key),
                    partition=partition if partition is not None else partition_for_key(key, count),
                )
                for key, value in records
            ]
            metadata = await asyncio.gather(*pending)
        except KafkaError as exc:
            raise LogError(f"appending to Kafka topic {topic} failed: {exc}") from exc
        return [Position(m.topic, m.partition, m.offset) for m in metadata]

    # --- reading ------------------------------------------------------------------

    async def read(
        self, topic: str, partition: int, from_offset: int = 0, *, until: int | None = None
    ) -> AsyncIterator[Record]:
        if from_offset < 0:
            raise ValueError(f"from_offset must be >= 0, got {from_offset}")
        count = await self.partitions(topic)
        if not 0 <= partition < count:
            raise ValueError(f"topic {topic} has partitions 0..{count - 1}, not {partition}")
        end = (await self.end_offsets(topic))[partition]
        stop = end if until is None else min(until, end)
        if from_offset >= stop:
            return
        tp = TopicPartition(topic, partition)
        consumer = self._consumer()
        try:
            await consumer.start()
            consumer.assign([tp])
            consumer.seek(tp, from_offset)
            loop = asyncio.get_running_loop()
            idle_since = loop.time()
            while True:
                batches = await consumer.getmany(tp, timeout_ms=_POLL_MS, max_records=_POLL_RECORDS)
                received = batches.get(tp, [])
                for message in received:
                    if message.offset >= stop:
                        return
                    yield Record(topic, partition, message.offset, message.key or b"", message.value or b"")
                # Offsets can have holes (transaction markers, aborted records),
                # so the end is where the consumer's position reaches, not a count.
                if await consumer.position(tp) >= stop:
                    return
                if received:
                    idle_since = loop.time()
                elif loop.time() - idle_since > self._read_timeout_s:
                    raise LogError(
                        f"reading Kafka {topic}[{partition}] stalled before offset {stop} "
                        f"(no record for {self._read_timeout_s:g}s)"
                    )
        except KafkaError as exc:
            raise LogError(f"reading Kafka {topic}[{partition}] failed: {exc}") from exc
        finally:
            await consumer.stop()

    async def last_visible_offsets(self, ends: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """For each ``(topic, partition)``: the offset of the last record before its end
        offset that a ``read_committed`` reader gets, or -1 when there is none.

        The end offset alone does not tell: a partition written in transactions
        ends with a commit marker, or with an aborted transaction's records and
        its abort marker, none of which a reader ever receives. The tail of each
        partition is read back, a window at a time, until a record turns up.
        """
        out = {key: -1 for key, end in ends.items() if end <= 0}
        pending = {key: end for key, end in ends.items() if end > 0}
        window = 16
        consumer = self._consumer()
        try:
            await consumer.start()
            while pending:
                starts = {key: max(end - window, 0) for key, end in pending.items()}
                last = await self._last_records(consumer, pending, starts)
                for key in sorted(pending):
                    if last[key] >= 0 or starts[key] == 0:
                        out[key] = last[key]
                        del pending[key]
                window *= 16
        except KafkaError as exc:
            raise LogError(f"reading the tails of Kafka partitions failed: {exc}") from exc
        finally:
            await consumer.stop()
        return out

    async def _last_records(
        self, consumer: Any, ends: Mapping[tuple[str, int], int], starts: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], int]:
        """The last offset ``consumer`` reads from each start up to its end (-1: none)."""
        tps = {TopicPartition(*key): key for key in ends}
        consumer.assign(list(tps))
        for tp, key in tps.items():
            consumer.seek(tp, starts[key])
        last = dict.fromkeys(ends, -1)
        remaining = set(tps)
        loop = asyncio.get_running_loop()
        idle_since = loop.time()
        while remaining:
            batches = await consumer.getmany(*remaining, timeout_ms=_POLL_MS, max_records=_POLL_RECORDS)
            for tp, messages in batches.items():
                key = tps[tp]
                below = [m.offset for m in messages if m.offset < ends[key]]
                if below:
                    last[key] = max(last[key], *below)
            for tp in sorted(remaining):
                if await consumer.position(tp) >= ends[tps[tp]]:
                    remaining.discard(tp)
            if batches:
                idle_since = loop.time()
            elif loop.time() - idle_since > self._read_timeout_s:
                # An open transaction holds a read_committed reader back until it ends.
                stuck = ", ".join(f"{tp.topic}[{tp.partition}]" for tp in sorted(remaining))
                raise LogError(
                    f"reading Kafka {stuck} stalled before the end (no record for {self._read_timeout_s:g}s)"
                )
        return last


async def _stop(client: Any) -> None:
    stop = getattr(client, "stop", None) or client.close
    await stop()


if TYPE_CHECKING:
    from kueuestream.streams.log import Log

    # mypy checks here that KafkaLog has every method of the Log protocol.
    _conforms: type[Log] = KafkaLog
