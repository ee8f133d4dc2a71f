"""The connector's object cache and the Workload status changes the job integration writes."""

from __future__ import annotations

from typing import Any

from kueuestream.admission.decode import decode
from kueuestream.agents.kube.cache import ObjectCache
from kueuestream.agents.kube.jobs import cleared_status, finished_status
from kueuestream.agents.kube.stop_signal import job_stopped
from kueuestream.streams.schemas import WatchEvent, WatchEventType


def _event(type_: WatchEventType, rv: str, value: str = "") -> WatchEvent:
    obj = (
        None
        if type_ is WatchEventType.DELETED
        else {"metadata": {"name": "w", "resourceVersion": rv}, "v": value}
    )
    return WatchEvent(
        cluster="c",
        kind="Workload",
        apiVersion="kueue.x-k8s.io/v1beta2",
        namespace="ns",
        name="w",
        type=type_,
        resourceVersion=rv,
        object=obj,
        timestamp=0,
    )


def test_an_older_version_never_replaces_a_newer_one() -> None:
    cache = ObjectCache(frozenset({"Workload"}))
    key = ("Workload", "ns", "w")
    cache.put(key, {"metadata": {"resourceVersion": "12"}, "v": "ours"})  # the answer to our write
    cache.observe(_event(WatchEventType.MODIFIED, "11", "late"))  # the watch catching up
    assert cache.get(key) == {"metadata": {"resourceVersion": "12"}, "v": "ours"}
    cache.observe(_event(WatchEventType.MODIFIED, "13", "newer"))
    assert (cache.get(key) or {})["v"] == "newer"


def test_a_deleted_object_stays_deleted_until_a_newer_one_comes() -> None:
    cache = ObjectCache(frozenset({"Workload"}))
    key = ("Workload", "ns", "w")
    cache.observe(_event(WatchEventType.ADDED, "5"))
    cache.observe(_event(WatchEventType.DELETED, "9"))
    cache.put(key, {"metadata": {"resourceVersion": "8"}, "v": "stale answer"})
    assert cache.get(key) is None
    cache.observe(_event(WatchEventType.ADDED, "20", "recreated"))
    assert (cache.get(key) or {})["v"] == "recreated"
    assert cache.observe(_event(WatchEventType.ADDED, "1").model_copy(update={"kind": "Job"})) is None


def _workload(conditions: list[dict[str, Any]], admitted: bool = True) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": conditions}
    if admitted:
        status["admission"] = {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {}}]}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {
            "queueName": "lq",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
        },
        "status": status,
    }


EVICTED = [
    {
        "type": "QuotaReserved",
        "status": "True",
        "reason": "QuotaReserved",
        "message": "q",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    },
    {
        "type": "Admitted",
        "status": "True",
        "reason": "Admitted",
        "message": "a",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    },
    {
        "type": "Evicted",
        "status": "True",
        "reason": "Preempted",
        "message": "to make room",
        "lastTransitionTime": "2026-01-01T00:00:05Z",
    },
]


def test_clearing_an_evicted_workloads_reservation_as_kueue_does() -> None:
    """JobReconciler "handle eviction" with UnsetQuotaReservationWithCondition and SetRequeuedCondition."""
    status = cleared_status(_workload(EVICTED), 1_767_225_610_000)
    assert status["admission"] is None
    by_type = {c["type"]: c for c in status["conditions"]}
    assert [c["type"] for c in status["conditions"]] == ["QuotaReserved", "Admitted", "Evicted", "Requeued"]
    assert (by_type["QuotaReserved"]["status"], by_type["QuotaReserved"]["reason"]) == (
        "False",
        "PendingEvaluation",
    )
    assert by_type["QuotaReserved"]["message"] == "to make room"
    assert (by_type["Admitted"]["status"], by_type["Admitted"]["reason"]) == ("False", "NoReservation")
    assert (by_type["Requeued"]["status"], by_type["Requeued"]["reason"]) == ("True", "Preempted")
    assert by_type["Evicted"] == EVICTED[2]
    # That status is what tells ingest the job stopped; the evicted one is not.
    cleared = _workload(status["conditions"], admitted=False)
    assert job_stopped(decode(cleared).obj)  # type: ignore[arg-type]
    assert not job_stopped(decode(_workload(EVICTED)).obj)  # type: ignore[arg-type]


def test_finishing_keeps_the_other_conditions_and_their_times() -> None:
    status = finished_status(_workload(EVICTED[:2]), "Failed", "BackoffLimitExceeded", 1_767_225_610_000)
    assert [c["type"] for c in status["conditions"]] == ["QuotaReserved", "Admitted", "Finished"]
    assert status["conditions"][:2] == EVICTED[:2]
    assert status["conditions"][2]["reason"] == "Failed"
