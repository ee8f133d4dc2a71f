"""MultiKueue in ``run --kubeconfig``: the worker links and the executor beside the manager's pipeline.

The embedded runtime of a manager hands this side its watch events (the
manager's MultiKueueClusters start, restart and stop worker links, which feed
the workers' events and ``ClusterConnection`` events back into the same
runtime) and, after each group, lets it pick up the decisions the dispatcher
appended to ``kueue.multikueue`` for the executor. Outcomes are appended to
``kueue.multikueue.applied``. It costs nothing on a cluster without
MultiKueue objects: no link and no lane is started before the log has one.

At a start (after the pipeline has rebuilt itself, so that the origin is
the configured one) the links are made for the MultiKueueClusters the log
holds (the watcher resumes without listing them again) and given the
connection states the log last recorded, so that an unchanged state is not
written again; the executor is given every decision without an outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kueuestream.admission.multikueue.names import WORKER_CLUSTER_PREFIX
from kueuestream.agents.kube.cluster_side import decode_watch
from kueuestream.agents.kube.multikueue.executor import Cached, MultiKueueExecutor
from kueuestream.agents.kube.multikueue.links import MULTIKUEUE_CLUSTER, WorkerLinks, connections_in
from kueuestream.agents.kube.rest import KubeObjects
from kueuestream.agents.kube.watch_ledger import WatchLedger
from kueuestream.agents.kube.watcher import WatchSink
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.codec import DecodeError
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.schemas import MultiKueueApplied, MultiKueueDecision, WatchEvent
from kueuestream.streams.topics import multikueue_key


def is_manager_event(event: WatchEvent) -> bool:
    """Whether an event is about the manager's own objects (not a worker's, not a connection's)."""
    return not event.cluster.startswith(WORKER_CLUSTER_PREFIX)


class MultiKueueSide:
    def __init__(
        self,
        log: FileLog,
        names: TopicNames,
        manager: KubeObjects,
        sink: WatchSink,
        *,
        cached: Cached | None = None,
        namespace: str,
        origin: Callable[[], str],
        probe_s: float = 1.0,
        retry_s: float = 5.0,
    ) -> None:
        self.log = log
        self.names = names
        self.origin = origin
        self.links = WorkerLinks(
            manager, sink, self._ledger, namespace=namespace, probe_s=probe_s, retry_s=retry_s
        )
        self.executor = MultiKueueExecutor(
            manager, self.links.client, self._knows, self._outcome, cached=cached
        )
        # Until the manager's watch has listed its MultiKueueClusters, a worker without a link
        # may only not have been seen yet: its decisions wait.
        self.synced: Callable[[], bool] = lambda: True
        self.cursor = 0
        self._outcomes: list[MultiKueueApplied] = []
        self._keys: dict[int, bytes] = {}
        # What the log says each worker's watch passed on, taken in at start.
        self._ledgers: dict[str, WatchLedger] = {}

    async def _ledger(self, cluster: str) -> WatchLedger:
        return self._ledgers.pop(cluster, None) or WatchLedger(cluster)

    def start(self, watch: Sequence[bytes]) -> int:
        """Take in the log; the decisions still to apply, now queued."""
        events = [e for raw in watch if (e := decode_watch(raw)) is not None]
        workers = [e for e in events if not is_manager_event(e)]
        self.links.known = connections_in(workers)
        # The watcher resumes without listing again: the links start from the log's clusters.
        clusters: dict[str, WatchEvent] = {}
        for event in events:
            if event.kind == MULTIKUEUE_CLUSTER and is_manager_event(event):
                clusters[event.name] = event
        self.observe([e for _, e in sorted(clusters.items()) if e.object is not None])
        for event in workers:
            ledger = self._ledgers.get(event.cluster)
            if ledger is None:
                ledger = self._ledgers[event.cluster] = WatchLedger(event.cluster)
            ledger.record(event)
        self.log.ensure_topic_sync(self.names.multikueue, 1)
        self.log.ensure_topic_sync(self.names.multikueue_applied, 1)
        decisions = self._read_decisions()
        applied = [r.value for r in self.log.read_sync(self.names.multikueue_applied, 0)]
        return self.executor.restore(decisions, applied)

    def _read_decisions(self) -> list[tuple[int, bytes]]:
        out = []
        for record in self.log.read_sync(self.names.multikueue, 0, self.cursor):
            out.append((record.offset, record.value))
            self._keys[record.offset] = record.key or b""
            self.cursor = record.offset + 1
        return out

    def observe(self, events: Sequence[WatchEvent]) -> None:
        """The manager's watch events: links follow its MultiKueueClusters (with the current origin)."""
        self.links.set_origin(self.origin())
        self.links.observe([e for e in events if is_manager_event(e)])

    def hand_on(self) -> None:
        """Give the executor the decisions appended since the last call."""
        for offset, raw in self._read_decisions():
            try:
                decision = codec.decode(raw, MultiKueueDecision)
            except DecodeError:
                continue
            self.executor.submit(offset, decision)

    def _knows(self, worker: str) -> bool:
        return self.links.knows(worker) or not self.synced()

    def _outcome(self, record: MultiKueueApplied) -> None:
        self._outcomes.append(record)

    def flush(self) -> None:
        """Append the outcomes so far to ``kueue.multikueue.applied``."""
        if not self._outcomes:
            return
        records, self._outcomes = self._outcomes, []
        items = [
            (self._keys.pop(r.decision, b"") or multikueue_key("", ""), codec.encode(r)) for r in records
        ]
        self.log.append_many_sync(self.names.multikueue_applied, items, partition=0)

    async def idle(self) -> None:
        await self.executor.idle()

    async def close(self) -> None:
        # The executor first: with the links gone, its waiting decisions would be given up.
        await self.executor.close()
        await self.links.close()
        self.flush()
