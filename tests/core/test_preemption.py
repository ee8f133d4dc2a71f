"""Classical preemption, worked out by hand from Kueue's documented rules."""

from __future__ import annotations

import pytest

from kueuestream.admission.api.config import Configuration
from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action, Decision, Event, EventType
from tests.helpers import cluster_queue, docs_of, flavor, run, workload

CQ4 = "default: [{name: cpu, nominalQuota: 4}]"


def test_lower_priority_is_preempted_within_the_cluster_queue() -> None:
    text = (
        flavor("default")
        + cluster_queue("q", CQ4, spec_extra="  preemption: {withinClusterQueue: LowerPriority}")
        + workload("low-old", "q", cpu="2", priority=1, created="2024-01-01T00:00:00Z")
        + workload("low-new", "q", cpu="2", priority=1, created="2024-01-01T00:00:01Z")
    )
    r = run(text)
    assert r.admitted() == ["low-new", "low-old"]
    r.tick()
    decisions = r.load(workload("high", "q", cpu="2", priority=10, created="2024-01-01T01:00:00Z"))
    # One victim is enough. Both were admitted at the same moment, so the younger goes.
    assert r.admitted() == ["high", "low-old"]
    victims = [d.ref.name for d in decisions if d.action == Action.EVICTED]
    assert victims == ["low-new"]
    victim = victims[0]
    preempted = r.condition(victim, "Preempted")
    assert preempted is not None and preempted["reason"] == "InClusterQueue"
    assert preempted["message"] == (
        "Preempted to accommodate a workload (UID: UNKNOWN, JobUID: UNKNOWN) due to "
        "prioritization in the ClusterQueue; preemptor path: /q; preemptee path: /q"
    )
    requeued = r.condition(victim, "Requeued")
    assert requeued is not None and (requeued["status"], requeued["reason"]) == ("True", "Preempted")
    assert r.condition(victim, "QuotaReserved")["status"] == "False"
    assert r.condition(victim, "Admitted") == {
        **r.condition(victim, "Admitted"),  # type: ignore[dict-item]
        "status": "False",
        "reason": "NoReservation",
        "message": "The workload has no reservation",
    }


def test_the_most_recently_admitted_is_preempted_first() -> None:
    r = run(
        flavor("default")
        + cluster_queue("q", CQ4, spec_extra="  preemption: {withinClusterQueue: LowerPriority}")
        + workload("first", "q", cpu="2", priority=1)
    )
    r.tick()
    r.load(workload("second", "q", cpu="2", priority=1, created="2024-01-01T00:00:01Z"))
    r.tick()
    r.load(workload("urgent", "q", cpu="2", priority=5, created="2024-01-01T00:00:02Z"))
    assert r.admitted() == ["first", "urgent"]


def test_equal_priority_is_not_preempted_under_lower_priority() -> None:
    r = run(
        flavor("default")
        + cluster_queue("q", CQ4, spec_extra="  preemption: {withinClusterQueue: LowerPriority}")
        + workload("a", "q", cpu="4", priority=3)
    )
    r.tick()
    r.load(workload("b", "q", cpu="4", priority=3, created="2024-01-01T00:00:01Z"))
    assert r.admitted() == ["a"]


def test_lower_or_newer_equal_priority_preempts_a_newer_equal() -> None:
    # "newer" is the one created later: the preemptor must be older than its victim.
    r = run(
        flavor("default")
        + cluster_queue("q", CQ4, spec_extra="  preemption: {withinClusterQueue: LowerOrNewerEqualPriority}")
        + workload("young", "q", cpu="4", priority=3, created="2024-01-01T00:10:00Z")
    )
    r.tick()
    r.load(workload("old", "q", cpu="4", priority=3, created="2024-01-01T00:00:00Z"))
    assert r.admitted() == ["old"]


def test_no_preemption_policy_means_waiting() -> None:
    r = run(flavor("default") + cluster_queue("q", CQ4) + workload("a", "q", cpu="4", priority=1))
    r.tick()
    r.load(workload("b", "q", cpu="4", priority=100, created="2024-01-01T00:00:01Z"))
    assert r.admitted() == ["a"]
    assert "4 more needed" in r.pending_message("b")


RECLAIM = "  preemption: {reclaimWithinCohort: Any}"
# lender owns 4 cpu and reclaims; borrower owns none and runs b1 and b2 (2 each) on lender's quota.
BORROWED_FROM_LENDER = (
    flavor("default")
    + cluster_queue("borrower", "default: [{name: cpu, nominalQuota: 0}]", cohort="c")
    + cluster_queue("lender", CQ4, cohort="c", spec_extra=RECLAIM)
    + workload("b1", "borrower", cpu="2", created="2024-01-01T00:00:00Z")
    + workload("b2", "borrower", cpu="2", created="2024-01-01T00:00:01Z")
)


def test_reclaiming_nominal_quota_from_a_borrower() -> None:
    # lender owns 4, borrower owns 0 and borrowed all 4. When the lender needs 3 back,
    # the borrower's workloads are evicted until 3 are free: two of 2 cpu.
    r = run(BORROWED_FROM_LENDER)
    assert r.admitted() == ["b1", "b2"]
    r.tick()
    decisions = r.load(workload("own", "lender", cpu="3", priority=0, created="2024-01-01T00:01:00Z"))
    assert r.admitted() == ["own"]
    evicted = sorted(d.ref.name for d in decisions if d.action == Action.EVICTED)
    assert evicted == ["b1", "b2"]
    assert r.condition("b1", "Preempted")["reason"] == "InCohortReclamation"
    assert r.condition("b1", "Preempted")["message"].endswith(
        "due to reclamation within the cohort; preemptor path: /c/lender; preemptee path: /c/borrower"
    )


def test_reclaim_takes_only_what_is_needed() -> None:
    r = run(BORROWED_FROM_LENDER)
    r.tick()
    r.load(workload("own", "lender", cpu="2", created="2024-01-01T00:01:00Z"))
    assert r.admitted() == ["b1", "own"]


def test_reclaim_lower_priority_spares_equal_priority_borrowers() -> None:
    r = run(
        flavor("default")
        + cluster_queue("borrower", "default: [{name: cpu, nominalQuota: 0}]", cohort="c")
        + cluster_queue(
            "lender", CQ4, cohort="c", spec_extra="  preemption: {reclaimWithinCohort: LowerPriority}"
        )
        + workload("b1", "borrower", cpu="4", priority=5)
    )
    r.tick()
    r.load(workload("own", "lender", cpu="2", priority=5, created="2024-01-01T00:01:00Z"))
    assert r.admitted() == ["b1"]


def test_borrow_within_cohort_preempts_lower_priority_while_borrowing() -> None:
    # a owns 2 and wants 4: it must borrow 2 while preempting b's low-priority borrower.
    policy = "  preemption:\n    reclaimWithinCohort: Any\n    borrowWithinCohort: {policy: LowerPriority}"
    r = run(
        flavor("default")
        + cluster_queue("a", "default: [{name: cpu, nominalQuota: 2}]", cohort="c", spec_extra=policy)
        + cluster_queue("b", "default: [{name: cpu, nominalQuota: 2}]", cohort="c")
        + workload("b-big", "b", cpu="4", priority=1)
    )
    r.tick()
    r.load(workload("a-big", "a", cpu="4", priority=10, created="2024-01-01T00:01:00Z"))
    assert r.admitted() == ["a-big"]
    assert r.condition("b-big", "Preempted")["reason"] == "InCohortReclaimWhileBorrowing"


def _high_arrives_over_low(engine: Engine) -> list[Decision]:
    """A queue of 4 cpus filled by "low" (priority 1); then "high" (priority 9, 4 cpus) arrives:
    the decisions of its arrival, with no job controller stopping the victim."""
    text = (
        flavor("default")
        + cluster_queue("q", CQ4, spec_extra="  preemption: {withinClusterQueue: LowerPriority}")
        + workload("low", "q", cpu="4", priority=1)
    )
    docs = docs_of(text)
    for i, d in enumerate(docs):
        engine.apply(Event(EventType.UPSERT, 1000, manifest=d, batch=i < len(docs) - 1))
    return engine.apply(
        Event(EventType.UPSERT, 2000, manifest=docs_of(workload("high", "q", cpu="4", priority=9))[0])
    )


def test_preemptor_waits_until_victims_release_quota() -> None:
    # Without the job controller stopping the victim, the preemptor stays pending.
    engine = Engine()
    out = _high_arrives_over_low(engine)
    assert sorted((d.ref.name, d.action) for d in out) == [
        ("high", Action.PENDING),
        ("low", Action.EVICTED),
    ]
    high = next(d for d in out if d.ref.name == "high")
    assert high.message.endswith(". Pending the preemption of 1 workload(s)")
    # A tick changes nothing: the victim still holds its quota.
    assert engine.apply(Event(EventType.TICK, 3000)) == []
    low = next(d for d in out if d.ref.name == "low")
    after = engine.apply(Event(EventType.STOPPED, 4000, ref=low.ref))
    assert [(d.ref.name, d.action) for d in after] == [("low", Action.PENDING), ("high", Action.ADMITTED)]
    requeued = next(c for c in after[0].status["conditions"] if c["type"] == "Requeued")
    assert (requeued["status"], requeued["reason"]) == ("True", "Preempted")


@pytest.mark.parametrize(
    ("at_once", "gate", "reason"),
    [
        (True, True, "PendingEvaluation"),
        (False, True, "Pending"),
        (True, False, "Pending"),
        (False, False, "Pending"),
    ],
)
def test_a_stopped_victim_waits_with_the_reason_kueues_job_integration_writes(
    at_once: bool, gate: bool, reason: str
) -> None:
    """The stop as Kueue's job integration writes it (``GenericJobReconciler``, "handle
    eviction"): ``UnsetQuotaReservationWithCondition`` with ``PendingEvaluation`` (gate
    UnadmittedWorkloadsObservability on; ``Pending`` off) and the eviction's message,
    Evicted staying True. Stopped by the runtime itself (no cluster) the engine writes
    just that; stopped by a cluster's job integration it keeps the legacy ``Pending``, so
    that its own status coming back late through a watch never reads as a second stop
    (``agents/kube/stop_signal.py``)."""
    from kueuestream.admission.api.config import Configuration

    config = Configuration.model_validate({"featureGates": {"UnadmittedWorkloadsObservability": gate}})
    engine = Engine(config)
    out = _high_arrives_over_low(engine)
    evicted = next(d for d in out if d.ref.name == "low" and d.action == Action.EVICTED)
    eviction = next(c for c in evicted.status["conditions"] if c["type"] == "Evicted")
    # In one batch with what follows: the status the stop itself leaves, before any cycle.
    stop = Event(EventType.STOPPED, 3000, ref=evicted.ref, batch=True, stopped_at_once=at_once)
    [requeued] = engine.apply(stop)
    assert requeued.action == Action.REQUEUED
    conditions = {c["type"]: c for c in requeued.status["conditions"]}
    reserved = conditions["QuotaReserved"]
    assert (reserved["status"], reserved["reason"], reserved["message"]) == (
        "False",
        reason,
        eviction["message"],
    )
    assert conditions["Evicted"]["status"] == "True"
    assert "admission" not in requeued.status


@pytest.mark.parametrize("sorting", [True, False], ids=["priority-sorting", "no-priority-sorting"])
def test_without_priority_sorting_a_workload_reclaimed_while_borrowing_queues_after_the_preemption(
    sorting: bool,
) -> None:
    """``Ordering.GetQueueOrderTimestamp``: with PrioritySortingWithinCohort off, a Workload
    preempted with reason InCohortReclaimWhileBorrowing is ordered by the Preempted condition's
    time plus a millisecond, not its creation. In a StrictFIFO queue, a Workload created after
    it but before that preemption then goes first once quota is free; with the gate on (the
    default) the older one stays at the head and blocks it."""
    policy = "  preemption:\n    reclaimWithinCohort: Any\n    borrowWithinCohort: {policy: LowerPriority}"
    strict = "  queueingStrategy: StrictFIFO"
    config = Configuration.model_validate({"featureGates": {"PrioritySortingWithinCohort": sorting}})
    r = run(
        flavor("default")
        + cluster_queue("a", "default: [{name: cpu, nominalQuota: 2}]", cohort="c", spec_extra=policy)
        + cluster_queue("b", "default: [{name: cpu, nominalQuota: 2}]", cohort="c", spec_extra=strict)
        + workload("b-big", "b", cpu="4", priority=1, created="2023-11-01T00:00:00Z"),
        config,
    )
    assert r.admitted() == ["b-big"]
    r.tick()
    r.load(workload("a-big", "a", cpu="4", priority=10, created="2023-11-01T00:02:00Z"))
    r.tick()
    assert r.admitted() == ["a-big"]
    assert r.condition("b-big", "Preempted")["reason"] == "InCohortReclaimWhileBorrowing"  # type: ignore[index]
    # Created before the preemption, after b-big; then one more cpu for b, which only it fits.
    r.load(workload("b-late", "b", cpu="1", priority=1, created="2023-11-01T00:01:00Z"))
    r.tick()
    r.load(cluster_queue("b", "default: [{name: cpu, nominalQuota: 3}]", cohort="c", spec_extra=strict))
    r.tick()
    r.tick()
    assert r.admitted() == (["a-big"] if sorting else ["a-big", "b-late"])
