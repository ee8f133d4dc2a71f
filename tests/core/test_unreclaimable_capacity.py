"""A head that needs preemption but finds no candidates holds its quota for the rest of the cycle.

Worked out from upstream Kueue (kubernetes-sigs/kueue main, v0.19 gates):
pkg/scheduler ``processEntry`` calls ``reserveCapacityForUnreclaimablePreempt``
for a head whose assignment needs preemption (``Preempt``) but that has no
targets: unless its ClusterQueue ``CanAlwaysReclaim`` (pkg/scheduler/preemption,
``reclaimWithinCohort: Any``), the cycle's snapshot is charged with
``quotaResourcesToReserve``: what it asks for, capped at what is left of the
ClusterQueue's nominal quota, or, when the assignment borrows, of its nominal
quota plus borrowing limit (all of it without a limit). Heads processed after
it in the cycle that needed that capacity are skipped ("Workload no longer fits
after processing another workload") and go back to their queue at once
(``requeueIfNotPresent``), to be tried again next cycle, when a waiting head in a
BestEffortFIFO queue is parked. So the hold decides who wins when the next
cycle brings a competitor, and it lasts while a StrictFIFO queue keeps the
waiting head at its front. The single cycle of ``TestSchedule``'s "capacity not
blocked when lending clusterqueue can reclaim" and "capacity blocked when
lending clusterqueue not guaranteed to reclaim" (LowerPriority, Never) is
played out to quiescence here.
"""

from __future__ import annotations

import pytest

from tests.helpers import (
    Manifest,
    admitted_workload,
    cluster_queue_manifest,
    cohort_manifest,
    flavor_manifest,
    local_queue_manifest,
    run_manifests,
    workload_manifest,
)

SKIPPED = "Workload no longer fits after processing another workload"


def cq(
    name: str,
    gpu: int,
    reclaim: str | None = None,
    *,
    strategy: str = "BestEffortFIFO",
    preemption: dict[str, object] | None = None,
    borrowing: int | None = None,
) -> list[Manifest]:
    policy = dict(preemption or {})
    if reclaim:
        policy["reclaimWithinCohort"] = reclaim
    return [
        cluster_queue_manifest(
            name,
            [(["gpu"], [("on-demand", {"gpu": gpu})])],
            cohort="root",
            preemption=policy or None,
            borrowing=borrowing,
            spec={"queueingStrategy": strategy},
        ),
        local_queue_manifest("lq", name, namespace=name),
    ]


def wl(name: str, queue_ns: str, gpu: int, created: str, priority: int = 0) -> Manifest:
    return workload_manifest(
        name, "lq", {"gpu": str(gpu)}, namespace=queue_ns, created=created, priority=priority
    )


def lender(reclaim: str | None, strategy: str = "BestEffortFIFO") -> list[Manifest]:
    """ClusterQueueA: 2 gpus, one held by a1, and a2 (2 gpus) waiting: nothing may be preempted."""
    return [
        flavor_manifest("on-demand"),
        cohort_manifest("root"),
        *cq("a", 2, reclaim, strategy=strategy),
        admitted_workload("a1", "a", {"gpu": ("on-demand", 1)}, namespace="a", queue="lq"),
        wl("a2", "a", 2, "2026-01-01T00:01:00Z"),
    ]


RECLAIM = [("Any", False), ("LowerPriority", True), ("Never", True), (None, True)]


@pytest.mark.parametrize(("reclaim", "holds"), RECLAIM)
def test_a_strict_fifo_lender_keeps_what_its_waiting_head_needs(reclaim: str | None, holds: bool) -> None:
    """a2 stays at the front of its StrictFIFO queue, so every cycle holds A's free gpu for it
    and b1 (ClusterQueueB, no quota of its own) never borrows it, unless A can always
    reclaim (reclaimWithinCohort Any)."""
    r = run_manifests([*lender(reclaim, "StrictFIFO"), *cq("b", 0), wl("b1", "b", 1, "2026-01-01T00:02:00Z")])
    cond = r.condition("a2", "QuotaReserved")
    assert cond is not None and cond["reason"] == "WaitingForQuota"
    # Short of 1 gpu while the free one is held for it; of 2 once b1 borrowed that one.
    more = 1 if holds else 2
    assert r.pending_message("a2") == (
        "couldn't assign flavors to pod set main: "
        f"insufficient unused quota for gpu in flavor on-demand, {more} more needed"
    )
    if holds:
        assert r.admitted() == ["a1"]
        assert r.pending_message("b1") == SKIPPED
    else:
        assert r.admitted() == ["a1", "b1"]


@pytest.mark.parametrize(("reclaim", "holds"), RECLAIM)
def test_the_hold_lets_a_higher_priority_borrower_of_the_next_cycle_win(
    reclaim: str | None, holds: bool
) -> None:
    """Cycle 1: a2 waits (and is parked), b1 (priority 0) would borrow A's free gpu, c0
    (priority 10) fits ClusterQueueC's own quota. If a2 holds the gpu, b1 is skipped and
    tried again in cycle 2, where c1 (priority 10, C's next Workload, also borrowing)
    comes first and takes it; if not, b1 took it in cycle 1 and c1 waits."""
    own = cq("c", 1)
    # C lends nothing, so that only A's free gpu is there to borrow.
    own[0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = "0"
    docs = [
        *lender(reclaim),
        *cq("b", 0),
        *own,
        wl("b1", "b", 1, "2026-01-01T00:02:00Z"),
        wl("c0", "c", 1, "2026-01-01T00:03:00Z", priority=10),
        wl("c1", "c", 1, "2026-01-01T00:04:00Z", priority=10),
    ]
    r = run_manifests(docs)
    if holds:
        assert r.admitted() == ["a1", "c0", "c1"]
        assert "b1" not in r.admitted()
    else:
        assert r.admitted() == ["a1", "b1", "c0"]


def test_a_head_that_fits_its_own_quota_is_not_held_back() -> None:
    """The hold takes A's free gpu out of the cohort, not anyone's own quota: c1 fits
    ClusterQueueC's and is admitted in the same cycle."""
    r = run_manifests([*lender("Never", "StrictFIFO"), *cq("c", 1), wl("c1", "c", 1, "2026-01-01T00:02:00Z")])
    assert r.admitted() == ["a1", "c1"]


@pytest.mark.parametrize(("limit", "holds"), [(None, True), (2, True), (0, False)])
def test_a_head_that_would_borrow_holds_up_to_its_borrowing_limit(limit: int | None, holds: bool) -> None:
    """ClusterQueueA (1 gpu, held by a1 of priority 10, StrictFIFO) waits with a2 (2 gpus,
    priority 5), which would have to borrow and to preempt while borrowing
    (borrowWithinCohort), with no candidate of lower priority. Its assignment borrows,
    so quotaResourcesToReserve holds min(request, nominal + borrowingLimit - usage) of the
    cohort, all of it without a limit, and b1 cannot borrow the lender's gpu. With a
    borrowing limit of 0, a2 does not fit at all (no preemption), holds nothing, and b1
    borrows."""
    within = {"reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": {"policy": "LowerPriority"}}
    docs = [
        flavor_manifest("on-demand"),
        cohort_manifest("root"),
        *cq("a", 1, strategy="StrictFIFO", preemption=within, borrowing=limit),
        *cq("b", 0),
        *cq("lender", 1),
        admitted_workload("a1", "a", {"gpu": ("on-demand", 1)}, namespace="a", queue="lq", priority=10),
        wl("a2", "a", 2, "2026-01-01T00:01:00Z", priority=5),
        wl("b1", "b", 1, "2026-01-01T00:02:00Z"),
    ]
    r = run_manifests(docs)
    assert "a2" not in r.admitted()
    assert ("b1" in r.admitted()) != holds
    if holds:
        assert r.pending_message("b1") == SKIPPED
