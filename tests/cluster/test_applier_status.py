"""The status the cluster applier writes for a Workload decision, checked without a server."""

from __future__ import annotations

from typing import Any

from kueuestream.agents.kube.applier import has_status, merged_status, needs_deactivation


def entry(name: str, state: str, when: str) -> dict[str, Any]:
    return {"name": name, "state": state, "lastTransitionTime": when, "message": ""}


def test_admission_checks_keep_a_controllers_newer_state() -> None:
    """Each check controller writes its own entry (Kueue's SetAdmissionCheckState); a decision made
    before the engine saw that write must not put the older state back."""
    live = {
        "admissionChecks": [
            entry("newer", "Ready", "2026-01-01T00:00:05Z"),
            entry("older", "Ready", "2026-01-01T00:00:01Z"),
            entry("dropped", "Ready", "2026-01-01T00:00:01Z"),
        ]
    }
    decided = {
        "conditions": [],
        "admissionChecks": [
            entry("newer", "Pending", "2026-01-01T00:00:03Z"),
            entry("older", "Pending", "2026-01-01T00:00:03Z"),
        ],
    }
    wanted = merged_status(live, decided)
    assert wanted["admissionChecks"] == [
        entry("newer", "Ready", "2026-01-01T00:00:05Z"),
        entry("older", "Pending", "2026-01-01T00:00:03Z"),
    ]
    assert not has_status(live, wanted)


def test_an_evictions_reset_of_a_check_is_written_in_the_second_of_the_state_it_resets() -> None:
    """resetChecksOnEviction (pkg/workload/evict): the eviction of a Workload a check put in Retry
    writes the check back to Pending. Times are kept to the second, so the Retry the engine reset
    can carry the reset's own second; keeping it would evict the Workload again at its next
    reservation, over and over. A Retry set again since (the count the reset left) is kept."""
    second = "2026-01-01T00:00:05Z"
    live = {"admissionChecks": [{**entry("mk", "Retry", second), "message": "Admitting remote lost"}]}
    reset = {
        **entry("mk", "Pending", second),
        "message": "Reset to Pending after eviction. Previously: Retry",
        "retryCount": 1,
    }
    decided = {"conditions": [], "admissionChecks": [reset]}
    wanted = merged_status(live, decided)
    assert wanted["admissionChecks"] == [reset]
    assert not has_status(live, wanted)
    again = {**live["admissionChecks"][0], "retryCount": 1}
    assert merged_status({"admissionChecks": [again]}, decided)["admissionChecks"] == [again]
    # A state the reset did not replace is a controller's newer one, and kept.
    ready = entry("mk", "Ready", second)
    assert merged_status({"admissionChecks": [ready]}, decided)["admissionChecks"] == [ready]


def test_checks_and_requeue_state_are_written_and_removed() -> None:
    """status.admissionChecks, status.requeueState and status.accumulatedPastExecutionTimeSeconds
    follow the decision, None meaning removed."""
    decided = {
        "conditions": [],
        "requeueState": {"requeueAt": "2026-01-01T00:01:00Z"},
        "admissionChecks": [entry("prov", "Pending", "2026-01-01T00:00:00Z")],
        "accumulatedPastExecutionTimeSeconds": 4,
    }
    wanted = merged_status({}, decided)
    assert wanted["requeueState"] == {"requeueAt": "2026-01-01T00:01:00Z"}
    assert wanted["accumulatedPastExecutionTimeSeconds"] == 4
    assert has_status(wanted, merged_status(wanted, decided))
    cleared = merged_status(wanted, {"conditions": []})
    assert (cleared["requeueState"], cleared["admissionChecks"]) == (None, None)
    assert cleared["accumulatedPastExecutionTimeSeconds"] is None
    assert not has_status(wanted, cleared)
    assert has_status({}, cleared)


def test_a_workload_a_check_rejected_is_deactivated_unless_reactivated() -> None:
    """Kueue sets spec.active false on a Workload it deactivates itself (a Rejected check, its
    maximum execution time: ``IsEvictedDueToDeactivationByKueue``); once set active again
    (Requeued=True, reason Reactivated) it is left alone."""
    evicted = {"type": "Evicted", "status": "True", "reason": "DeactivatedDueToAdmissionCheck"}
    reactivated = {"type": "Requeued", "status": "True", "reason": "Reactivated"}
    active: dict[str, Any] = {"spec": {}}
    assert needs_deactivation(active, {"conditions": [evicted]})
    out_of_time = {**evicted, "reason": "DeactivatedDueToMaximumExecutionTimeExceeded"}
    assert needs_deactivation(active, {"conditions": [out_of_time]})
    # Deactivated by whoever set spec.active false: nothing for the applier to do.
    assert not needs_deactivation(active, {"conditions": [{**evicted, "reason": "Deactivated"}]})
    assert not needs_deactivation({"spec": {"active": False}}, {"conditions": [evicted]})
    assert not needs_deactivation(active, {"conditions": [evicted, reactivated]})
    preempted = {**evicted, "reason": "Preempted"}
    assert not needs_deactivation(active, {"conditions": [preempted]})
