"""The pipeline with a cluster behind its watch: Workloads come from the cluster, stops from their status."""

from __future__ import annotations

from typing import Any

from kueuestream.admission.events import Action
from kueuestream.agents.audit.replay import verify
from kueuestream.agents.embedded.memory_log import MemoryLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.sources.watch_events import listing_events
from kueuestream.streams.schemas import DecisionRecord, WatchEvent, WatchEventType

V = "kueue.x-k8s.io/v1beta2"
QUEUES: list[dict[str, Any]] = [
    {"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
    {
        "apiVersion": V,
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "1"}]}],
                }
            ],
        },
    },
    {
        "apiVersion": V,
        "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": "ns"},
        "spec": {"clusterQueue": "cq"},
    },
]


def _workload(name: str, priority: int, status: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": V,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "queueName": "lq",
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                    },
                }
            ],
        },
    }
    if status is not None:
        out["status"] = status
    return out


class Run:
    def __init__(self, cluster: bool) -> None:
        self.decisions: list[DecisionRecord] = []
        self.pipeline = EmbeddedPipeline(MemoryLog(), cluster=cluster, on_decision=self.decisions.append)
        self.time = 1_000

    def list(self, manifests: list[dict[str, Any]]) -> None:
        events, problems = listing_events(manifests, self.time)
        assert problems == []
        self.pipeline.submit(events)
        self.pipeline.pump()

    def modify(self, manifest: dict[str, Any]) -> list[DecisionRecord]:
        self.time += 1_000
        before = len(self.decisions)
        meta = manifest["metadata"]
        event = WatchEvent(
            cluster="c",
            kind=manifest["kind"],
            apiVersion=manifest["apiVersion"],
            namespace=meta.get("namespace", ""),
            name=meta["name"],
            type=WatchEventType.MODIFIED,
            object=manifest,
            timestamp=self.time,
        )
        self.pipeline.submit([event])
        self.pipeline.pump()
        return self.decisions[before:]

    def last(self, name: str) -> DecisionRecord:
        return [d for d in self.decisions if d.ref.name == name][-1]


JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "j", "namespace": "ns", "uid": "u", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
    "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}},
}


def test_with_a_cluster_a_job_is_not_turned_into_a_workload() -> None:
    """Its Workload is the one the job integration creates in the cluster."""
    folder, cluster = Run(cluster=False), Run(cluster=True)
    folder.list([*QUEUES, JOB])
    cluster.list([*QUEUES, JOB])
    assert [o["metadata"]["name"] for o in folder.pipeline.admission.workload_objects()] != []
    assert cluster.pipeline.admission.workload_objects() == []


def test_an_evicted_workload_holds_its_quota_until_its_job_stopped() -> None:
    """JobReconciler.ReconcileGenericJob, "handle eviction": the quota is released once the
    job integration clears the reservation (QuotaReserved=False, reason PendingEvaluation)."""
    run = Run(cluster=True)
    run.list([*QUEUES, _workload("low", 0)])
    assert run.last("low").action is Action.ADMITTED
    admitted = run.last("low").status
    decided = run.modify(_workload("high", 10))
    assert sorted((d.ref.name, d.action.value) for d in decided) == [("high", "Pending"), ("low", "Evicted")]
    evicted = run.last("low").status

    # Our own writes coming back through the watch decide nothing, and do not stop the job.
    assert run.modify(_workload("low", 0, admitted)) == []
    assert run.modify(_workload("low", 0, evicted)) == []
    # Nor does a requeued status the engine wrote before (reason Pending), arriving late.
    late = {
        "conditions": [
            *[c for c in evicted["conditions"] if c["type"] not in ("QuotaReserved", "Admitted")],
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "m"},
            {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "m"},
        ]
    }
    assert run.modify(_workload("low", 0, late)) == []
    assert run.last("high").action is Action.PENDING

    cleared = {
        "conditions": [
            *[c for c in evicted["conditions"] if c["type"] not in ("QuotaReserved", "Admitted")],
            {"type": "QuotaReserved", "status": "False", "reason": "PendingEvaluation", "message": "m"},
            {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "m"},
        ]
    }
    decided = run.modify(_workload("low", 0, cleared))
    assert ("low", Action.REQUEUED) in [(d.ref.name, d.action) for d in decided]
    assert run.last("high").action is Action.ADMITTED


def test_without_a_cluster_the_runtime_stops_an_evicted_job_at_once() -> None:
    run = Run(cluster=False)
    run.list([*QUEUES, _workload("low", 0)])
    decided = run.modify(_workload("high", 10))
    assert ("low", Action.REQUEUED) in [(d.ref.name, d.action) for d in decided]
    assert run.last("high").action is Action.ADMITTED


def _replayed(run: Run) -> list[str]:
    log = run.pipeline.log
    names = run.pipeline.names
    admission = [list(log.read_sync(names.admission, p)) for p in range(run.pipeline.partitions)]
    decisions = [[r.value for r in log.read_sync(names.decisions, p)] for p in range(run.pipeline.partitions)]
    return [m.what for m in verify(admission, decisions).mismatches]


def test_logs_with_and_without_a_cluster_both_replay_byte_for_byte() -> None:
    """A cluster log's stops came through the watch: replay must not stand in for the job controller."""
    for cluster in (True, False):
        run = Run(cluster=cluster)
        run.list([*QUEUES, _workload("low", 0)])
        run.modify(_workload("high", 10))
        if cluster:
            evicted = run.last("low").status
            cleared = {
                "conditions": [
                    *[c for c in evicted["conditions"] if c["type"] not in ("QuotaReserved", "Admitted")],
                    {
                        "type": "QuotaReserved",
                        "status": "False",
                        "reason": "PendingEvaluation",
                        "message": "m",
                    },
                ]
            }
            run.modify(_workload("low", 0, cleared))
        assert run.last("high").action is Action.ADMITTED
        assert _replayed(run) == []
