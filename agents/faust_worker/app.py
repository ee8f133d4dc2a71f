"""The Faust runtime: ``kueuestream worker --broker kafka://HOST:PORT``.

Any number of workers form one consumer group and share the partitions: the
one partition of ``kueue.watch`` (ingest needs one total order) and the six of
``kueue.admission`` and ``kueue.decisions`` (the shards). The agents are the
agents of :mod:`kueuestream.agents` (ingest, admission, applier); this module
only moves their records.

Exactly once. Decisions are written by :class:`.decision_writer.DecisionWriter`:
one fenced transactional producer per admission partition, which skips the
decisions a previous owner already committed and writes those it lost (see
there for why Faust's own transactions are not used for them). The app still
runs with ``processing_guarantee="exactly_once"``, which commits input offsets
and Table changelogs in Faust's transactions; correctness does not depend on
it, and one of those transactions fenced after a stall no longer stops the
worker (:mod:`.fenced_producer`). Every other record (ingest's output,
handovers, the job controller's STOPPED events, applied records, errors) is
sent by an idempotent producer before its input is acknowledged; after a crash
it may be sent again, and the admission agent recognises the copy by its
origin.

State. The authoritative state of both stateful agents is a function of their
input log, rebuilt from the newest snapshot (:mod:`.snapshots`) and the log
after it, or from offset 0 without one: ingest's routing tables from
``kueue.watch``, each admission partition's engines from its records. Ingest
keeps its tables while it is given the offset it expects, reads the records in
between when given a later one (another worker processed them), and starts
over when given an earlier one. An admission partition is rebuilt whenever it
is (re)assigned or given anything but the expected offset, because its
decision writer must fence the previous owner first. A
rebuild sends again, checked against the log, any admission record its input
should have produced and that is missing: Faust can skip records after a
rebalance, and this repairs it. Faust's in-memory table store keeps the
writes of an aborted transaction across a rebalance, so Faust Tables cannot be
that source of truth; the routing tables (``objects``, ``cq_cohorts``,
``claims``, ...) and the ``quotas``, ``usage`` and ``workloads`` views are Faust
Tables with changelogs that mirror the state for operators, their writes held
back and sent together (:mod:`.held_writes`).

Throughput. Each agent hands the records it produced to the producer and goes
on; an :class:`InOrderAcker` acknowledges inputs in order once their records
are delivered, so one broker round trip per input is not a bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

import faust
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from faust.types import TP

from kueuestream.admission.engine import Engine
from kueuestream.admission.quantity import resource_quantity
from kueuestream.admission.quota import QuotaNode
from kueuestream.agents.admission import AdmissionHandler
from kueuestream.agents.admission_shards import Emitted
from kueuestream.agents.applier import applied_out, read_decision
from kueuestream.agents.audit.pending import QueueNotFound
from kueuestream.agents.dashboard.live import LiveDashboard
from kueuestream.agents.dashboard.serve import worker_dashboard
from kueuestream.agents.faust_worker import DEFAULT_SNAPSHOT_EVERY, consumer_state
from kueuestream.agents.faust_worker.changelog_recovery import TailAwareTableManager
from kueuestream.agents.faust_worker.decision_writer import DecisionWriter
from kueuestream.agents.faust_worker.fenced_producer import FenceTolerantTransport
from kueuestream.agents.faust_worker.flow_control import RefetchingFlowControl
from kueuestream.agents.faust_worker.held_writes import FLUSH_INTERVAL, HeldTable, HeldWrites
from kueuestream.agents.faust_worker.publish import ensure_topics, publish_dir
from kueuestream.agents.faust_worker.resend_window import LogOrigins, ResendWindow, origin_key
from kueuestream.agents.faust_worker.snapshots import (
    TOPIC_CONFIG,
    Coverage,
    RoutingSnapshot,
    Snapshot,
    SnapshotStore,
    encode_state,
    encode_tables,
    record_digest,
    snapshot_topic,
)
from kueuestream.agents.faust_worker.stall_watch import (
    STALL_LIMIT,
    StallWatch,
    confirmed,
    give_up,
    positions,
)
from kueuestream.agents.ingest import IngestHandler
from kueuestream.agents.ingest_routing import TABLES
from kueuestream.agents.kafka_commands import run_with_kafka
from kueuestream.agents.log_entries import CLOCK_TICK, batch_marker, decode_entry
from kueuestream.agents.metrics.kueue_series import KueueSeries
from kueuestream.agents.metrics.serving import Served, serve_metrics
from kueuestream.agents.metrics.visibility import Unavailable, on_loop, serve_visibility
from kueuestream.agents.outputs import Out, Role
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.codec import DecodeError
from kueuestream.streams.kafka_log import KafkaLog
from kueuestream.streams.kafka_settings import KafkaSettings, KafkaTarget, kafka_settings
from kueuestream.streams.log import LogError
from kueuestream.streams.schemas import ApplyOutcome, DecisionRecord

__all__ = ["build_app", "publish_dir", "run_worker"]

log = logging.getLogger(__name__)

DEFAULT_APP_ID = "kueuestream"
VIEW_TABLES = ("quotas", "usage", "workloads")
# Decisions become visible when their transaction commits: this bounds latency.
COMMIT_INTERVAL = 0.1
# How often a worker checks whether its engines wait for the clock.
T = TypeVar("T")
CLOCK_INTERVAL = 0.25
METRICS_INTERVAL = 1.0
# How long a snapshot waits for what it covers to be delivered and committed before it is dropped.
SNAPSHOT_WAIT = 60.0
# How old the consumer's topic metadata may grow before it is fetched again. The group's
# leader assigns partitions from it and, when the next fetch changes it, assigns them again.
# A worker whose consumer subscribed while the brokers were down (a restart racing a broker
# outage) has no metadata of the topics, and leading a rebalance once they are back up it
# assigns no partition to anyone: the group then stays stable and idle until the next fetch,
# which the default (300 s) puts minutes later.
CONSUMER_METADATA_MAX_AGE_MS = 5_000
APPLIED_DETAIL = "no cluster attached: the status is recorded in kueue.applied"


class Runtime:
    """The handlers and the plumbing one worker shares between its agents."""

    def __init__(
        self,
        app: faust.App,
        settings: KafkaSettings,
        names: TopicNames,
        job_controller: bool,
        cluster: bool = False,
        snapshot_every: int = DEFAULT_SNAPSHOT_EVERY,
    ) -> None:
        self.app = app
        self.settings = settings
        self.names = names
        self.cluster = cluster
        counts = names.partition_counts()
        self.partitions = counts[names.admission]
        # Keys are strings and values plain JSON, whatever the app's default serializers.
        schema: Any = faust.Schema(key_serializer="json", value_serializer="json")
        self.tables: dict[str, Any] = {name: app.Table(name, partitions=1, schema=schema) for name in TABLES}
        self.views: dict[str, Any] = {
            name: app.Table(name, partitions=self.partitions, schema=schema) for name in VIEW_TABLES
        }
        self.held = HeldWrites({**self.tables, **self.views})
        self.ingest_tables: dict[str, HeldTable] = {}
        self.ingest = self._new_ingest()
        self.ingest_next: int | None = None
        # As covered_from and since_snapshot below, for ingest's routing tables.
        self.ingest_covered_from: int | None = None
        self.ingest_since_snapshot = 0
        self.ingest_rebuilding = False
        # Per input partition taken over: its inputs a previous owner may have processed.
        self.resend: dict[tuple[str, int], ResendWindow] = {}
        self._routing_snapshot: asyncio.Task[None] | None = None
        self.admission = AdmissionHandler(
            partitions=self.partitions,
            admission_topic=names.admission,
            job_controller=job_controller and not cluster,
        )
        self.next_offset: dict[int, int] = {}
        self.writers: dict[int, DecisionWriter] = {}
        # One rebuild of a partition at a time: the agent and the clock both start them.
        self._rebuilding: dict[int, asyncio.Lock] = {}
        # Snapshots (see snapshots.py); 0 records between two means none are written.
        self.snapshot_every = snapshot_every
        self._snapshots: SnapshotStore | None = None
        # Per admission partition: decisions made by the records before next_offset, records
        # since the last snapshot, and, after a restore, the first offset the stream gave
        # (records from there up to the snapshot's offset are in the snapshot already).
        self.made: dict[int, int] = {}
        self.since_snapshot: dict[int, int] = {}
        self.covered_from: dict[int, int] = {}
        self._snapshotting: dict[int, asyncio.Task[None]] = {}
        # Seconds the last snapshot took to encode, and when it was taken: encoding stops the
        # agent, so snapshots are spaced to take at most a tenth of its time.
        self._snapshot_cost = 0.0
        self._snapshot_at = 0.0
        # View keys written per shard, to remove those of ClusterQueues that left it.
        self._view_keys: dict[str, set[str]] = {}
        self._kafka: KafkaLog | None = None
        self._producer: AIOKafkaProducer | None = None
        # With --metrics-port: the Kueue-named series of the shards this worker owns, and
        # (topic, partition, end, next offset) of its admission partitions, taken on a timer.
        self.series: KueueSeries | None = None
        self.lag: list[tuple[str, int, int, int]] = []
        # With --metrics-port: the dashboard of the shards this worker owns.
        self.dashboard: LiveDashboard | None = None
        self.assigned = False
        # The loop the agents run on, once partitions are assigned: the engines change only there.
        self.loop: asyncio.AbstractEventLoop | None = None

    async def kafka(self) -> KafkaLog:
        if self._kafka is None:
            self._kafka = KafkaLog(
                self.settings,
                client_id=f"{self.app.conf.id}-side",
                topic_configs={snapshot_topic(self.names): TOPIC_CONFIG},
            )
            await self._kafka.start()
        return self._kafka

    async def changelog_tails(self, ends: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        return await (await self.kafka()).last_visible_offsets(ends)

    async def snapshots(self) -> SnapshotStore:
        if self._snapshots is None:
            self._snapshots = SnapshotStore(
                await self.kafka(), await self.producer(), self.names, self.partitions
            )
        return self._snapshots

    async def close(self) -> None:
        for task in [*self._snapshotting.values(), self._routing_snapshot]:
            if task is not None:
                task.cancel()
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None
        if self._kafka is not None:
            await self._kafka.close()
            self._kafka = None

    async def producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            producer = AIOKafkaProducer(
                **self.settings.client_options(),
                client_id=f"{self.app.conf.id}-side",
                enable_idempotence=True,
                acks="all",
                linger_ms=1,
            )
            await producer.start()
            self._producer = producer
        return self._producer

    async def queue_outside(self, outs: Sequence[Out]) -> list[asyncio.Future[Any]]:
        """Hand records the transaction cannot carry to the idempotent producer; their deliveries."""
        if not outs:
            return []
        producer = await self.producer()
        topics = {
            Role.ADMISSION: self.names.admission,
            Role.APPLIED: self.names.applied,
            Role.ERRORS: self.names.errors,
        }
        return [
            await producer.send(topics[o.role], value=o.value, key=o.key, partition=o.partition) for o in outs
        ]

    def log_origins(self, ends: Mapping[int, int] | None) -> LogOrigins:
        """The origins in ``kueue.admission`` after ``ends`` (a snapshot's), or from 0."""
        return LogOrigins(ends or {}, self.origins_in)

    async def open_resend_window(self, source: tuple[str, int], origins: LogOrigins) -> None:
        """Inputs of ``source`` before its end now may have been processed already (see
        :mod:`.resend_window`)."""
        topic, partition = source
        end = (await (await self.kafka()).end_offsets(topic)).get(partition, 0)
        self.resend[source] = ResendWindow(end, origins)

    async def send_after_takeover(
        self, source: tuple[str, int], offset: int, outs: Sequence[Out]
    ) -> list[asyncio.Future[Any]]:
        """:meth:`queue_outside` for the outputs of input ``offset`` of ``source``, leaving out
        admission records already in the log when a previous owner may have sent them."""
        window = self.resend.get(source)
        if window is not None:
            if window.covers(offset):
                outs = await window.origins.missing(outs)
            else:
                del self.resend[source]
        return await self.queue_outside(outs)

    async def origins_in(self, partition: int, start: int) -> set[tuple[str, int, int]]:
        """The origins of the records of admission ``partition`` from offset ``start`` on."""
        present = set()
        async for record in (await self.kafka()).read(self.names.admission, partition, start):
            with contextlib.suppress(DecodeError):
                origin = decode_entry(record.value).origin
                present.add((origin.stream, origin.offset, origin.index))
        return present

    async def send_outside(self, outs: Sequence[Out]) -> None:
        await asyncio.gather(*await self.queue_outside(outs))

    # --- state from the logs --------------------------------------------------------------

    def _new_ingest(self, data: Mapping[str, dict[str, Any]] | None = None) -> IngestHandler:
        tables = {name: HeldTable(self.held, name, (self.names.watch, 0)) for name in TABLES}
        for name, table in tables.items():
            table.data = dict((data or {}).get(name, {}))
        self.ingest_tables = tables
        return IngestHandler(
            tables, partitions=self.partitions, watch_topic=self.names.watch, cluster=self.cluster
        )

    async def ingest_catch_up(self, offset: int) -> None:
        """Make the routing tables reflect every watch event before ``offset``.

        Given an earlier offset than expected (or none expected yet), start over
        from the newest routing snapshot, or from offset 0. Right after a restore,
        events the snapshot covers may come first: they are let through here and
        skipped by the agent.
        """
        expected = self.ingest_next
        covered = self.ingest_covered_from
        if expected == offset or (
            expected is not None and covered is not None and covered <= offset < expected
        ):
            return
        self.ingest_rebuilding = True
        try:
            origins = await self._ingest_rebuild(offset, expected)
            # Events before the end at takeover may have been processed by the previous owner.
            await self.open_resend_window((self.names.watch, 0), origins)
        finally:
            self.ingest_rebuilding = False

    async def _ingest_rebuild(self, offset: int, expected: int | None) -> LogOrigins:
        """Restore and read the routing up to ``offset``; the origins its outputs are checked
        against."""
        started, ends = time.perf_counter(), None
        if expected is None or expected > offset:
            self.ingest, expected = self._new_ingest(), 0
            snapshot = await self.usable_routing() if self.snapshot_every > 0 else None
            if snapshot is not None:
                self.ingest, expected, ends = (
                    self._new_ingest(snapshot.tables),
                    snapshot.offset,
                    snapshot.ends,
                )
        origins = self.log_origins(ends)
        first = expected
        if offset < expected:
            self.ingest_next, self.ingest_covered_from = expected, offset
            log.info("ingest routing restored up to offset %d; given offset %d", expected, offset)
            return origins
        self.ingest_covered_from = None
        kafka = await self.kafka()
        outs: list[Out] = []
        async for record in kafka.read(self.names.watch, 0, expected, until=offset):
            outs += self.ingest.handle(record.offset, record.value)
        self.ingest_next = offset
        self.ingest_since_snapshot = offset - first
        await self.send_missing(outs, origins)
        log.info(
            "ingest routing rebuilt from %s offset %d up to offset %d in %.3fs",
            self.names.watch,
            first,
            offset,
            time.perf_counter() - started,
        )
        return origins

    def rebuilding(self) -> bool:
        """Whether the routing tables or an admission partition are being rebuilt from the log."""
        return self.ingest_rebuilding or any(lock.locked() for lock in self._rebuilding.values())

    def assigned_sources(self) -> list[tuple[str, int]]:
        """The partitions of ``kueue.watch`` and ``kueue.admission`` assigned to this worker."""
        sources = (self.names.watch, self.names.admission)
        assigned = self.app.consumer.assignment()
        return sorted((tp.topic, tp.partition) for tp in assigned if tp.topic in sources)

    async def catch_up(self, partition: int, offset: int) -> DecisionWriter:
        """Make the engines of ``partition`` reflect every record before ``offset``; its writer.

        Anything but the expected offset means another worker had the partition,
        our last records come again, or records were skipped: start over from
        the newest snapshot (or offset 0), fencing whoever wrote decisions last.
        Right after a restore, records the snapshot covers may come first; they
        are let through here and skipped by the agent.
        """
        async with self._rebuilding.setdefault(partition, asyncio.Lock()):
            return await self._catch_up(partition, offset)

    async def hold_assigned(self) -> None:
        """Rebuild every admission partition assigned to this worker that no record has reached yet.

        The agent rebuilds a partition when its first record arrives. A worker
        that took over a partition whose records were all processed (and their
        offsets committed) before the previous owner died gets none, yet its
        engines may hold parked Workloads waiting for a requeue: the clock needs
        their state to know when to tick. So they are rebuilt up to the offset
        the group committed, the one Faust delivers next.
        """
        try:
            assigned = self.app.consumer.assignment()
        except Exception:  # no consumer yet, or it is being replaced in a rebalance
            return
        idle = sorted(
            tp.partition
            for tp in assigned
            if tp.topic == self.names.admission and tp.partition not in self.next_offset
        )
        if not idle:
            return
        committed = await (await self.kafka()).committed_offsets(self.app.conf.id, self.names.admission)
        for partition in idle:
            async with self._rebuilding.setdefault(partition, asyncio.Lock()):
                if partition in self.next_offset:
                    continue  # the agent rebuilt it meanwhile
                log.info("admission partition %d: assigned with no record to process yet", partition)
                await self._catch_up(partition, committed.get(partition, 0))
                if TP(self.names.admission, partition) not in self.app.consumer.assignment():
                    await self.forget(partition)  # revoked meanwhile

    async def _catch_up(self, partition: int, offset: int) -> DecisionWriter:
        writer = self.writers.get(partition)
        expected = self.next_offset.get(partition)
        if (
            writer is not None
            and writer.failed is None
            and expected is not None
            and (expected == offset or self.covered_from.get(partition, expected) <= offset < expected)
        ):
            return writer
        log.info(
            "admission partition %d: rebuilding for offset %d (expected %s, writer %s)",
            partition,
            offset,
            expected,
            "failed" if writer is not None and writer.failed else "ok",
        )
        await self.forget(partition)
        started = time.perf_counter()
        snapshot = await self.usable_snapshot(partition) if self.snapshot_every > 0 else None
        writer = DecisionWriter(self.settings, self.app.conf.id, self.names.decisions, partition)
        await writer.start(snapshot.covers.writer if snapshot is not None else None)
        self.writers[partition] = writer
        start, made, ends = 0, 0, None
        if snapshot is not None:
            self.admission.states[partition] = snapshot.state
            start, made, ends = snapshot.covers.offset, snapshot.covers.decisions, snapshot.covers.ends
            writer.resume_after(made)
            if offset < start:
                self.covered_from[partition] = offset
        log.info(
            "admission partition %d: reading the log from offset %d up to offset %d",
            partition,
            start,
            max(start, offset),
        )
        kafka = await self.kafka()
        outs: list[Out] = []
        async for record in kafka.read(self.names.admission, partition, start, until=offset):
            emitted = self.admission.feed(partition, record.offset, record.value)
            made += len(emitted.decisions)
            produced = self.admission.outs(partition, emitted)
            writer.write([(o.key, o.value) for o in produced if o.role == Role.DECISIONS])
            outs += [o for o in produced if o.role == Role.ADMISSION]
        self.next_offset[partition] = max(start, offset)
        self.made[partition] = made
        self.since_snapshot[partition] = max(0, offset - start)
        origins = self.log_origins(ends)
        await self.send_missing(outs, origins)
        await self.open_resend_window((self.names.admission, partition), origins)
        log.info(
            "admission partition %d rebuilt from offset %d up to offset %d in %.3fs",
            partition,
            start,
            max(start, offset),
            time.perf_counter() - started,
        )
        return writer

    async def usable_snapshot(self, partition: int) -> Snapshot | None:
        """The newest snapshot of ``partition`` this worker can take up, or None."""
        started = time.perf_counter()
        snapshot = await (await self.snapshots()).latest(partition)
        if snapshot is None:
            return None
        if not await self._holds(
            self.names.admission, partition, snapshot.covers.offset, snapshot.covers.last
        ):
            return None
        state, handler = snapshot.state, self.admission
        if (state.config, state.job_controller, state.overrides) != (
            handler.config,
            handler.job_controller,
            dict(handler.overrides or {}),
        ):
            log.warning(
                "admission partition %d: the snapshot at offset %d was taken with other settings "
                "(job controller, configuration); reading the log from offset 0",
                partition,
                snapshot.covers.offset,
            )
            return None
        log.info(
            "admission partition %d: restored the snapshot at offset %d (%d bytes) in %.3fs",
            partition,
            snapshot.covers.offset,
            snapshot.size,
            time.perf_counter() - started,
        )
        return snapshot

    async def usable_routing(self) -> RoutingSnapshot | None:
        started = time.perf_counter()
        snapshot = await (await self.snapshots()).latest_routing(TABLES)
        if snapshot is not None and not await self._holds(
            self.names.watch, 0, snapshot.offset, snapshot.last
        ):
            return None
        if snapshot is not None:
            log.info(
                "ingest routing: restored the snapshot at offset %d (%d bytes) in %.3fs",
                snapshot.offset,
                snapshot.size,
                time.perf_counter() - started,
            )
        return snapshot

    async def _holds(self, topic: str, partition: int, offset: int, last: str) -> bool:
        """Whether ``topic[partition]`` holds the record a snapshot at ``offset`` says it last covered."""
        kafka = await self.kafka()
        value = None
        if offset > 0:
            async for record in kafka.read(topic, partition, offset - 1, until=offset):
                value = record.value
        if record_digest(value) == last and (offset == 0 or value is not None):
            return True
        log.warning(
            "%s[%d]: the snapshot at offset %d covers other records than this log holds "
            "(the topic was recreated?); reading the log from offset 0",
            topic,
            partition,
            offset,
        )
        return False

    def routing_snapshot_due(self) -> bool:
        if self.snapshot_every <= 0 or self.ingest_since_snapshot < self.snapshot_every:
            return False
        return self._routing_snapshot is None or self._routing_snapshot.done()

    async def take_routing_snapshot(self, acker: InOrderAcker, last: bytes) -> None:
        """Encode the routing tables now; write them once every record they led to is delivered."""
        ends = await (await self.kafka()).end_offsets(self.names.admission)
        assert self.ingest_next is not None
        offset = self.ingest_next
        blob = encode_tables({name: table.data for name, table in self.ingest_tables.items()})
        digest = record_digest(last)
        self.ingest_since_snapshot = 0
        delivered = acker.delivered()

        async def publish() -> None:
            try:
                async with asyncio.timeout(SNAPSHOT_WAIT):
                    written = await delivered
                if written:
                    await (await self.snapshots()).write_routing(offset, ends, digest, blob)
                    log.info("ingest routing: snapshot at offset %d written (%d bytes)", offset, len(blob))
            except (TimeoutError, KafkaError, LogError) as exc:
                log.warning("ingest routing: snapshot at offset %d not written: %r", offset, exc)

        self._routing_snapshot = asyncio.ensure_future(publish())

    def snapshot_due(self, partition: int) -> bool:
        if self.snapshot_every <= 0 or self.since_snapshot.get(partition, 0) < self.snapshot_every:
            return False
        task = self._snapshotting.get(partition)
        if task is not None and not task.done():
            return False
        return time.monotonic() - self._snapshot_at >= 9 * self._snapshot_cost

    async def take_snapshot(self, partition: int, acker: InOrderAcker, last: bytes) -> None:
        """Encode the state of ``partition`` now; write it once everything it covers is delivered."""
        writer = self.writers[partition]
        ends = await (await self.kafka()).end_offsets(self.names.admission)
        state = self.admission.states.get(partition)
        if state is None or self.writers.get(partition) is not writer or partition not in self.next_offset:
            return  # revoked meanwhile
        started = time.monotonic()
        blob = encode_state(state)
        self._snapshot_cost, self._snapshot_at = time.monotonic() - started, time.monotonic()
        offset, made, digest = self.next_offset[partition], self.made[partition], record_digest(last)
        self.since_snapshot[partition] = 0
        delivered = acker.delivered()

        async def publish() -> None:
            try:
                async with asyncio.timeout(SNAPSHOT_WAIT):
                    written = await delivered
                if not written:
                    return
                async with asyncio.timeout(SNAPSHOT_WAIT):
                    mark = await writer.committed_through(made)
                if mark is None:
                    return
                covers = Coverage(partition, offset, made, mark, ends, digest)
                await (await self.snapshots()).write(covers, blob)
                log.info(
                    "admission partition %d: snapshot at offset %d written (%d bytes)",
                    partition,
                    offset,
                    len(blob),
                )
            except (TimeoutError, KafkaError, LogError) as exc:
                # A snapshot is an optimisation: without it a restart reads more of the log.
                log.warning(
                    "admission partition %d: snapshot at offset %d not written: %r", partition, offset, exc
                )

        self._snapshotting[partition] = asyncio.ensure_future(publish())

    async def send_missing(self, outs: Sequence[Out], origins: LogOrigins) -> None:
        """Send the admission records among ``outs`` that are not in the log yet.

        Rebuilding produces again everything its input ever produced. Whoever
        processed that input before sent it before acknowledging the input, as
        a rule; but an input can also reach a worker only as part of a rebuild
        (Faust may skip records after a rebalance), and then this is the only
        time its records are produced. Checking by origin keeps the log free of
        copies. ``origins`` reads the log from a snapshot's ends when there is
        one: no record of ``outs`` can be before them (they came from input
        after it).
        """
        missing = await origins.missing([o for o in outs if origin_key(o) is not None])
        if missing:
            log.warning("sending %d admission records that were missing from the log", len(missing))
            await self.send_outside(missing)

    def _decisions(self, partition: int, emitted: Emitted) -> list[tuple[bytes, bytes]]:
        return [(o.key, o.value) for o in self.admission.outs(partition, emitted) if o.role == Role.DECISIONS]

    def engines(self, partitions: Iterable[int] | None = None) -> list[Engine]:
        """The engines of the shards of ``partitions`` (default: every partition this worker holds)."""
        states = self.admission.states
        chosen = sorted(states) if partitions is None else [p for p in partitions if p in states]
        return [states[p].shards[s].engine for p in chosen for s in sorted(states[p].shards)]

    def read_engines(self, fn: Callable[[Sequence[Engine], str], T]) -> T:
        """``fn(engines, where)`` over the shards of the partitions this worker holds and has rebuilt,
        run on the agents' loop; from another thread."""
        loop = self.loop
        if loop is None:
            raise Unavailable("not ready: this worker has not been given admission partitions yet")

        async def call() -> T:
            held = sorted(self.next_offset)
            # Partitions with a state but no next offset are being read again from offset 0.
            rebuilding = sorted(set(self.admission.states) - set(held))
            if not held and not rebuilding:
                raise Unavailable("this worker holds no admission partition now")
            where = (
                f" in the shards this worker holds (partitions {', '.join(map(str, held))} of "
                f"{self.names.admission}); the other partitions are other workers'"
            )
            try:
                return fn(self.engines(held), where)
            except QueueNotFound:
                if not rebuilding:
                    raise
                listed = ", ".join(map(str, rebuilding))
                raise Unavailable(
                    f"partitions {listed} of {self.names.admission} are being rebuilt"
                ) from None

        return on_loop(loop, call)

    def measure(self) -> None:
        """Take the gauges of the shards held now, and the lag of their partitions."""
        if self.series is None:
            return
        self.series.refresh(self.engines())
        lag = []
        for partition in sorted(self.next_offset):
            try:
                end = self.app.consumer.highwater(TP(self.names.admission, partition))
            except Exception:  # not assigned to this worker any more
                continue
            if end is not None and end >= 0:
                lag.append((self.names.admission, partition, end, self.next_offset[partition]))
        self.lag = lag

    async def forget(self, partition: int) -> None:
        self.resend.pop((self.names.admission, partition), None)
        self.admission.drop(partition)
        self.next_offset.pop(partition, None)
        self.covered_from.pop(partition, None)
        writer = self.writers.pop(partition, None)
        if writer is not None:
            await writer.stop()

    def update_views(self, partition: int, emitted: Emitted) -> None:
        state = self.admission.state(partition)
        held, source = self.held, (self.names.admission, partition)
        for shard in sorted(emitted.touched):
            engine = state.shards[shard].engine
            keys = self._view_keys.setdefault(shard, set())
            current = set()
            for name in sorted(engine.cqs):
                key = f"{shard}/{name}"
                current.add(key)
                for table, value in zip(("usage", "quotas"), cq_views(engine.cqs[name].node), strict=True):
                    if held.get(source, table, key) != value:
                        held.set(source, table, key, value)
            # ClusterQueues handed over to another shard (or deleted) leave this one's view.
            for key in sorted(keys - current):
                held.delete(source, "usage", key)
                held.delete(source, "quotas", key)
            self._view_keys[shard] = current
        for d in emitted.decisions:
            held.set(source, "workloads", f"{d.ref.namespace}/{d.ref.name}", workload_view(d))

    async def flush_held(self, ours: Iterable[tuple[str, int]] | None = None) -> None:
        """Send the held Table changes of the inputs this worker holds, or of ``ours`` (inputs
        being revoked, or all at a stop: still this worker's) (see :mod:`.held_writes`)."""
        if ours is not None:
            records = self.held.take(lambda _: True, ours)
        else:
            try:
                assigned = {(tp.topic, tp.partition) for tp in self.app.consumer.assignment()}
            except Exception:  # no consumer yet, or it is being replaced in a rebalance
                return
            records = self.held.take(lambda source: source in assigned)
        if not records:
            return
        producer = await self.producer()
        sent = [
            await producer.send(r.topic, value=r.value, key=r.key, partition=r.partition) for r in records
        ]
        for outcome in await asyncio.gather(*sent, return_exceptions=True):
            if isinstance(outcome, BaseException):
                # A mirror left behind until the key changes again; no decision reads it.
                log.warning("a Table's changelog record could not be sent: %r", outcome)
                break


def workload_view(d: DecisionRecord) -> dict[str, str]:
    """A Workload's entry in the ``workloads`` view: its last decision."""
    admission = d.status.get("admission") or {}
    return {
        "shard": d.cause.shard,
        "action": d.action.value,
        "clusterQueue": admission.get("clusterQueue", ""),
    }


def cq_views(node: QuotaNode) -> tuple[dict[str, str], dict[str, str]]:
    """A ClusterQueue's ``usage`` and ``quotas`` views: quantities by ``resource/flavor``."""
    used = {f"{r}/{f}": resource_quantity(r, a) for (f, r), a in sorted(node.usage.items()) if a}
    nominal = {f"{r}/{f}": resource_quantity(r, q.nominal) for (f, r), q in sorted(node.quotas.items())}
    return used, nominal


class InOrderAcker:
    """Acknowledges an agent's inputs in order, each once the records it produced are delivered.

    The agent goes on with the next input meanwhile, so a slow acknowledgement
    (``acks=all`` on the broker) costs latency once, not once per record.
    """

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        # (input, its deliveries) or (None, a future set once everything before it is delivered)
        self.queue: asyncio.Queue[tuple[Any, Any]] = asyncio.Queue()
        self.task = asyncio.ensure_future(self._run())

    def add(self, event: Any, deliveries: list[asyncio.Future[Any]]) -> None:
        self.queue.put_nowait((event, deliveries))

    def delivered(self) -> asyncio.Future[bool]:
        """True once the records of every input added so far are delivered; False if one never is."""
        passed: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.queue.put_nowait((None, passed))
        return passed

    async def _run(self) -> None:
        while True:
            event, deliveries = await self.queue.get()
            if event is None:
                deliveries.set_result(True)
                continue
            try:
                await asyncio.gather(*deliveries)
            except Exception:
                # Not acknowledged, so neither is anything after it: the input is
                # processed again after a restart, and its records sent again.
                log.exception("a record could not be delivered; acknowledging stops")
                while not self.queue.empty():
                    event, deliveries = self.queue.get_nowait()
                    if event is None:
                        deliveries.set_result(False)
                return
            await self.stream.ack(event)


def faust_credentials(settings: KafkaSettings) -> Any:
    """What Faust's ``broker_credentials`` takes for ``settings``: SASL (over TLS or not), TLS, or None."""
    context = settings.ssl_context()
    if settings.uses_sasl:
        assert settings.sasl_password is not None
        return faust.SASLCredentials(
            username=settings.sasl_username,
            password=settings.sasl_password.get_secret_value(),
            ssl_context=context,
            mechanism=settings.sasl_mechanism,
        )
    if context is not None:
        return faust.SSLCredentials(context)
    return None


def build_app(
    broker: KafkaTarget,
    *,
    app_id: str = DEFAULT_APP_ID,
    prefix: str = "",
    datadir: str | None = None,
    commit_interval: float = COMMIT_INTERVAL,
    job_controller: bool = True,
    clock: bool = True,
    cluster: bool = False,
    runtime_series: KueueSeries | None = None,
    dashboard: LiveDashboard | None = None,
    snapshot_every: int = DEFAULT_SNAPSHOT_EVERY,
    instance_id: str | None = None,
    stall_limit: float = STALL_LIMIT,
) -> tuple[faust.App, Runtime]:
    names = TopicNames(prefix)
    settings = kafka_settings(broker)
    app = faust.App(
        app_id,
        # Addresses only: the credentials go apart, so no URL Faust shows carries them.
        broker=";".join(f"kafka://{a}" for a in settings.brokers),
        broker_credentials=faust_credentials(settings),
        processing_guarantee="exactly_once",
        store="memory://",
        datadir=datadir or str(Path(".kueuestream") / "faust" / app_id),
        topic_partitions=names.partition_counts()[names.admission],
        topic_replication_factor=1,
        web_enabled=False,
        broker_commit_interval=commit_interval,
        producer_linger=0.0,
        consumer_auto_offset_reset="earliest",
        # A killed worker's partitions move to the others (or to its restart) this quickly.
        broker_session_timeout=6.0,
        broker_heartbeat_interval=1.0,
        broker_rebalance_timeout=20.0,
        consumer_metadata_max_age_ms=CONSUMER_METADATA_MAX_AGE_MS,
        # The Tables are views (see above); after a rebalance an in-memory table may
        # hold writes of an aborted transaction, which this check would call fatal.
        recovery_consistency_check=False,
        # No standby copies of the Tables on other workers: they are views, restored from
        # their changelogs by whichever worker takes a partition. A standby reads every
        # other worker's changelog writes all the time, and its recovery after a
        # rebalance crashed a worker seeking a negative offset.
        table_standby_replicas=0,
        TableManager=TailAwareTableManager,
        # A static member of the group (KIP-345): restarted under the same id within the
        # session timeout, the worker takes its partitions back with no rebalance.
        consumer_group_instance_id=instance_id,
    )
    # faust-streaming stops the app when a stalled worker finds its transactions fenced.
    app.transport = FenceTolerantTransport(app.conf.broker_consumer, app)
    # Before any stream's buffer is made: each is emptied through the flow control it was made with.
    app.flow_control = RefetchingFlowControl(
        lambda tp, offset: app.consumer.seek(tp, offset), (names.watch, names.admission, names.decisions)
    )
    runtime = Runtime(app, settings, names, job_controller, cluster, snapshot_every)
    # Recovery reads the changelogs' tails, or waits 10 s for each restart and rebalance.
    cast(TailAwareTableManager, app.tables).tails = runtime.changelog_tails

    def topic(name: str, partitions: int) -> Any:
        return app.topic(
            name,
            partitions=partitions,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
        )

    counts = names.partition_counts()
    watch = topic(names.watch, counts[names.watch])
    admission = topic(names.admission, counts[names.admission])
    decisions = topic(names.decisions, counts[names.admission])

    @app.agent(watch, name="ingest")
    async def ingest(stream: Any) -> None:
        # Acked by hand once everything it produced is sent: Faust's own ack also
        # fires when processing is interrupted (a rebalance cancels the agent),
        # which would commit an input whose output was never written.
        acked = stream.noack()
        acker = InOrderAcker(acked)
        async for event in acked.events():
            offset = event.message.offset
            await runtime.ingest_catch_up(offset)
            assert runtime.ingest_next is not None
            if offset < runtime.ingest_next:
                # In the routing snapshot just restored, with everything it produced.
                acker.add(event, [])
                continue
            runtime.ingest_covered_from = None
            HeldTable.live = True
            try:
                outs = runtime.ingest.handle(offset, event.value)
            finally:
                HeldTable.live = False
            runtime.ingest_next = offset + 1
            runtime.ingest_since_snapshot += 1
            acker.add(event, await runtime.send_after_takeover((names.watch, 0), offset, outs))
            if runtime.routing_snapshot_due():
                await runtime.take_routing_snapshot(acker, event.value)

    @app.agent(admission, name="admission")
    async def admit(stream: Any) -> None:
        # Acked by hand once everything it produced is sent: Faust's own ack also
        # fires when processing is interrupted (a rebalance cancels the agent),
        # which would commit an input whose output was never written.
        acked = stream.noack()
        acker = InOrderAcker(acked)
        async for event in acked.events():
            partition, offset = event.message.partition, event.message.offset
            writer = await runtime.catch_up(partition, offset)
            if offset < runtime.next_offset[partition]:
                # In the snapshot just restored, with everything it produced.
                acker.add(event, [])
                continue
            runtime.covered_from.pop(partition, None)
            emitted = runtime.admission.feed(partition, offset, event.value)
            runtime.next_offset[partition] = offset + 1
            runtime.made[partition] += len(emitted.decisions)
            runtime.since_snapshot[partition] += 1
            outs = runtime.admission.outs(partition, emitted, event.value)
            writer.write([(o.key, o.value) for o in outs if o.role == Role.DECISIONS])
            runtime.update_views(partition, emitted)
            if runtime.series is not None:
                runtime.series.count(runtime.engines([partition]), emitted.decisions)
            if runtime.dashboard is not None:
                runtime.dashboard.note(emitted.decisions)
            outside = [o for o in outs if o.role != Role.DECISIONS]
            acker.add(event, await runtime.send_after_takeover((names.admission, partition), offset, outside))
            if runtime.snapshot_due(partition):
                await runtime.take_snapshot(partition, acker, event.value)

    async def apply(stream: Any) -> None:
        # Acked by hand once everything it produced is sent: Faust's own ack also
        # fires when processing is interrupted (a rebalance cancels the agent),
        # which would commit an input whose output was never written.
        acked = stream.noack()
        acker = InOrderAcker(acked)
        async for event in acked.events():
            decision = read_decision(event.value)
            out = applied_out(event.message.partition, decision, ApplyOutcome.APPLIED, APPLIED_DETAIL)
            acker.add(event, await runtime.queue_outside([out]))

    if not cluster:
        # With a cluster, ``kueuestream apply`` writes the decisions there and records the outcomes.
        app.agent(decisions, name="applier")(apply)

    async def tick_clock() -> None:
        # Engines defer some work to a later time (Kueue's requeue batch); time only
        # moves with the log, so a due wakeup is written there as a clock tick, and a
        # replay sees the very same clock. Ticks from several workers are harmless.
        # Only engines that are rebuilt have wakeups: a partition assigned after a
        # restart or rebalance is rebuilt here when no record of its own arrives.
        try:
            await runtime.hold_assigned()
        except (KafkaError, LogError) as exc:
            log.warning("the clock could not rebuild the admission partitions assigned: %r", exc)
        due = runtime.admission.next_wakeup_ms()
        now = time.time_ns() // 1_000_000
        if due is not None and due <= now:
            tick = codec.encode(batch_marker(CLOCK_TICK, "local", now))
            producer = await runtime.producer()
            await producer.send_and_wait(names.watch, value=tick, key=b"", partition=0)

    if clock:
        app.timer(interval=CLOCK_INTERVAL)(tick_clock)

    async def flush_held() -> None:
        await runtime.flush_held()

    app.timer(interval=FLUSH_INTERVAL)(flush_held)

    if stall_limit > 0:
        watch_progress(app, runtime, StallWatch(stall_limit))

    if runtime_series is not None:
        runtime.series = runtime_series

        async def measure() -> None:
            runtime.measure()

        app.timer(interval=METRICS_INTERVAL)(measure)

    if dashboard is not None:
        runtime.dashboard = dashboard

        async def show() -> None:
            dashboard.publish(runtime.engines())

        app.timer(interval=METRICS_INTERVAL)(show)

    async def on_assigned(sender: Any, *args: Any, signal: Any, **kwargs: Any) -> None:
        runtime.assigned = True
        runtime.loop = asyncio.get_running_loop()

    async def on_revoked(sender: Any, *args: Any, signal: Any, **kwargs: Any) -> None:
        revoked: set[Any] = args[0] if args else kwargs.get("revoked", set())
        await runtime.flush_held([(tp.topic, tp.partition) for tp in revoked])
        for tp in sorted(revoked):
            if tp.topic == names.admission:
                await runtime.forget(tp.partition)

    async def on_shutdown(sender: Any, *args: Any, signal: Any, **kwargs: Any) -> None:
        await runtime.flush_held(runtime.held.sources())
        for partition in sorted(runtime.writers):
            await runtime.writers[partition].drain()
        await runtime.close()

    # mode's stubs type receivers more narrowly than the calls they receive.
    app.on_partitions_revoked.connect(cast(Any, on_revoked))
    app.on_partitions_assigned.connect(cast(Any, on_assigned))
    app.on_before_shutdown.connect(cast(Any, on_shutdown))

    return app, runtime


def watch_progress(app: faust.App, runtime: Runtime, watch: StallWatch) -> None:
    """Check on a timer that the worker takes the records waiting in the partitions it holds,
    and end it when it has not for ``watch.limit`` seconds (see :mod:`.stall_watch`)."""

    async def check_progress() -> None:
        if app.rebalancing or getattr(app, "in_recovery", False) or runtime.rebuilding():
            watch.reset()
            return
        try:
            assigned = runtime.assigned_sources()
        except Exception:  # no consumer yet, or it is being replaced in a rebalance
            watch.reset()
            return
        try:
            kafka = await runtime.kafka()
            seen = await positions(kafka, app.conf.id, assigned)
            stalls = watch.observe(time.monotonic(), seen)
            if stalls:
                stalls = await confirmed(kafka, stalls, seen)
        except (KafkaError, LogError) as exc:
            # Only what the broker shows counts: unable to ask, the worker is not blamed.
            log.info("progress check skipped: %r", exc)
            watch.reset()
            return
        if stalls:
            give_up(stalls, consumer_state.describe(app, [s.key for s in stalls]))

    app.timer(interval=watch.interval)(check_progress)


async def _create_topics(broker: KafkaSettings, names: TopicNames) -> None:
    async with KafkaLog(broker) as kafka:
        await ensure_topics(kafka, names)


def run_worker(
    broker: KafkaTarget,
    *,
    app_id: str = DEFAULT_APP_ID,
    prefix: str = "",
    datadir: str | None = None,
    loglevel: str = "warning",
    clock: bool = True,
    cluster: bool = False,
    metrics_port: int | None = None,
    snapshot_every: int = DEFAULT_SNAPSHOT_EVERY,
    instance_id: str | None = None,
) -> int:
    """``kueuestream worker``: run one Faust worker until it is stopped.

    ``clock=False`` writes no clock ticks: time then moves only with the events
    the sources write, which keeps a run comparable event for event with an
    embedded run of the same events (the tests do that). ``cluster=True`` is
    for a watch that ``kueuestream watch`` fills from a cluster: ingest runs in
    cluster mode, nothing stands in for the job controller, and there is no
    applier agent, ``kueuestream apply`` writes the decisions to the cluster.
    ``snapshot_every``: records of an admission partition between two snapshots
    of its state (0: none; see :mod:`.snapshots`). ``instance_id`` makes the
    worker a static member of the consumer group under that id.

    The worker first connects on its own to create the topics: settings the
    brokers refuse (a wrong password, an untrusted certificate) end it there,
    with one line on stderr and exit status 1 (2 for settings that are invalid).
    A worker that holds records it no longer takes exits with status 75
    (see :mod:`.stall_watch`).
    """
    names = TopicNames(prefix)

    def work(settings: KafkaSettings) -> int:
        asyncio.run(_create_topics(settings, names))
        served, usable = serve_metrics(metrics_port, lambda line: print(line, flush=True), Served)
        if not usable:
            return 2
        built: list[Runtime] = []

        def read_engines(fn: Callable[[Sequence[Engine], str], T]) -> T:
            if not built:
                raise Unavailable("not ready: the worker is starting")
            return built[0].read_engines(fn)

        if served is not None:
            # Routed before the worker is built, as the endpoint already answers.
            serve_visibility(served.endpoint, read_engines)
        app, runtime = build_app(
            settings,
            app_id=app_id,
            prefix=prefix,
            datadir=datadir,
            clock=clock,
            cluster=cluster,
            runtime_series=KueueSeries(served.registry) if served is not None else None,
            dashboard=worker_dashboard(served.endpoint, settings, prefix) if served is not None else None,
            snapshot_every=snapshot_every,
            instance_id=instance_id,
        )
        if served is not None:
            served.ready = lambda: runtime.assigned
            served.positions = lambda: runtime.lag
        built.append(runtime)
        worker = faust.Worker(app, loglevel=loglevel, quiet=True, redirect_stdouts=False)
        try:
            worker.execute_from_commandline()
        except SystemExit as exc:
            return int(exc.code or 0)
        finally:
            if served is not None:
                served.endpoint.stop()
        return 0

    return run_with_kafka(broker, work, (LogError,))
