"""Deactivation (``spec.active: false``) of a Workload that holds no quota, and its reactivation.

Scenarios worked out from upstream Kueue (kubernetes-sigs/kueue main, v0.19):
pkg/controller/core workload_controller ``WorkloadReconciler.Reconcile`` (the
branch for a Workload that is not active calls ``workloadevict.Evict`` unless
``workloadevict.IsEvicted``, and clears ``status.requeueState``; the active
branch turns ``Requeued=False/Deactivated`` into ``Requeued=True/Reactivated``),
``resolveGranularUnadmittedQuotaReservedCondition`` (an inactive Workload is
``Deactivated``; one whose blocker is gone is pending evaluation again),
pkg/workload/evict ``prepareForEviction``, ``SetEvictedCondition`` and
``resetChecksOnEviction``, pkg/workload ``SetQuotaReservation`` (which resets
``Evicted`` to False once quota is reserved again), and pkg/controller/jobframework
``ReconcileGenericJob`` (a Workload evicted without a reservation gets no
``Requeued`` condition).

One deliberate difference, as for every Workload still marked Evicted: where
Kueue writes ``PendingEvaluation`` the engine writes ``Pending`` (see the README).
"""

from __future__ import annotations

from typing import Any

import pytest

from kueuestream.admission.api.config import Configuration
from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Event, EventType
from kueuestream.admission.timefmt import rfc3339
from tests.helpers import (
    T0,
    Manifest,
    Run,
    admitted_workload,
    cluster_queue_manifest,
    flavor_manifest,
    local_queue_manifest,
    workload_manifest,
)

MSG = "The workload is deactivated"
GATE_OFF = Configuration.model_validate({"featureGates": {"UnadmittedWorkloadsObservability": False}})


def queue(cpu: int = 4, checks: list[str] | None = None) -> list[Manifest]:
    spec: dict[str, Any] = {}
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    return [
        flavor_manifest("default"),
        cluster_queue_manifest("cq", [(("cpu",), [("default", {"cpu": cpu})])], spec=spec),
        local_queue_manifest("lq", "cq"),
    ]


def wl(name: str, cpu: str = "1", *, active: bool = True, created: str = rfc3339(T0)) -> Manifest:
    out = workload_manifest(name, "lq", {"cpu": cpu}, created=created)
    if not active:
        out["spec"]["active"] = False
    return out


def inactive(manifest: Manifest) -> Manifest:
    return {**manifest, "spec": {**manifest["spec"], "active": False}}


def loaded(docs: list[Manifest], config: Configuration | None = None) -> Run:
    r = Run(Engine(config))
    r.load_manifests(docs)
    assert not r.rejected(), r.rejected()
    return r


def upsert(r: Run, manifest: Manifest) -> None:
    r.tick()
    r.apply(Event(EventType.UPSERT, r.time_ms, manifest=manifest))


def conditions(r: Run, name: str) -> list[tuple[str, str, str, str]]:
    return [(c["type"], c["status"], c["reason"], c["message"]) for c in r.status(name).get("conditions", [])]


def cond(r: Run, name: str, type_: str) -> tuple[str, str, str] | None:
    c = r.condition(name, type_)
    return None if c is None else (c["status"], c["reason"], c["message"])


# ------------------------------------------------------------------ evicted without having run


@pytest.mark.parametrize("config", [None, GATE_OFF], ids=["gate-on", "gate-off"])
def test_a_workload_created_inactive_is_evicted_as_deactivated(config: Configuration | None) -> None:
    """``Reconcile``, not active and not evicted: ``Evict`` with reason Deactivated, whatever the
    UnadmittedWorkloadsObservability gate, before the QuotaReserved condition is synced."""
    r = loaded([*queue(), wl("a", active=False)], config)
    assert r.admitted() == []
    # With the gate, QuotaReserved says Deactivated and UnsetQuotaReservationWithCondition's
    # SyncAdmittedCondition adds Admitted beside it; without it, nothing blocks the queue,
    # so resolveLegacyUnadmittedQuotaReservedCondition writes no QuotaReserved.
    unreserved = [
        ("QuotaReserved", "False", "Deactivated", MSG),
        ("Admitted", "False", "NoReservation", "The workload has no reservation"),
    ]
    assert conditions(r, "a") == [
        ("Evicted", "True", "Deactivated", MSG),
        *(unreserved if config is None else []),
    ]
    assert "admission" not in r.status("a")


def test_a_pending_workload_deactivated_is_evicted_after_its_pending_reason() -> None:
    """A Workload waiting for quota, then set inactive: ``Evicted`` is added after ``QuotaReserved``
    (``SetStatusCondition`` appends), and QuotaReserved becomes Deactivated."""
    r = loaded([*queue(cpu=2), wl("big", cpu="2"), wl("a", cpu="1", created=rfc3339(T0 + 1000))])
    assert r.admitted() == ["big"]
    waiting = cond(r, "a", "QuotaReserved")
    assert waiting is not None and waiting[:2] == ("False", "WaitingForQuota")
    upsert(r, inactive(wl("a", cpu="1", created=rfc3339(T0 + 1000))))
    assert conditions(r, "a") == [
        ("QuotaReserved", "False", "Deactivated", MSG),
        ("Admitted", "False", "NoReservation", "The workload has no reservation"),
        ("Evicted", "True", "Deactivated", MSG),
    ]
    evicted = r.condition("a", "Evicted")
    assert evicted is not None and evicted["lastTransitionTime"] == rfc3339(r.time_ms)


def test_an_inactive_workload_in_a_stopped_queue_is_evicted_too() -> None:
    """Deactivation is checked before any queue blocker
    (``resolveGranularUnadmittedQuotaReservedCondition``)."""
    stopped = queue()
    stopped[1] = {**stopped[1], "spec": {**stopped[1]["spec"], "stopPolicy": "Hold"}}
    r = loaded([*stopped, wl("a", active=False)])
    assert cond(r, "a", "Evicted") == ("True", "Deactivated", MSG)
    assert cond(r, "a", "QuotaReserved") == ("False", "Deactivated", MSG)


def test_a_workload_already_marked_evicted_is_not_evicted_again() -> None:
    """``Evict`` runs only when ``IsEvicted`` is false: an Evicted condition that arrives with the
    Workload (preempted earlier, its job stopped, then deactivated) keeps its reason, message and
    time."""
    preempted = "Preempted to accommodate a higher priority Workload"
    manifest = wl("a", active=False)
    manifest["status"] = {
        "conditions": [
            {
                "type": "Evicted",
                "status": "True",
                "reason": "Preempted",
                "message": preempted,
                "lastTransitionTime": "2023-01-01T00:00:00Z",
            },
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Deactivated",
                "message": MSG,
                "lastTransitionTime": "2023-01-01T00:00:00Z",
            },
        ]
    }
    r = loaded([*queue(), manifest])
    evicted = r.condition("a", "Evicted")
    assert evicted is not None
    assert (evicted["reason"], evicted["message"]) == ("Preempted", preempted)
    assert evicted["lastTransitionTime"] == "2023-01-01T00:00:00Z"
    assert cond(r, "a", "QuotaReserved") == ("False", "Deactivated", MSG)


def test_deactivation_clears_the_requeue_state() -> None:
    """``Reconcile`` clears ``status.requeueState`` of an inactive Workload (evicted or not), so a
    Workload that was waiting out a backoff queues at once when it is set active again."""
    due = T0 + 3_600_000
    manifest = wl("a", active=False)
    manifest["status"] = {"requeueState": {"requeueAt": rfc3339(due)}}
    r = loaded([*queue(), manifest])
    assert "requeueState" not in r.status("a")
    assert cond(r, "a", "Evicted") == ("True", "Deactivated", MSG)
    upsert(r, wl("a"))
    assert r.admitted() == ["a"]
    assert r.time_ms < due


def test_the_checks_of_a_deactivated_workload_are_reset_to_pending() -> None:
    """``resetChecksOnEviction``: every check not Pending goes back to Pending, saying what it was."""
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "prov"},
        "spec": {"controllerName": "example.com/capacity"},
        "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Ready", "message": ""}]},
    }
    # A ClusterQueue with no room, so that the Workload stays pending with its check Ready.
    manifest = wl("a", cpu="8")
    manifest["status"] = {
        "admissionChecks": [
            {"name": "prov", "state": "Ready", "message": "", "lastTransitionTime": rfc3339(T0)}
        ]
    }
    r = loaded([check, *queue(checks=["prov"]), manifest])
    assert [c["state"] for c in r.status("a")["admissionChecks"]] == ["Ready"]
    upsert(r, inactive(manifest))
    (state,) = r.status("a")["admissionChecks"]
    reset = "Reset to Pending after eviction. Previously: Ready"
    assert (state["state"], state["message"]) == ("Pending", reset)


# ------------------------------------------------------------------ set active again


def test_reactivated_without_having_run_it_stays_evicted_until_admitted() -> None:
    """Set active again: ``Evicted`` stays True (only ``SetQuotaReservation`` resets it) and no
    ``Requeued`` condition appears (the job integration sets one only for a Workload that held
    quota); it queues again and, once admitted, Evicted is False with the old message."""
    r = loaded([*queue(cpu=2), wl("big", cpu="2"), wl("a", cpu="1", active=False)])
    assert cond(r, "a", "Evicted") == ("True", "Deactivated", MSG)
    upsert(r, wl("a", cpu="1"))
    assert cond(r, "a", "Evicted") == ("True", "Deactivated", MSG)
    assert cond(r, "a", "Requeued") is None
    waiting = cond(r, "a", "QuotaReserved")
    assert waiting is not None and waiting[:2] == ("False", "WaitingForQuota")
    r.finish("default", "big")
    assert r.admitted() == ["a"]
    assert cond(r, "a", "Evicted") == ("False", "QuotaReserved", f"Previously: {MSG}")


@pytest.mark.parametrize("held", [False, True], ids=["never-admitted", "admitted-before"])
def test_reactivated_it_no_longer_says_deactivated_before_the_next_cycle(held: bool) -> None:
    """``resolveGranularUnadmittedQuotaReservedCondition``: once active, Deactivated is no reason
    any more; until the scheduler's next cycle it is pending evaluation (``Pending`` while it is
    still marked Evicted), for a Workload that never ran and for one evicted while admitted."""
    if held:
        r = loaded([*queue(), admitted_workload("a", "cq", {"cpu": ("default", 1)}, queue="lq")])
        upsert(r, inactive(wl("a")))
    else:
        r = loaded([*queue(), wl("a", active=False)])
    assert cond(r, "a", "QuotaReserved") == ("False", "Deactivated", MSG)
    # Inside a batch the scheduler waits for the batch's end: the state the reactivation leaves.
    r.tick()
    r.apply(Event(EventType.UPSERT, r.time_ms, manifest=wl("a"), batch=True))
    assert cond(r, "a", "QuotaReserved") == (
        "False",
        "Pending",
        "Workload is pending evaluation in the scheduling queue",
    )
    r.apply(Event(EventType.TICK, r.time_ms))
    assert r.admitted() == ["a"]


def test_a_workload_deactivated_while_admitted_is_reactivated() -> None:
    """Admitted, deactivated (evicted; its job stops: ``Requeued=False/Deactivated``), then set
    active again: ``Requeued=True/Reactivated`` (the ``WorkloadDeactivated`` case of
    ``Reconcile``'s active branch), and it is admitted again."""
    admitted = admitted_workload("a", "cq", {"cpu": ("default", 1)}, queue="lq")
    r = loaded([*queue(), admitted])
    assert r.admitted() == ["a"]
    upsert(r, inactive(wl("a")))
    assert r.admitted() == []
    assert cond(r, "a", "Evicted") == ("True", "Deactivated", MSG)
    assert cond(r, "a", "Requeued") == ("False", "Deactivated", MSG)
    assert cond(r, "a", "QuotaReserved") == ("False", "Deactivated", MSG)
    upsert(r, wl("a"))
    assert cond(r, "a", "Requeued") == ("True", "Reactivated", "The workload was reactivated")
    assert r.admitted() == ["a"]
    assert cond(r, "a", "Evicted") == ("False", "QuotaReserved", f"Previously: {MSG}")
