"""Admission checks through the embedded pipeline: AdmissionChecks broadcast to every shard,
check states arriving with the Workload's watch events, and a ClusterQueue changing tree.

Upstream Kueue: SyncAdmittedCondition (pkg/workload/admissionchecks.go) and the
workload controller's reconcileCheckBasedEviction.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from kueuestream.admission.timefmt import rfc3339
from kueuestream.agents.audit.replay import replay
from kueuestream.agents.embedded.memory_log import MemoryLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.schemas import WatchEventType
from tests.helpers import NS, cpu_queue, cpu_workload, moving_cluster
from tests.pipeline.checks import assert_usage_consistent, engines
from tests.pipeline.embedded_run import decisions, run_steps
from tests.pipeline.watch_streams import Stream

CHECK = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "AdmissionCheck",
    "metadata": {"name": "capacity"},
    "spec": {"controllerName": "example.com/capacity"},
    "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active", "message": ""}]},
}


def checked(manifest: dict[str, Any]) -> dict[str, Any]:
    """A ClusterQueue that requires the check ``capacity`` (v1beta1 ``spec.admissionChecks``)."""
    return {**manifest, "spec": {**manifest["spec"], "admissionChecks": ["capacity"]}}


def ready(manifest: dict[str, Any], when: str) -> dict[str, Any]:
    entry = {"name": "capacity", "state": "Ready", "message": "", "lastTransitionTime": when}
    return {**manifest, "status": {"admissionChecks": [entry]}}


def test_a_ready_check_arriving_after_a_handover_admits_in_the_new_tree() -> None:
    """The check states travel with the Workload to its ClusterQueue's new shard."""
    cluster = moving_cluster(borrowing=None)
    cluster[4] = checked(cpu_queue("a2", 6, "a", borrowing=0))
    cluster[5] = checked(cpu_queue("b1", 4, "b", borrowing=0))
    stream = Stream()
    stream.listing([CHECK, *cluster])
    stream.event(cpu_workload("w1", "lq-a2", 4))
    stream.event(cpu_workload("w2", "lq-b1", 4))
    stream.event(cpu_workload("w3", "lq-a2", 2))
    stream.event(ready(cpu_workload("w3", "lq-a2", 2), "2030-01-01T00:00:00Z"), WatchEventType.MODIFIED)
    stream.event(checked(cpu_queue("a2", 6, "b", borrowing=0)), WatchEventType.MODIFIED)
    stream.event(ready(cpu_workload("w1", "lq-a2", 4), "2030-01-01T00:00:00Z"), WatchEventType.MODIFIED)
    pipeline = run_steps(EmbeddedPipeline(MemoryLog()), stream.steps)

    seen = [(d.ref.name, d.cause.shard, d.action.value) for part in decisions(pipeline.log) for d in part]
    # Both shards had the AdmissionCheck: each ClusterQueue reserved, waiting for the check.
    assert ("w1", "cohort:a", "QuotaReserved") in seen
    assert ("w2", "cohort:b", "QuotaReserved") in seen
    assert ("w3", "cohort:a", "Admitted") in seen
    assert not [s for s in seen if s[0] == "w3" and s[1] == "cohort:b"], "w3 was decided again"
    # The report reached w1 in its new tree, which admitted it there.
    assert seen[-1] == ("w1", "cohort:b", "Admitted")
    engine = engines(pipeline)["cohort:b"]
    for name in ("w1", "w3"):
        status = engine.status_of(engine.workloads[(NS, name)])
        assert [(c["name"], c["state"]) for c in status["admissionChecks"]] == [("capacity", "Ready")]
        assert next(c for c in status["conditions"] if c["type"] == "Admitted")["status"] == "True"
    assert assert_usage_consistent(pipeline)["a2"] == {("default", "cpu"): 6000}


def report(manifest: dict[str, Any], state: str, when: str, requeue: int | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": "capacity",
        "state": state,
        "message": state.lower(),
        "lastTransitionTime": when,
    }
    if requeue is not None:
        entry["requeueAfterSeconds"] = requeue
    return {**manifest, "status": {"admissionChecks": [entry]}}


def test_retries_backoffs_and_rejections_replay_byte_for_byte(tmp_path: Path) -> None:
    """Check states, evictions, the backoff's clock ticks and the deactivation are all in the log:
    replaying it reproduces every decision (reconcileCheckBasedEviction, backoffWaitingTimeExpired)."""
    cluster = moving_cluster(borrowing=None)
    cluster[4] = checked(cpu_queue("a2", 6, "a", borrowing=0))
    stream = Stream()
    stream.listing([CHECK, *cluster])
    for name in ("retried", "rejected"):
        stream.event(cpu_workload(name, "lq-a2", 3))
    when = rfc3339(stream.time_ms)
    stream.event(report(cpu_workload("retried", "lq-a2", 3), "Retry", when, 30), WatchEventType.MODIFIED)
    stream.event(report(cpu_workload("rejected", "lq-a2", 3), "Rejected", when), WatchEventType.MODIFIED)
    with FileLog(tmp_path / "log") as log:
        run_steps(EmbeddedPipeline(log), stream.steps)
        seen = [(d.ref.name, d.action.value) for part in decisions(log) for d in part]
    # Queued with its check listed, reserved, evicted by the Retry, requeued after 30 s, reserved again.
    assert [a for n, a in seen if n == "retried"] == [
        "Pending",
        "QuotaReserved",
        "Evicted",
        "Requeued",
        "QuotaReserved",
    ]
    # Rejected: evicted, and pending as deactivated for good.
    assert [a for n, a in seen if n == "rejected"] == ["Pending", "QuotaReserved", "Evicted", "Pending"]
    out = io.StringIO()
    assert replay(str(tmp_path / "log"), out=out) == 0, out.getvalue()
