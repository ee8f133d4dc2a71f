"""Fair sharing's preemption candidates in a nested Cohort within its quota.

Kueue's ``fairPreemptions`` takes its candidates from ``findCandidates``: every
workload, using a contested flavor-resource, of a ClusterQueue of the tree that
borrows there (``cqIsBorrowing``), whether or not the Cohorts above that queue
borrow too. Classical preemption (``collectCandidatesInSubtree``) leaves a
subtree within its quota alone (``tests/core/test_preemption_hierarchical_reclaim.py``);
fair sharing then decides by the shares of the almost-least-common-ancestors.

Tree: Cohort ``org`` holds ClusterQueues ``lender`` (a10-spot 10) and ``p``
(h100-reserved 2, reclaimWithinCohort Any) and Cohort ``team``, which holds
``big`` (h100 8) and ``t`` (h100 1). h100: ``big`` runs 5, ``t`` runs 4 (t-h100,
borrowing 3 from ``big`` inside ``team``: ``team`` uses 9 of its 9) and ``p``
runs 2: all 11 taken. ``t`` also runs 4 a10-spot borrowed from ``lender``
(t-spot), so ``team`` borrows, on a10-spot. ``p-new`` asks for 3 h100.

Without weights the lendable gpu at ``org`` is 11 + 10 = 21: ``p`` with p-new
borrows 3 (share 3/21), ``team`` borrows 4 a10-spot (4/21, before and after t-h100 goes).
"""

from __future__ import annotations

import pytest

from tests.helpers import (
    A10,
    GPU,
    H100,
    Manifest,
    admitted_workload,
    cohort_manifest,
    fair_sharing_config,
    gpu_flavors,
    gpu_queue,
    local_queue_manifest,
    run_manifests,
    workload_manifest,
)

H100_ONLY = {"accelerator": "nvidia-h100"}


def nested(strategies: list[str] | None, *, fair: bool = True, t_spot: int = 4) -> list[Manifest]:
    docs = [
        *gpu_flavors(weighted=False),
        cohort_manifest("org"),
        cohort_manifest("team", parent="org"),
        gpu_queue("lender", "org", {A10: 10, H100: 0}),
        gpu_queue("p", "org", {H100: 2, A10: 0}, {"reclaimWithinCohort": "Any"}),
        gpu_queue("big", "team", {H100: 8, A10: 0}),
        gpu_queue("t", "team", {H100: 1, A10: 0}),
        local_queue_manifest("p", "p"),
        admitted_workload("big-h100", "big", {GPU: (H100, 5)}),
        admitted_workload("t-h100", "t", {GPU: (H100, 4)}),
        admitted_workload("p-h100", "p", {GPU: (H100, 2)}),
        workload_manifest("p-new", "p", {GPU: "3"}, selector=H100_ONLY),
    ]
    if t_spot:
        docs.append(admitted_workload("t-spot", "t", {GPU: (A10, t_spot)}))
    if fair:
        docs.insert(0, fair_sharing_config(strategies))
    return docs


@pytest.mark.parametrize(
    "strategies",
    [None, ["LessThanInitialShare"], ["LessThanOrEqualToFinalShare"]],
    ids=["default", "initial-share", "final-share"],
)
def test_a_borrowing_queue_in_a_cohort_within_its_quota_is_a_candidate(strategies: list[str] | None) -> None:
    r = run_manifests(nested(strategies))
    assert r.evictions() == [("t-h100", "InCohortFairSharing")]
    preempted = r.condition("t-h100", "Preempted")
    assert preempted is not None
    assert "preemptor path: /org/p; preemptee path: /org/team/t" in preempted["message"]
    assert r.admitted_in("t") == ["t-spot"]


def test_the_shares_still_decide_where_the_cohort_does_not_borrow() -> None:
    """Without t-spot ``team`` borrows nothing (share 0): neither strategy passes."""
    r = run_manifests(nested(None, t_spot=0))
    assert r.evictions() == []
    assert not r.is_admitted("p-new")
    assert r.admitted_in("t") == ["t-h100"]


def test_classical_preemption_leaves_the_cohort_within_its_quota_alone() -> None:
    r = run_manifests(nested(None, fair=False))
    assert r.evictions() == []
    assert not r.is_admitted("p-new")
