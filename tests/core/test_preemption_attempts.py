"""Classical preemption's candidate groups and attempts, as Kueue 0.19's ``classicalPreemptions``.

``NewCandidateIterator`` orders the candidates in three groups, the evicting ones
of every group first: hierarchy candidates, priority candidates (other queues,
``classifyPreemptionVariant``) and the preemptor's own queue. An attempt that lets
the preemptor borrow skips the priority candidates ``borrowWithinCohort`` does
not allow to be reclaimed while borrowing (``ReclaimWithoutBorrowing``:
priority at or above the preemptor's, or above ``maxPriorityThreshold``;
``candidateIsValid``); the own queue's candidates are always valid. With
``borrowWithinCohort`` set, the attempt with borrowing comes first.

Cohort ``c``: ``a`` (8 cpus; withinClusterQueue LowerPriority, reclaimWithinCohort
Any, borrowWithinCohort LowerPriority with the threshold below), ``b`` (2 cpus)
and ``lender`` (4 cpus), 14 in all. ``a`` runs a-low (priority 5, 3 cpus), ``b``
runs b-low (priority 1, 3 cpus: it borrows 1). a-high (priority 10) asks for 9:
8 are free, and once admitted ``a`` borrows 1. Checked against upstream's
scheduler with ``tests/parity``'s harness.
"""

from __future__ import annotations

from typing import Any

from tests.helpers import (
    admitted_workload,
    cluster_queue_manifest,
    flavor_manifest,
    local_queue_manifest,
    run_manifests,
    workload_manifest,
)


def _queue(name: str, cpus: int, preemption: dict[str, Any] | None = None) -> dict[str, Any]:
    return cluster_queue_manifest(
        name, [(["cpu"], [("default", {"cpu": cpus})])], cohort="c", preemption=preemption
    )


def _scenario(threshold: int) -> list[dict[str, Any]]:
    preemption = {
        "withinClusterQueue": "LowerPriority",
        "reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": threshold},
    }
    return [
        flavor_manifest("default"),
        _queue("a", 8, preemption),
        _queue("b", 2),
        _queue("lender", 4),
        local_queue_manifest("a", "a"),
        admitted_workload("a-low", "a", {"cpu": ("default", 3)}, priority=5),
        admitted_workload("b-low", "b", {"cpu": ("default", 3)}, priority=1),
        workload_manifest("a-high", "a", {"cpu": "9"}, priority=10),
    ]


def test_the_attempt_with_borrowing_takes_the_own_queues_candidate_the_threshold_leaves() -> None:
    """b-low (priority 1) is above the threshold 0: not in the attempt with borrowing, which
    evicts a-low; the attempt without borrowing could never fit 9 cpus in ``a``'s 8."""
    r = run_manifests(_scenario(threshold=0))
    assert r.evictions() == [("a-low", "InClusterQueue")]
    assert r.is_admitted("a-high")
    assert r.admitted_in("b") == ["b-low"]


def test_a_priority_candidate_under_the_threshold_goes_before_the_own_queues() -> None:
    """Under a threshold of 1, b-low may be reclaimed while ``a`` borrows, and priority
    candidates come before the preemptor's own queue."""
    r = run_manifests(_scenario(threshold=1))
    assert r.evictions() == [("b-low", "InCohortReclaimWhileBorrowing")]
    assert r.is_admitted("a-high")
    assert r.admitted_in("a") == ["a-high", "a-low"]
