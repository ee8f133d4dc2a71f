"""``kueuestream multikueue status``: the federation as the log records it.

Folded from ``kueue.multikueue`` (the dispatcher's decisions) and
``kueue.multikueue.applied`` (what the cluster side did with them):

- per worker cluster: its ``Active`` condition as last decided, its lag (the
  decisions naming it that have no applied record yet), and how many
  Workloads were dispatched to it (got a copy there), run there now (their
  check is Ready naming it, not finished) and were lost on it (their check went
  to Retry because the worker was lost past ``workerLostTimeout``);
- per Workload: where it runs (or ran, or was dispatched) and its state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kueuestream.agents.audit.replay import open_log, read_partition
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.codec import DecodeError
from kueuestream.streams.kafka_settings import KafkaSettings
from kueuestream.streams.schemas import MultiKueueAction, MultiKueueApplied, MultiKueueDecision

LOST_MESSAGE = "Admitting remote lost"
R = TypeVar("R", MultiKueueDecision, MultiKueueApplied)


@dataclass(slots=True)
class ClusterFold:
    name: str
    active: bool | None = None
    reason: str = ""
    message: str = ""
    dispatched: set[tuple[str, str]] = field(default_factory=set)
    running: set[tuple[str, str]] = field(default_factory=set)
    lost: set[tuple[str, str]] = field(default_factory=set)
    lag: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "active": self.active,
            "reason": self.reason,
            "message": self.message,
            "lag": self.lag,
            "dispatched": len(self.dispatched),
            "running": len(self.running),
            "lost": len(self.lost),
        }


@dataclass(slots=True)
class WorkloadFold:
    namespace: str
    name: str
    state: str = "Dispatched"  # Dispatched | Running | Finished | Lost | Retry | Rejected
    cluster: str = ""
    copies: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "state": self.state,
            "cluster": self.cluster,
            "copies": list(self.copies),
        }


def fold(decisions: Iterable[MultiKueueDecision], applied: Iterable[MultiKueueApplied]) -> dict[str, Any]:
    """The status of ``decisions`` (in log order) and their ``applied`` records."""
    clusters: dict[str, ClusterFold] = {}
    workloads: dict[tuple[str, str], WorkloadFold] = {}
    unapplied: dict[int, str] = {}

    def cluster(name: str) -> ClusterFold:
        return clusters.setdefault(name, ClusterFold(name))

    def workload(key: tuple[str, str]) -> WorkloadFold:
        return workloads.setdefault(key, WorkloadFold(*key))

    for offset, d in enumerate(decisions):
        key = (d.namespace, d.name)
        if d.cluster:
            unapplied[offset] = d.cluster
            cluster(d.cluster)
        action = d.action
        if action is MultiKueueAction.SET_CLUSTER_STATUS:
            c = cluster(d.name)
            c.active, c.reason, c.message = d.active, d.reason, d.message
        elif action is MultiKueueAction.CREATE_REMOTE:
            cluster(d.cluster).dispatched.add(key)
            wl = workload(key)
            if d.cluster not in wl.copies:
                wl.copies.append(d.cluster)
            if wl.state in ("Lost", "Retry"):
                wl.state = "Dispatched"
        elif action is MultiKueueAction.DELETE_REMOTE:
            if key in workloads and d.cluster in workloads[key].copies:
                workloads[key].copies.remove(d.cluster)
        elif action is MultiKueueAction.SET_CHECK_STATE:
            wl = workload(key)
            if d.state == "Ready" and d.clusterName:
                wl.state, wl.cluster = "Running", d.clusterName
                cluster(d.clusterName).running.add(key)
            elif d.state in ("Retry", "Rejected"):
                if wl.cluster:
                    cluster(wl.cluster).running.discard(key)
                    if d.message.startswith(LOST_MESSAGE):
                        cluster(wl.cluster).lost.add(key)
                lost = d.state == "Retry" and d.message.startswith(LOST_MESSAGE)
                wl.state = "Lost" if lost else d.state
        elif action is MultiKueueAction.FINISH:
            wl = workload(key)
            wl.state = "Finished"
            if d.cluster:
                wl.cluster = d.cluster
                cluster(d.cluster).running.discard(key)
    for record in applied:
        unapplied.pop(record.decision, None)
    for name in unapplied.values():
        clusters[name].lag += 1
    return {
        "clusters": [clusters[name].to_json() for name in sorted(clusters)],
        "workloads": [workloads[key].to_json() for key in sorted(workloads)],
    }


def _decoded(values: Iterable[bytes], model: type[R]) -> list[R]:
    out: list[R] = []
    for value in values:
        try:
            out.append(codec.decode(value, model))
        except DecodeError:
            continue  # a damaged record tells nothing
    return out


async def status_of_log(log: str, prefix: str = "", kafka: KafkaSettings | None = None) -> dict[str, Any]:
    names = TopicNames(prefix)
    async with open_log(log, kafka) as opened:
        topics = await opened.topics()
        decisions = (
            [r.value for r in await read_partition(opened, names.multikueue, 0)]
            if names.multikueue in topics
            else []
        )
        applied = (
            [r.value for r in await read_partition(opened, names.multikueue_applied, 0)]
            if names.multikueue_applied in topics
            else []
        )
    return fold(_decoded(decisions, MultiKueueDecision), _decoded(applied, MultiKueueApplied))
