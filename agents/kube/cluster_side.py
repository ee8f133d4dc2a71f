"""The connector's writing half: the job integration and the applier over one object cache.

Both runtimes host it the same way: on start it is given what the log holds
(every watch event, and the decisions that have no outcome in
``kueue.applied`` yet), then the watch events and decisions as they come.
Taking the log's watch events in without acting on them, and only then
reconciling every Job, means it never acts on a version it knows is stale.
"""

from __future__ import annotations

from collections.abc import Iterable

from kueuestream.agents.kube.applier import ClusterApplier, OutcomeHook
from kueuestream.agents.kube.cache import ObjectCache
from kueuestream.agents.kube.jobs import CACHED_KINDS, JobIntegration
from kueuestream.agents.kube.rest import KubeObjects
from kueuestream.streams import codec
from kueuestream.streams.codec import DecodeError
from kueuestream.streams.schemas import AppliedRecord, DecisionRecord, WatchEvent

DecisionId = tuple[str, int, int]  # cause shard, cause offset, index


def decision_id(decision: DecisionRecord | AppliedRecord) -> DecisionId:
    return (decision.cause.shard, decision.cause.offset, decision.index)


def handled(applied: Iterable[bytes]) -> set[DecisionId]:
    """The decisions that already have an outcome, from ``kueue.applied`` records."""
    out: set[DecisionId] = set()
    for raw in applied:
        try:
            out.add(decision_id(codec.decode(raw, AppliedRecord)))
        except DecodeError:
            continue
    return out


def decode_watch(raw: bytes) -> WatchEvent | None:
    try:
        return codec.decode(raw, WatchEvent)
    except DecodeError:
        return None  # ingest reports it in kueue.errors


class ClusterSide:
    def __init__(self, objects: KubeObjects, on_outcome: OutcomeHook) -> None:
        self.objects = objects
        self.cache = ObjectCache(CACHED_KINDS)
        self.jobs = JobIntegration(objects, self.cache)
        self.applier = ClusterApplier(objects, self.cache, on_outcome)
        self.done: set[DecisionId] = set()

    def restore(self, watch: Iterable[bytes], decisions: Iterable[bytes], applied: Iterable[bytes]) -> int:
        """Take in the log as it is; the number of decisions still to write, now queued."""
        for raw in watch:
            event = decode_watch(raw)
            if event is not None:
                self.jobs.observe(event, reconcile=False)
        self.done = handled(applied)
        queued = 0
        for raw in decisions:
            try:
                decision = codec.decode(raw, DecisionRecord)
            except DecodeError:
                continue
            if decision_id(decision) not in self.done:
                self.applier.submit(decision)
                queued += 1
        self.jobs.enqueue_all()
        return queued

    def observe(self, events: Iterable[WatchEvent]) -> None:
        for event in events:
            self.jobs.observe(event)

    def decide(self, decision: DecisionRecord) -> None:
        if decision_id(decision) not in self.done:
            self.applier.submit(decision)

    async def idle(self) -> None:
        """Wait until every queued Job is reconciled and every queued decision has an outcome."""
        while True:
            await self.jobs.idle()
            await self.applier.idle()
            if self.jobs.is_idle() and self.applier.is_idle():
                return
