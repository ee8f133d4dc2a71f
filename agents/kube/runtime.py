"""``kueuestream run --kubeconfig PATH``: the embedded runtime against a cluster.

One process, one local log (``./.kueuestream`` by default), the same agents as
``run --source``, with the cluster at both ends:

    watcher ─▶ kueue.watch ─▶ ingest ─▶ kueue.admission ─▶ admission ─▶ kueue.decisions
       ▲                                                                     │
       └───── API server ◀── job integration (Jobs, Workloads) ◀── applier ◀─┘

The watcher (:mod:`.watcher`) hands each group of watch events to this
runtime, which appends them to the log and runs them through the pipeline
(:class:`~kueuestream.agents.embedded.pipeline.EmbeddedPipeline` in cluster
mode) before the watcher goes on; the new decisions go to the applier and
the events to the job integration (:mod:`.cluster_side`). Outcomes go to
``kueue.applied``. Time moves with the events; when an engine waits for a
later time (Kueue's requeue batch), a clock tick is written to the log then.

Operating. With a :class:`~kueuestream.agents.metrics.kueue_series.KueueSeries`
the engines' Kueue-named series are taken after each group. In shadow mode
(a :class:`~kueuestream.agents.kube.shadow.ShadowComparison`) nothing is
written to the cluster: no status, no Job started or stopped, no Workload
created; the decisions and the Workloads' live status go to the comparison
instead of the applier and the job integration.

MultiKueue. On a manager (a cluster with MultiKueueClusters), the runtime
also runs :class:`~kueuestream.agents.kube.multikueue.side.MultiKueueSide`:
a link per worker whose events go into the same log with the cluster name
``multikueue:<name>``, and the executor of the dispatcher's decisions
(``kueue.multikueue`` to ``kueue.multikueue.applied``). Only the manager's own
events reach the job integration.

Restart. The watcher resumes from the resourceVersions in the log; the
pipeline rebuilds itself from the log; the job integration takes the log's
watch events in and reconciles every Job; decisions without an outcome in
``kueue.applied`` are written.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO, TypeVar

from kueuestream.admission.engine import Engine
from kueuestream.admission.multikueue.names import DEFAULT_SECRETS_NAMESPACE
from kueuestream.agents.dashboard.live import LiveDashboard
from kueuestream.agents.dashboard.serve import run_dashboard
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.embedded.runtime import describe_decision, describe_error, now_ms
from kueuestream.agents.kube.client import RETRY_FOREVER, KubeConnection, connect
from kueuestream.agents.kube.cluster_side import ClusterSide, decode_watch
from kueuestream.agents.kube.config_file import config_file_event
from kueuestream.agents.kube.lease import LeaseSettings, leadership
from kueuestream.agents.kube.multikueue.side import MultiKueueSide, is_manager_event
from kueuestream.agents.kube.resources import kinds_to_watch
from kueuestream.agents.kube.rest import KubeObjects
from kueuestream.agents.kube.serving import applied_batches, cancel_on_signals, run_service
from kueuestream.agents.kube.shadow import ShadowComparison, ShadowDifferences
from kueuestream.agents.kube.watch_ledger import ledger_from_log
from kueuestream.agents.kube.watch_service import WatchOptions
from kueuestream.agents.kube.watcher import Watcher
from kueuestream.agents.metrics.kueue_series import KueueSeries
from kueuestream.agents.metrics.serving import Served, serve_metrics
from kueuestream.agents.metrics.visibility import Unavailable, on_loop, serve_visibility
from kueuestream.streams import codec
from kueuestream.streams.codec import DecodeError
from kueuestream.streams.file_log import DEFAULT_DIRECTORY, FileLog
from kueuestream.streams.schemas import AppliedRecord, DecisionRecord, ErrorRecord, WatchEvent

T = TypeVar("T")

CLOCK_INTERVAL_S = 0.25

Show = Callable[[str], None]


@dataclass(slots=True)
class ClusterStats:
    watch_events: int = 0
    decisions: int = 0
    outcomes: int = 0


class EmbeddedCluster:
    """The pipeline over a local log, fed by a watcher, writing back through a :class:`ClusterSide`.

    It is the watcher's sink: :meth:`emit` returns once the events are in the
    log and through the pipeline. The log may be opened with ``fsync=False``:
    everything a group of events wrote is made durable with one fsync before
    any decision of that group reaches the cluster. Outcomes become durable
    with the next group; a decision whose outcome was lost in a crash is
    written again after the restart and then found ``Unchanged``.
    """

    def __init__(
        self,
        conn: KubeConnection,
        log: FileLog,
        *,
        on_decision: Callable[[DecisionRecord], None] | None = None,
        on_error: Callable[[ErrorRecord], None] | None = None,
        metrics: KueueSeries | None = None,
        shadow: ShadowComparison | None = None,
        multikueue_namespace: str = DEFAULT_SECRETS_NAMESPACE,
    ) -> None:
        self.conn = conn
        self.metrics = metrics
        # With --metrics-port: the dashboard of the engines, set once the endpoint serves it.
        self.dashboard: LiveDashboard | None = None
        self.shadow = shadow
        self.log = log
        self.on_decision = on_decision
        self.stats = ClusterStats()
        # A write waits out an unreachable API server rather than being given up.
        self.objects = KubeObjects(conn.api, RETRY_FOREVER)
        self.side = ClusterSide(self.objects, self._outcome)
        self.pipeline = EmbeddedPipeline(log, cluster=True, on_decision=self._decided, on_error=on_error)
        self.names = self.pipeline.names
        self.applied_partitions = log.ensure_topic_sync(self.names.applied, self.pipeline.partitions)
        # Shadow mode writes nothing to any cluster, so it dispatches nothing either.
        self.multikueue = (
            None
            if shadow is not None
            else MultiKueueSide(
                log,
                self.names,
                self.objects,
                self,
                namespace=multikueue_namespace,
                origin=lambda: self.pipeline.multikueue.dispatcher.fed.settings.origin,
                cached=lambda kind, ns, name: self.side.cache.get((kind, ns, name)),
            )
        )
        self._outcomes: list[AppliedRecord] = []
        # Decisions made by the pipeline and not yet handed to the applier.
        self._fresh: list[DecisionRecord] = []
        # The pipeline runs in a worker thread, one call at a time.
        self._pipeline_lock = asyncio.Lock()

    # --- start ---------------------------------------------------------------------

    def start(self) -> int:
        """Take in what the log holds and finish what a stop cut short; the decisions still to write.

        The log's decisions without an outcome are queued before the pipeline
        rebuilds itself, so that any decision the rebuild completes comes after
        them, in the order they were made.
        """
        n = self.names
        watch = [r.value for r in self.log.read_sync(n.watch, 0)]
        decisions = [
            r.value for p in range(self.pipeline.partitions) for r in self.log.read_sync(n.decisions, p)
        ]
        applied = [r.value for p in range(self.applied_partitions) for r in self.log.read_sync(n.applied, p)]
        if self.shadow is not None:
            self.shadow.observe(e for raw in watch if (e := decode_watch(raw)) is not None)
            for raw in decisions:
                with contextlib.suppress(DecodeError):
                    self.shadow.decide(codec.decode(raw, DecisionRecord))
            self.shadow.write_report()
            queued = 0
        else:
            queued = self.side.restore(watch, decisions, applied)
        self._pump()
        if self.multikueue is not None:
            # After the pump: the dispatcher has rebuilt its settings (the origin) from the log.
            queued += self.multikueue.start(watch)
        self._hand_on()
        return queued

    # --- the watcher's sink --------------------------------------------------------

    async def emit(self, events: Sequence[WatchEvent]) -> None:
        # The pipeline's CPU work runs beside the event loop, so the API calls in
        # flight and the watches make progress meanwhile.
        async with self._pipeline_lock:
            await asyncio.to_thread(self._pump, events)
            self.stats.watch_events += len(events)
            if self.shadow is not None:
                self.shadow.observe(events)
            else:
                # A worker's copies share their names with the manager's objects.
                self.side.observe([e for e in events if is_manager_event(e)])
            if self.multikueue is not None:
                self.multikueue.observe(events)
            self._hand_on()

    def _pump(self, events: Sequence[WatchEvent] = ()) -> None:
        self.pipeline.submit(events)
        self.pipeline.pump()
        # One fsync for the whole group, before anything it decided reaches the cluster.
        self.log.persist_sync()
        self._measure()

    def _measure(self) -> None:
        if self.metrics is not None:
            self.metrics.update(self.engines(), self._fresh)
        if self.dashboard is not None:
            self.dashboard.note(self._fresh)
            self.dashboard.publish(self.engines())

    def engines(self) -> list[Engine]:
        """The engines of every shard, by partition and shard."""
        states = self.pipeline.admission.states
        return [states[p].shards[s].engine for p in sorted(states) for s in sorted(states[p].shards)]

    async def read_engines(self, fn: Callable[[list[Engine]], T]) -> T:
        """``fn(engines)`` between two groups of the pipeline, when no engine changes."""
        async with self._pipeline_lock:
            return fn(self.engines())

    def positions(self) -> list[tuple[str, int, int, int]]:
        """(topic, partition, log end, next offset to process) of the topics the agents read."""
        n = self.names
        watch_end = self.log.end_offsets_sync(n.watch).get(0, 0)
        out = [(n.watch, 0, watch_end, self.pipeline.watch_cursor)]
        ends = self.log.end_offsets_sync(n.admission)
        out += [(n.admission, p, ends.get(p, 0), c) for p, c in enumerate(list(self.pipeline.cursors))]
        return out

    def _decided(self, decision: DecisionRecord) -> None:
        self.stats.decisions += 1
        self._fresh.append(decision)
        if self.on_decision is not None:
            self.on_decision(decision)

    def _hand_on(self) -> None:
        """Give the applier the new decisions (on the event loop) and record outcomes so far."""
        fresh, self._fresh = self._fresh, []
        for decision in fresh:
            if self.shadow is not None:
                self.shadow.decide(decision)
            else:
                self.side.decide(decision)
        if self.multikueue is not None:
            self.multikueue.hand_on()
        self.flush()

    # --- time and outcomes ---------------------------------------------------------

    async def tick(self) -> None:
        """Write a clock tick for every time an engine waits for that has come."""
        async with self._pipeline_lock:
            await asyncio.to_thread(self._advance)
            self._hand_on()

    def _advance(self) -> None:
        self.pipeline.advance_clock(now_ms(), cluster=self.conn.cluster)
        self.log.persist_sync()
        self._measure()

    def _outcome(self, record: AppliedRecord) -> None:
        self._outcomes.append(record)

    def flush(self) -> None:
        """Append the outcomes reported so far to ``kueue.applied``, one batch per partition
        (and MultiKueue's to ``kueue.multikueue.applied``)."""
        if self.multikueue is not None:
            self.multikueue.flush()
        if not self._outcomes:
            return
        records, self._outcomes = self._outcomes, []
        for partition, items in applied_batches(records, self.applied_partitions):
            self.log.append_many_sync(self.names.applied, items, partition=partition)
        self.stats.outcomes += len(records)

    async def clock(self, interval_s: float = CLOCK_INTERVAL_S) -> None:
        """Tick the clock and flush outcomes every ``interval_s`` until cancelled."""
        while True:
            await asyncio.sleep(interval_s)
            await self.tick()

    async def settle(self) -> None:
        """Wait until the job integration and the applier have nothing left to do."""
        await self.side.idle()
        if self.multikueue is not None:
            await self.multikueue.idle()
        self.flush()


async def open_cluster(
    conn: KubeConnection,
    log: FileLog,
    options: WatchOptions,
    *,
    on_decision: Callable[[DecisionRecord], None] | None = None,
    on_error: Callable[[ErrorRecord], None] | None = None,
    metrics: KueueSeries | None = None,
    shadow: ShadowComparison | None = None,
) -> tuple[EmbeddedCluster, Watcher]:
    """The runtime started from ``log``, and a watcher resuming from it that feeds it."""
    runtime = EmbeddedCluster(
        conn,
        log,
        on_decision=on_decision,
        on_error=on_error,
        metrics=metrics,
        shadow=shadow,
        multikueue_namespace=options.multikueue_namespace,
    )
    runtime.start()
    ledger = await ledger_from_log(log, runtime.names.watch, options.cluster or conn.cluster)
    if options.config_file is not None:
        event = config_file_event(options.config_file, ledger, now_ms())
        if event is not None:
            await runtime.emit([event])
            ledger.record(event)
    watcher = Watcher(conn, runtime, ledger, kinds_to_watch(options.config_map))
    if runtime.multikueue is not None:
        runtime.multikueue.synced = watcher.synced.is_set
    return runtime, watcher


async def serve(runtime: EmbeddedCluster, watcher: Watcher) -> None:
    """Run the watcher, the job integration and the clock until cancelled."""
    tasks = [
        asyncio.create_task(watcher.run(), name="watcher"),
        asyncio.create_task(runtime.clock(), name="clock"),
    ]
    if runtime.shadow is None:
        tasks.append(asyncio.create_task(runtime.side.jobs.run(), name="jobs"))
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if runtime.multikueue is not None:
            await runtime.multikueue.close()
        await runtime.side.applier.idle()
        runtime.flush()


@dataclass(frozen=True, slots=True)
class Operating:
    """How ``run --kubeconfig`` is operated: its metrics endpoint and shadow mode."""

    metrics_port: int | None = None  # 0: any free port
    shadow: bool = False
    shadow_report: Path | None = None


class Observed(Served):
    """:class:`Served`, with the Kueue-named series of the engines and Kueue's visibility API."""

    def __init__(self, port: int) -> None:
        super().__init__(port)
        self.series = KueueSeries(self.registry)
        self._watched: tuple[EmbeddedCluster, Watcher, asyncio.AbstractEventLoop] | None = None
        serve_visibility(self.endpoint, self._read)

    def watch(self, runtime: EmbeddedCluster, watcher: Watcher) -> None:
        """Report on ``runtime``: ready once ``watcher`` has processed its first full list; its
        dashboard at ``/dashboard``, with timelines read from its log."""
        self.positions = runtime.positions
        self.ready = watcher.synced.is_set
        runtime.dashboard = run_dashboard(self.endpoint, str(runtime.log.directory))
        self._watched = (runtime, watcher, asyncio.get_running_loop())

    def _read(self, fn: Callable[[Sequence[Engine], str], T]) -> T:
        """``fn`` over every engine of the process (it holds every shard), from the endpoint's thread."""
        watched = self._watched
        if watched is None:
            raise Unavailable("not ready: the log is not taken in yet (a standby waits for the Lease)")
        runtime, watcher, loop = watched
        if not watcher.synced.is_set():
            raise Unavailable("not ready: the first full list is not processed yet")
        return on_loop(loop, lambda: runtime.read_engines(lambda engines: fn(engines, "")))


async def _run(
    options: WatchOptions, log_dir: Path, out: TextIO, lease: LeaseSettings | None, operating: Operating
) -> int:
    def show(line: str) -> None:
        print(line, file=out, flush=True)

    shadow = ShadowComparison(show, operating.shadow_report) if operating.shadow else None
    # Served from the start: a standby waiting for the Lease is alive, and not ready.
    observed, usable = serve_metrics(operating.metrics_port, show, Observed)
    if not usable:
        return 2
    if observed is not None and shadow is not None:
        observed.registry.register(ShadowDifferences(shadow))
    try:
        return await _serve_cluster(options, log_dir, show, lease, observed, shadow)
    finally:
        if observed is not None:
            observed.endpoint.stop()


async def _serve_cluster(
    options: WatchOptions,
    log_dir: Path,
    show: Show,
    lease: LeaseSettings | None,
    observed: Observed | None,
    shadow: ShadowComparison | None,
) -> int:
    main = asyncio.current_task()
    assert main is not None
    stop = cancel_on_signals(main.cancel)
    async with (
        await connect(options.kubeconfig, options.context) as conn,
        leadership(conn.api, lease, show) as elector,
    ):
        # Appends are made durable a group at a time (EmbeddedCluster persists each group).
        with FileLog(log_dir, fsync=False) as log:
            runtime, watcher = await open_cluster(
                conn,
                log,
                options,
                on_decision=lambda d: show(describe_decision(d)),
                on_error=lambda e: show(describe_error(e)),
                metrics=observed.series if observed is not None else None,
                shadow=shadow,
            )
            if elector is not None:
                runtime.objects.guard = elector.check
            if observed is not None:
                observed.watch(runtime, watcher)

            async def announce() -> None:
                await watcher.synced.wait()
                show(f"running against {conn.server} (context {conn.context}); log in {log_dir}")

            announcing = asyncio.create_task(announce())
            with contextlib.suppress(asyncio.CancelledError):
                await serve(runtime, watcher)
            announcing.cancel()
            jobs, applier = runtime.side.jobs.counters, runtime.side.applier.counters
            show(
                f"{runtime.stats.watch_events} watch events, {runtime.stats.decisions} decisions, "
                f"outcomes {dict(sorted(applier.outcomes.items()))}; "
                f"{jobs.workloads_created} Workloads created, {jobs.jobs_started} Jobs started, "
                f"{jobs.jobs_stopped} stopped; {runtime.objects.writes} API writes, "
                f"{runtime.objects.reads} API reads; log in {log_dir}"
            )
    stop()
    return 0


def run_cluster(
    options: WatchOptions,
    log_dir: str | None = None,
    *,
    out: TextIO | None = None,
    lease: LeaseSettings | None = None,
    operating: Operating | None = None,
) -> int:
    """``kueuestream run --kubeconfig``: until SIGINT/SIGTERM; 0 on a clean stop, 2 for a usage error."""
    log = Path(log_dir) if log_dir else DEFAULT_DIRECTORY
    return run_service(_run(options, log, out or sys.stdout, lease, operating or Operating()))
