"""``kueuestream apply --kubeconfig PATH --broker ...``: the cluster's writer beside Kafka workers.

It reads ``kueue.decisions`` (committed records only) and writes each decision
to the cluster with the applier, recording every outcome in ``kueue.applied``;
and it reads ``kueue.watch``, which ``kueuestream watch`` fills, to run Kueue's
job integration (:mod:`.jobs`). The workers run with ``--cluster``.

On start it reads both topics from the beginning, and ``kueue.applied``:
decisions that already have an outcome are not written again, and the job
integration takes in every watch event before it reconciles any Job. Then it
follows both topics. One ``apply`` per cluster may run at a time.

With ``--shadow`` it writes nothing to the cluster: the decisions and the
Workloads' live status go to a :class:`~.shadow.ShadowComparison` instead of
the applier and the job integration, and ``kueue.applied`` gets nothing.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TextIO

from aiokafka import AIOKafkaConsumer, TopicPartition

from kueuestream.agents.faust_worker.publish import ensure_topics
from kueuestream.agents.kafka_commands import run_with_kafka
from kueuestream.agents.kube.client import RETRY_FOREVER, KubeConnection
from kueuestream.agents.kube.cluster_side import ClusterSide, decode_watch
from kueuestream.agents.kube.lease import LeaseSettings
from kueuestream.agents.kube.rest import KubeObjects
from kueuestream.agents.kube.serving import (
    applied_batches,
    cancel_on_signals,
    connected_with_kafka,
    run_service,
)
from kueuestream.agents.kube.shadow import ShadowComparison, ShadowDifferences
from kueuestream.agents.metrics.serving import Served, serve_metrics
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.codec import DecodeError
from kueuestream.streams.kafka_log import KafkaLog
from kueuestream.streams.kafka_settings import KafkaSettings, KafkaTarget, kafka_settings
from kueuestream.streams.log import Log
from kueuestream.streams.schemas import AppliedRecord, DecisionRecord

FLUSH_INTERVAL_S = 0.05
POLL_MS = 200


async def _read_all(log: Log, topic: str) -> tuple[list[bytes], dict[int, int]]:
    """Every record of ``topic`` (partition by partition), and where each partition ends."""
    values: list[bytes] = []
    ends: dict[int, int] = {}
    for partition in range(await log.partitions(topic)):
        ends[partition] = 0
        async for record in log.read(topic, partition):
            values.append(record.value)
            ends[partition] = record.offset + 1
    return values, ends


class KafkaApplier:
    """A :class:`ClusterSide` between Kafka topics and a cluster."""

    def __init__(
        self,
        conn: KubeConnection,
        kafka: KafkaLog,
        broker: KafkaTarget,
        names: TopicNames,
        shadow: ShadowComparison | None = None,
    ) -> None:
        self.conn = conn
        self.shadow = shadow
        self.kafka = kafka
        self.broker = kafka_settings(broker)
        self.names = names
        # A write waits out an unreachable API server rather than being given up.
        self.objects = KubeObjects(conn.api, RETRY_FOREVER)
        self.side = ClusterSide(self.objects, self._outcome)
        self._outcomes: list[AppliedRecord] = []
        self.applied_partitions = 1
        self.positions: dict[TopicPartition, int] = {}
        # The last end offset the consumer saw of each partition it follows.
        self.ends: dict[TopicPartition, int] = {}

    def _outcome(self, record: AppliedRecord) -> None:
        self._outcomes.append(record)

    async def start(self) -> int:
        """Take in what the topics hold; the number of decisions still to write."""
        n = self.names
        await ensure_topics(self.kafka, n)
        self.applied_partitions = await self.kafka.partitions(n.applied)
        watch, watch_ends = await _read_all(self.kafka, n.watch)
        decisions, decision_ends = await _read_all(self.kafka, n.decisions)
        applied, _ = await _read_all(self.kafka, n.applied)
        if self.shadow is not None:
            self.shadow.observe(e for raw in watch if (e := decode_watch(raw)) is not None)
            for raw in decisions:
                self._decide(raw)
            self.shadow.write_report()
            queued = 0
        else:
            queued = self.side.restore(watch, decisions, applied)
        self.positions = {TopicPartition(n.watch, p): end for p, end in watch_ends.items()}
        self.positions.update({TopicPartition(n.decisions, p): end for p, end in decision_ends.items()})
        return queued

    async def flush(self) -> None:
        if not self._outcomes:
            return
        records, self._outcomes = self._outcomes, []
        for partition, items in applied_batches(records, self.applied_partitions):
            await self.kafka.append_many(self.names.applied, items, partition=partition)

    async def follow(self) -> None:
        """Hand new watch events and decisions on as they are committed, until cancelled."""
        consumer = AIOKafkaConsumer(
            **self.broker.client_options(),
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
        )
        await consumer.start()
        try:
            consumer.assign(sorted(self.positions))
            for tp, offset in sorted(self.positions.items()):
                consumer.seek(tp, offset)
            while True:
                batches = await consumer.getmany(timeout_ms=POLL_MS)
                # The watch first: a decision's Workload version is then in the cache.
                for tp in sorted(batches, key=lambda t: (t.topic != self.names.watch, t.partition)):
                    for message in batches[tp]:
                        self._take(tp.topic, message.value or b"")
                        self.positions[tp] = message.offset + 1
                for tp in self.positions:
                    end = consumer.last_stable_offset(tp)
                    if end is not None:
                        self.ends[tp] = end
                await self.flush()
        finally:
            await consumer.stop()

    def lag(self) -> list[tuple[str, int, int, int]]:
        """(topic, partition, end, next offset to take) of every partition followed."""
        positions = list(self.positions.items())
        return [
            (tp.topic, tp.partition, self.ends.get(tp, offset), offset) for tp, offset in sorted(positions)
        ]

    def _take(self, topic: str, value: bytes) -> None:
        if topic == self.names.watch:
            event = decode_watch(value)
            if event is not None:
                (self.shadow or self.side).observe([event])
            return
        self._decide(value)

    def _decide(self, value: bytes) -> None:
        try:
            decision = codec.decode(value, DecisionRecord)
        except DecodeError:
            return  # the admission agent wrote it; nothing a cluster could be told
        (self.shadow or self.side).decide(decision)

    async def flusher(self, interval_s: float = FLUSH_INTERVAL_S) -> None:
        while True:
            await asyncio.sleep(interval_s)
            await self.flush()


async def _serve(
    kubeconfig: str | None,
    context: str | None,
    broker: KafkaSettings,
    prefix: str,
    out: TextIO,
    lease: LeaseSettings | None,
    shadow: ShadowComparison | None = None,
    served: Served | None = None,
) -> int:
    names = TopicNames(prefix)
    async with connected_with_kafka(kubeconfig, context, broker, lease, out) as (conn, elector, kafka):
        applier = KafkaApplier(conn, kafka, broker, names, shadow)
        if elector is not None:
            applier.objects.guard = elector.check
        queued = await applier.start()
        if served is not None:
            served.positions = applier.lag
            served.ready = lambda: True
        print(
            f"applying {names.decisions} to {conn.server} (context {conn.context}); "
            f"{queued} decisions from before to write",
            file=out,
            flush=True,
        )
        tasks = [
            asyncio.create_task(applier.follow(), name="follow"),
            asyncio.create_task(applier.flusher(), name="flush"),
        ]
        if shadow is None:
            tasks.append(asyncio.create_task(applier.side.jobs.run(), name="jobs"))
        stop = cancel_on_signals(*(t.cancel for t in tasks))
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                if not task.cancelled():
                    task.result()
        finally:
            stop()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await applier.side.applier.idle()
            await applier.flush()
        counters = applier.side.applier.counters
        print(
            f"outcomes {dict(sorted(counters.outcomes.items()))}; {applier.objects.writes} API writes",
            file=out,
            flush=True,
        )
    return 0


def run_apply(
    kubeconfig: str | None,
    broker: KafkaTarget,
    *,
    context: str | None = None,
    prefix: str = "",
    out: TextIO | None = None,
    lease: LeaseSettings | None = None,
    shadow: bool = False,
    shadow_report: Path | None = None,
    metrics_port: int | None = None,
) -> int:
    """``kueuestream apply``: until SIGINT/SIGTERM; 0 on a clean stop, 2 for a usage error.

    With ``metrics_port``, ``/readyz`` is ready once the topics have been read
    up to where they ended at start.
    """
    stream = out or sys.stdout

    def show(line: str) -> None:
        print(line, file=stream, flush=True)

    comparison = ShadowComparison(show, shadow_report) if shadow else None

    async def observed(settings: KafkaSettings) -> int:
        served, usable = serve_metrics(metrics_port, show, Served)
        if not usable:
            return 2
        if served is not None and comparison is not None:
            served.registry.register(ShadowDifferences(comparison))
        try:
            return await _serve(kubeconfig, context, settings, prefix, stream, lease, comparison, served)
        finally:
            if served is not None:
                served.endpoint.stop()

    return run_with_kafka(broker, lambda s: run_service(observed(s), s.redact), failures=())
