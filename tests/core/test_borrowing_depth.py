"""Borrowing depth orders a cycle's heads.

Kueue's ``makeClassicalIterator`` (pkg/scheduler/scheduler.go) sorts a
cycle's entries by ``Assignment.Borrows()``: the height of the lowest
Cohort whose subtree quota covers what the workload adds
(``FindHeightOfLowestSubtreeThatFits``, pkg/scheduler/preemption/classical),
0 when the ClusterQueue's own quota does. Only then come priority and age.
So a head that borrows inside its own Cohort goes before one that needs the
root's quota, even when the latter is older and of higher priority.
"""

from __future__ import annotations

from typing import Any

from tests.helpers import (
    Manifest,
    cluster_queue_manifest,
    cohort_manifest,
    flavor_manifest,
    local_queue_manifest,
    run_manifests,
    workload_manifest,
)


def cpu_queue(name: str, cpu: int, cohort: str, **extra: Any) -> list[Manifest]:
    return [
        cluster_queue_manifest(name, [(["cpu"], [("default", {"cpu": cpu})])], cohort=cohort, **extra),
        local_queue_manifest(name, name),
    ]


def tree() -> list[Manifest]:
    """root: left (l-lender 4 cpu, l-borrower 0, l-owner 0) and right (r-borrower 0)."""
    return [
        flavor_manifest("default"),
        cohort_manifest("root"),
        cohort_manifest("left", parent="root"),
        cohort_manifest("right", parent="root"),
        *cpu_queue("l-lender", 4, "left"),
        *cpu_queue("l-borrower", 0, "left"),
        *cpu_queue("r-borrower", 0, "right"),
    ]


def head(name: str, queue: str, *, priority: int, second: int) -> Manifest:
    return workload_manifest(
        name, queue, {"cpu": "4"}, priority=priority, created=f"2026-01-01T00:00:{second:02d}Z"
    )


def test_borrowing_inside_the_cohort_goes_before_borrowing_from_the_root() -> None:
    """Kueue's makeClassicalIterator compares Assignment.Borrows(): 1 for l-borrower's head
    (left's quota covers it), 2 for r-borrower's (only root's does); the older,
    higher-priority head that needs the root loses the only 4 cpus."""
    r = run_manifests(
        [
            *tree(),
            head("from-root", "r-borrower", priority=100, second=0),
            head("in-cohort", "l-borrower", priority=0, second=30),
        ]
    )
    assert r.admitted() == ["in-cohort"]
    assert "insufficient unused quota for cpu" in r.pending_message("from-root")


def test_within_nominal_quota_goes_before_borrowing_in_the_cohort() -> None:
    """Kueue's makeClassicalIterator: Borrows() of 0 (l-lender's own quota) sorts before 1."""
    r = run_manifests(
        [
            *tree(),
            head("borrower", "l-borrower", priority=100, second=0),
            head("owner", "l-lender", priority=0, second=30),
        ]
    )
    assert r.admitted() == ["owner"]
    assert "insufficient unused quota for cpu" in r.pending_message("borrower")


def test_equal_depth_falls_back_to_priority_then_age() -> None:
    """Kueue's makeClassicalIterator: with equal Borrows(), priority then the queue time decide."""
    docs = [*tree(), *cpu_queue("r-second", 0, "right")]
    by_priority = run_manifests(
        [
            *docs,
            head("old-low", "r-borrower", priority=0, second=0),
            head("new-high", "r-second", priority=5, second=30),
        ]
    )
    assert by_priority.admitted() == ["new-high"]
    by_age = run_manifests(
        [
            *docs,
            head("old", "r-borrower", priority=0, second=0),
            head("new", "r-second", priority=0, second=30),
        ]
    )
    assert by_age.admitted() == ["old"]


def test_quota_held_by_a_cohort_is_nearer_to_its_own_queues() -> None:
    """Kueue's scheduler_test case "in a hierarchical cohort, workload borrowing less is
    scheduled first": the 4 cpus belong to Cohort guaranteed (under root); its queue
    borrows at depth 1, best-effort (directly under root) at depth 2, so the
    higher-priority best-effort head loses."""
    guaranteed = cohort_manifest("guaranteed", parent="root")
    guaranteed["spec"]["resourceGroups"] = [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "4"}]}],
        }
    ]
    r = run_manifests(
        [
            flavor_manifest("default"),
            cohort_manifest("root"),
            guaranteed,
            *cpu_queue("guaranteed", 0, "guaranteed"),
            *cpu_queue("best-effort", 0, "root"),
            head("guaranteed-head", "guaranteed", priority=0, second=0),
            head("best-effort-head", "best-effort", priority=3, second=0),
        ]
    )
    assert r.admitted() == ["guaranteed-head"]
