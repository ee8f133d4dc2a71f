"""A request of zero plays no part in preemption, as in Kueue 0.19's ``Preemptor.GetTargets``.

Kueue hands preemption the preemptor's usage from ``Assignment.TotalRequestsFor``,
which leaves zero-quantity requests out. So a Workload asking for ``gpu: 0`` in a
ClusterQueue (or Cohort) over its nominal gpu quota still fits in its quota
(``QuantitiesFitInQuota``: the hierarchical advantage of
``collectCandidatesForHierarchicalReclaim``) and does not borrow
(``workloadFits``): its cpu request alone decides. Counted, the zero would make the
preemptor look as if it borrowed gpus, the borrower of cpu it may reclaim from
becomes a mere priority candidate (``ReclaimWithoutBorrowing`` at equal priority)
and no attempt evicts it. Checked against upstream's scheduler with
``tests/parity``'s harness (seed 965 of the preemption family found it).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import (
    admitted_workload,
    cluster_queue_manifest,
    cohort_manifest,
    flavor_manifest,
    local_queue_manifest,
    run_manifests,
    workload_manifest,
)

GPU = "example.com/gpu"
OLDER = "2025-12-31T00:00:00Z"
RECLAIM = {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "Never"}}


def _queue(name: str, cohort: str, cpus: int, gpus: int, preemption: Any = None) -> dict[str, Any]:
    return cluster_queue_manifest(
        name, [(["cpu", GPU], [("default", {"cpu": cpus, GPU: gpus})])], cohort=cohort, preemption=preemption
    )


def _run(queues: list[dict[str, Any]], cohorts: list[dict[str, Any]], gpu_request: str | None) -> Any:
    """``a`` holds 2 gpus where it has 1 (a-gpu borrows one of ``b``'s); ``b`` runs b-low,
    4 cpus where it has 2, at the priority of a-new, which asks ``a`` for 4 cpus (and
    ``gpu_request`` gpus, unless None).

    a-new is older than b-low. Both then borrow at the same height (the flavor
    assigner does count a zero request where the queue borrows,
    ``FindHeightOfLowestSubtreeThatFits``), so once b-low is stopped the older one
    goes first; were b-low older, it would be admitted back first and the two would
    preempt each other in turn, in Kueue as here."""
    requests = {"cpu": "4"} if gpu_request is None else {"cpu": "4", GPU: gpu_request}
    return run_manifests(
        [
            flavor_manifest("default"),
            *cohorts,
            *queues,
            local_queue_manifest("a", "a"),
            admitted_workload("a-gpu", "a", {GPU: ("default", 2)}, priority=1),
            admitted_workload("b-low", "b", {"cpu": ("default", 4)}, priority=1),
            workload_manifest("a-new", "a", requests, priority=1, created=OLDER),
        ]
    )


@pytest.mark.parametrize("gpu_request", ["0", "0m", None])
def test_a_zero_request_keeps_the_hierarchical_advantage(gpu_request: str | None) -> None:
    """Flat cohort: 4 cpus fit in ``a``'s own 4, so b-low is reclaimed (InCohortReclamation),
    with gpu 0 as without any gpu request."""
    queues = [_queue("a", "c", 4, 1, RECLAIM), _queue("b", "c", 2, 1)]
    r = _run(queues, [], gpu_request)
    assert r.evictions() == [("b-low", "InCohortReclamation")]
    assert r.is_admitted("a-new")
    assert r.admitted_in("a") == ["a-gpu", "a-new"]


def test_a_zero_request_keeps_the_advantage_of_a_nested_cohort() -> None:
    """``a`` (2 cpus) and ``sibling`` (2 cpus, no gpu) in cohort ``s`` under ``root``, with
    ``b``: 4 cpus do not fit in ``a`` but do in ``s``, which is over its gpu quota. The
    advantage found at ``s`` makes b-low a hierarchy candidate at ``root``."""
    queues = [_queue("a", "s", 2, 1, RECLAIM), _queue("sibling", "s", 2, 0), _queue("b", "root", 2, 1)]
    r = _run(queues, [cohort_manifest("root"), cohort_manifest("s", "root")], "0")
    assert r.evictions() == [("b-low", "InCohortReclamation")]
    assert r.is_admitted("a-new")


def test_a_zero_request_does_not_make_the_preemptor_borrow() -> None:
    """With ``borrowWithinCohort: LowerPriority`` the attempt with borrowing comes first
    and b-low, as a hierarchy candidate, is valid in it: the zero gpu does not count."""
    preemption = {
        "reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 0},
    }
    r = _run([_queue("a", "c", 4, 1, preemption), _queue("b", "c", 2, 1)], [], "0")
    assert r.evictions() == [("b-low", "InCohortReclamation")]
    assert r.is_admitted("a-new")


def test_a_positive_request_where_the_queue_borrows_still_counts() -> None:
    """The guard the other way: a-new asking for 1 gpu where ``a`` already borrows its
    second cannot have b-low reclaimed for it (b-low, at equal priority, is only a
    candidate without borrowing, and ``a`` would borrow), so it waits."""
    r = _run([_queue("a", "c", 4, 1, RECLAIM), _queue("b", "c", 2, 1)], [], "1")
    assert r.evictions() == []
    assert not r.is_admitted("a-new")
    assert r.admitted_in("b") == ["b-low"]
