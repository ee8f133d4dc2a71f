"""A Workload's maximum execution time, as Kueue enforces it.

Scenarios worked out from upstream Kueue (kubernetes-sigs/kueue main, v0.19):
pkg/controller/core workload_controller ``reconcileMaxExecutionTime`` (the
deadline: ``maximumExecutionTimeSeconds`` less
``accumulatedPastExecutionTimeSeconds``, from the ``Admitted`` condition's
transition time as the API keeps it, to the second; then
``SetDeactivationTarget`` and the accumulated time cleared), the eviction of a
deactivated workload (``Deactivated`` + ``DueTo`` + the cause,
``ReasonWithCause``), pkg/workload ``SyncAdmittedCondition`` (leaving
``Admitted`` adds the seconds admitted, truncated), pkg/controller/jobframework
``MaximumExecutionTimeSecondsForObject`` and ``validateCreateForMaxExecTime``
(the Job label), and the integration test "should deactivate the workload when
the time expires with multiple admissions".
"""

from __future__ import annotations

from typing import Any

from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action, Event, EventType
from kueuestream.admission.timefmt import rfc3339
from tests.helpers import (
    T0,
    Manifest,
    Run,
    cluster_queue_manifest,
    flavor_manifest,
    local_queue_manifest,
    queued_job,
    workload_manifest,
)

EXCEEDED = (
    "True",
    "DeactivatedDueToMaximumExecutionTimeExceeded",
    "The workload is deactivated due to exceeding the maximum execution time",
)


def queue(cpu: int = 4) -> list[Manifest]:
    cq = cluster_queue_manifest(
        "cq",
        [(("cpu",), [("default", {"cpu": cpu})])],
        spec={"preemption": {"withinClusterQueue": "LowerPriority"}},
    )
    return [flavor_manifest("default"), cq, local_queue_manifest("lq", "cq")]


def limited(name: str, seconds: int | None, cpu: int = 4, priority: int = 0) -> Manifest:
    wl = workload_manifest(name, "lq", {"cpu": str(cpu)}, priority=priority)
    if seconds is not None:
        wl["spec"]["maximumExecutionTimeSeconds"] = seconds
    return wl


def loaded(docs: list[Manifest], start_ms: int = T0) -> Run:
    r = Run(Engine(), time_ms=start_ms)
    r.load_manifests(docs)
    assert not r.rejected(), r.rejected()
    return r


def cond(r: Run, name: str, type_: str) -> tuple[str, str, str] | None:
    c = r.condition(name, type_)
    return None if c is None else (c["status"], c["reason"], c["message"])


def test_deactivated_once_admitted_for_its_maximum_execution_time() -> None:
    """``reconcileMaxExecutionTime``: deactivated when the time since Admitted reaches the limit;
    evicted with ``DeactivatedDueToMaximumExecutionTimeExceeded``, its quota goes to the next."""
    r = loaded([*queue(), limited("a", 10), limited("b", None)])
    assert r.admitted() == ["a"]
    # The clocks of the runtimes are told when to look; a run to quiescence is not.
    assert r.engine.next_wakeup_ms() == T0 + 10_000
    assert r.engine.next_wakeup_ms(deadlines=False) is None
    r.pass_time(9_999)
    assert r.admitted() == ["a"] and cond(r, "a", "Evicted") is None
    r.pass_time(1)
    assert cond(r, "a", "Evicted") == EXCEEDED
    assert r.workloads()["a"]["spec"]["active"] is False
    assert r.admitted() == ["b"]
    # Its ten seconds admitted are summed when Admitted turns False (SyncAdmittedCondition).
    assert r.status("a")["accumulatedPastExecutionTimeSeconds"] == 10
    assert cond(r, "a", "QuotaReserved") == ("False", "Deactivated", "The workload is deactivated")
    # Deactivated, it does not come back when quota frees up.
    r.finish("default", "b")
    r.pass_time(60_000)
    assert r.admitted() == []
    # A workload without a limit never runs out of time.
    assert r.engine.next_wakeup_ms() is None


def test_the_admission_time_counts_to_the_second() -> None:
    """The Admitted condition's time is kept to the second by the API server, so a workload
    admitted at 12.75 s runs out at 12 s + its limit, not 12.75 s + its limit."""
    start = T0 + 12_750
    r = loaded([*queue(), limited("a", 5)], start_ms=start)
    assert r.engine.next_wakeup_ms() == T0 + 17_000
    r.pass_time(T0 + 16_999 - start)
    assert r.admitted() == ["a"]
    r.pass_time(1)
    assert cond(r, "a", "Evicted") == EXCEEDED


def test_time_admitted_before_an_eviction_counts_against_the_limit() -> None:
    """``SyncAdmittedCondition`` adds each admission's whole seconds to
    ``accumulatedPastExecutionTimeSeconds``; the next admission has only the rest."""
    r = loaded([*queue(), limited("a", 10)])
    r.pass_time(4_600)
    # Preempted by a workload of higher priority, after 4.6 s admitted: 4 whole seconds.
    r.load_manifests([limited("high", None, priority=100)])
    assert r.admitted() == ["high"]
    assert r.status("a")["accumulatedPastExecutionTimeSeconds"] == 4
    assert (cond(r, "a", "Evicted") or ("", "", ""))[:2] == ("True", "Preempted")
    r.pass_time(30_000)
    r.finish("default", "high")
    assert r.admitted() == ["a"]
    readmitted = r.time_ms
    assert r.engine.next_wakeup_ms() == readmitted // 1000 * 1000 + 6_000
    r.pass_time(5_000)
    assert r.admitted() == ["a"]
    r.pass_time(1_000)
    assert cond(r, "a", "Evicted") == EXCEEDED
    # Cleared at the deactivation, then this admission's six seconds added when it stopped.
    assert r.status("a")["accumulatedPastExecutionTimeSeconds"] == 6


def admitted_since(name: str, seconds: int, since_ms: int, accumulated: int | None) -> Manifest:
    """A Workload the cluster shows admitted at ``since_ms``, with a limit of ``seconds``."""
    wl = limited(name, seconds, cpu=1)
    when = rfc3339(since_ms)
    status: dict[str, Any] = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}
            ],
        },
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
             "lastTransitionTime": when},
            {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
             "lastTransitionTime": when},
        ],
    }  # fmt: skip
    if accumulated is not None:
        status["accumulatedPastExecutionTimeSeconds"] = accumulated
    wl["status"] = status
    return wl


def test_a_workload_read_from_the_cluster_keeps_its_clock() -> None:
    """After a restart the deadline comes from the status the cluster holds: the Admitted
    condition's time and the accumulated seconds; one already past it is deactivated at once."""
    overdue = loaded([*queue(), admitted_since("overdue", 10, T0 - 20_000, accumulated=None)])
    assert cond(overdue, "overdue", "Evicted") == EXCEEDED
    assert overdue.status("overdue")["accumulatedPastExecutionTimeSeconds"] == 20
    r = loaded(
        [
            *queue(),
            admitted_since("running", 10, T0 - 8_000, accumulated=1),
            admitted_since("fresh", 30, T0 - 8_000, accumulated=None),
        ]
    )
    assert r.admitted() == ["fresh", "running"]
    assert r.engine.next_wakeup_ms() == T0 + 1_000
    r.pass_time(1_000)
    assert cond(r, "running", "Evicted") == EXCEEDED
    assert r.admitted() == ["fresh"]
    assert r.engine.next_wakeup_ms() == T0 + 22_000
    r.pass_time(T0 + 22_000 - r.time_ms)
    assert cond(r, "fresh", "Evicted") == EXCEEDED


def test_reactivated_after_running_out_the_workload_queues_again() -> None:
    """Set active again (Requeued=True, Reactivated), it queues like any workload; the seconds
    summed when its last admission ended still count, so it runs out again at once
    (``reconcileMaxExecutionTime`` reads ``accumulatedPastExecutionTimeSeconds`` as it is)."""
    r = loaded([*queue(), limited("a", 3)])
    r.pass_time(3_000)
    assert cond(r, "a", "Evicted") == EXCEEDED
    inactive = limited("a", 3)
    inactive["spec"]["active"] = False
    r.apply(Event(EventType.UPSERT, r.time_ms, manifest=inactive))
    r.pass_time(1_000)
    r.apply(Event(EventType.UPSERT, r.time_ms, manifest=limited("a", 3)))
    assert cond(r, "a", "Requeued") == ("True", "Reactivated", "The workload was reactivated")
    assert r.engine.next_wakeup_ms() == r.time_ms
    r.pass_time(0)
    assert cond(r, "a", "Evicted") == EXCEEDED


def test_a_jobs_label_sets_the_limit_and_a_bad_one_is_refused() -> None:
    """``MaximumExecutionTimeSecondsForObject``: the Job's ``kueue.x-k8s.io/max-exec-time-seconds``
    label becomes the Workload's limit; ``validateCreateForMaxExecTime`` refuses a label that is
    not a whole number of seconds above 0."""
    job = queued_job("default", "train", "lq", cpu="4")
    job["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "5"
    job["metadata"]["uid"] = "uid-train"
    bad = queued_job("default", "bad", "lq")
    bad["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "0"
    r = Run(Engine())
    r.load_manifests([*queue(), job, bad])
    [refused] = r.rejected()
    assert refused.ref.name == "bad"
    assert "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]" in refused.message
    assert "greater than 0, got '0'" in refused.message
    [name] = r.workloads()
    assert r.workloads()[name]["spec"]["maximumExecutionTimeSeconds"] == 5
    r.pass_time(5_000)
    assert cond(r, name, "Evicted") == EXCEEDED


def test_a_limit_outside_int32_above_zero_is_refused() -> None:
    """The CRD's ``Minimum=1`` on an int32."""
    r = Run(Engine())
    r.load_manifests([*queue(), limited("zero", 0), limited("huge", 2**31)])
    refused = {d.ref.name: d.message for d in r.rejected()}
    assert set(refused) == {"huge", "zero"}
    assert "spec.maximumExecutionTimeSeconds" in refused["zero"]
    assert "must be between 1 and 2147483647, got 0" in refused["zero"]
    assert all(d.action == Action.REJECTED for d in r.rejected())


def test_admitted_without_a_reservation_the_seconds_still_count() -> None:
    """``SyncAdmittedCondition`` on a Workload the cluster shows ``Admitted`` but holding no
    quota: Admitted turns False and the seconds since it turned True are summed."""
    wl = admitted_since("stray", 10, T0 - 5_000, accumulated=2)
    del wl["status"]["admission"]
    wl["status"]["conditions"][0]["status"] = "False"
    wl["status"]["conditions"][0]["reason"] = "Pending"
    r = loaded([*queue(cpu=0), wl])
    assert cond(r, "stray", "Admitted") == ("False", "NoReservation", "The workload has no reservation")
    assert r.status("stray")["accumulatedPastExecutionTimeSeconds"] == 7
