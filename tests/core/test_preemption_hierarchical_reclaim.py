"""Why a workload reclaimed from a borrowing ClusterQueue is preempted: the Preempted reason.

Found by running the same scenarios through upstream Kueue's scheduler
(``tests/parity``, ``--preemption``). Kueue's classical preemption
(pkg/scheduler/preemption/classical/hierarchical_preemption.go,
``collectCandidatesForHierarchicalReclaim`` and ``classifyPreemptionVariant``)
gives the preemptor a hierarchical advantage over every workload of another
ClusterQueue once its whole usage fits in the subtree quota of a node below
their lowest common ancestor (``QuantitiesFitInQuota``; in a flat Cohort: its
own ClusterQueue's nominal quota). Such a candidate is ``HiearchicalReclaim``:
reason ``InCohortReclamation``, and borrowWithinCohort's priority threshold
does not apply to it. Only a candidate without that advantage, taken while the
preemptor would borrow, is ``InCohortReclaimWhileBorrowing``.
"""

from __future__ import annotations

from tests.helpers import Run, cluster_queue, flavor, run, workload

BORROW_WITHIN = """  preemption:
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority}
"""


def preempted(r: Run, name: str) -> tuple[str, str] | None:
    c = r.condition(name, "Preempted")
    return None if c is None else (c["status"], c["reason"])


def scene(a_nominal: int) -> Run:
    """``a`` owns ``a_nominal`` cpus and may borrow; ``b`` owns none and borrows all 4 of the cohort."""
    r = run(
        flavor("f")
        + cluster_queue(
            "a", f"f: [{{name: cpu, nominalQuota: {a_nominal}}}]", cohort="c", spec_extra=BORROW_WITHIN
        )
        + cluster_queue("b", "f: [{name: cpu, nominalQuota: 0}]", cohort="c")
        + cluster_queue("lender", f"f: [{{name: cpu, nominalQuota: {4 - a_nominal}}}]", cohort="c")
        + workload("borrower", "b", cpu="4", priority=0, created="2024-01-01T00:00:00Z")
    )
    assert r.admitted_in("b") == ["borrower"]
    r.load(workload("w", "a", cpu="4", priority=10, created="2024-01-01T00:01:00Z"))
    return r


def test_a_preemptor_within_its_nominal_quota_reclaims_by_hierarchy() -> None:
    """``w`` fits in ``a``'s own 4 cpus: hierarchical advantage, ``InCohortReclamation``
    (Kueue: ``HiearchicalReclaim``), though borrowWithinCohort is set and ``borrower``'s
    priority is below ``w``'s."""
    r = scene(4)
    assert r.evictions() == [("borrower", "InCohortReclamation")]
    assert preempted(r, "borrower") == ("True", "InCohortReclamation")
    assert r.admitted_in("a") == ["w"]


def test_a_preemptor_that_must_borrow_reclaims_while_borrowing() -> None:
    """``a`` owns 2 cpus only: ``w`` borrows, no advantage; ``borrower`` (priority 0, below
    ``w``'s 10) is ``ReclaimWhileBorrowing``: ``InCohortReclaimWhileBorrowing``."""
    r = scene(2)
    assert r.evictions() == [("borrower", "InCohortReclaimWhileBorrowing")]
    assert r.admitted_in("a") == ["w"]


# ------------------------------------------------------------------ hierarchical cohorts

SUB_COHORT = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: Cohort
metadata: {name: sub}
spec: {parent: top}
---"""


def test_a_cohort_within_its_quota_shields_its_borrowing_queues() -> None:
    """Kueue's ``collectCandidatesInSubtree`` and ``candidateIsValid`` skip a ClusterQueue
    whose Cohort, below the lowest common ancestor with the preemptor, is within its
    nominal quota: ``b`` borrows only what ``sub`` owns (``spare``'s 4 cpus), so ``a``,
    which needs 2 cpus of ``top`` that ``sub`` is not using beyond its own, has no
    candidate and waits."""
    r = run(
        flavor("f")
        + SUB_COHORT
        + cluster_queue("a", "f: [{name: cpu, nominalQuota: 2}]", cohort="top", spec_extra=BORROW_WITHIN)
        + cluster_queue("b", "f: [{name: cpu, nominalQuota: 0}]", cohort="sub")
        + cluster_queue("spare", "f: [{name: cpu, nominalQuota: 4}]", cohort="sub")
        + workload("borrower", "b", cpu="4", priority=0, created="2024-01-01T00:00:00Z")
    )
    assert r.admitted_in("b") == ["borrower"]
    r.load(workload("w", "a", cpu="4", priority=10, created="2024-01-01T00:01:00Z"))
    assert r.evictions() == []
    assert r.admitted_in("b") == ["borrower"]
    assert not r.is_admitted("w")
