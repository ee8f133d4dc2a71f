"""Classical preemption: which admitted workloads to evict to make room.

Candidates are workloads of the same ClusterQueue (withinClusterQueue) and
workloads of ClusterQueues in the same cohort tree that borrow
(reclaimWithinCohort). The smallest set is found Kueue's way
(``classicalPreemptions``): remove candidates in order until the preemptor
fits, then put back every one whose removal turned out to be unnecessary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kueuestream.admission.api.kueue import Preemption
from kueuestream.admission.quota import FR, QuotaNode

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"

HUMAN_REASONS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}


@dataclass(frozen=True, slots=True)
class Candidate:
    """An admitted workload as preemption sees it."""

    key: tuple[str, str]
    cluster_queue: str
    priority: int
    created_ms: int
    reserved_ms: int
    usage: Mapping[FR, int]
    evicting: bool
    # metadata.uid, Kueue's last tie-breaker ("" when the manifest has none).
    uid: str = ""


@dataclass(frozen=True, slots=True)
class Target:
    candidate: Candidate
    reason: str


@dataclass(frozen=True, slots=True)
class Preemptor:
    cluster_queue: str
    priority: int
    created_ms: int
    usage: Mapping[FR, int]
    preempt_frs: frozenset[FR]


def remove(nodes: Mapping[str, QuotaNode], cand: Candidate) -> None:
    node = nodes[cand.cluster_queue]
    # Pairs are independent of each other, so their order does not matter here.
    for fr, amount in cand.usage.items():
        node.remove_usage(fr, amount)


def restore(nodes: Mapping[str, QuotaNode], cand: Candidate) -> None:
    node = nodes[cand.cluster_queue]
    for fr, amount in cand.usage.items():
        node.add_usage(fr, amount)


def fits(node: QuotaNode, usage: Mapping[FR, int], allow_borrowing: bool) -> bool:
    for fr, amount in usage.items():
        if not allow_borrowing and node.borrowing_with(fr, amount):
            return False
        # What is available is never below zero (ClusterQueueSnapshot.Available), so a
        # request of zero fits even where usage is over the quota (a quota lowered under
        # admitted Workloads, capacity held for a head waiting for preemption).
        if amount > max(0, node.available(fr)):
            return False
    return True


def is_borrowing(node: QuotaNode, frs: Iterable[FR]) -> bool:
    usage, subtree = node.usage, node.subtree
    return any(usage.get(fr, 0) > subtree.get(fr, 0) for fr in frs)


def uses_any(cand: Candidate, frs: frozenset[FR]) -> bool:
    return any(fr in frs for fr in cand.usage)


def candidate_order(cq_name: str) -> Callable[[Candidate], tuple[object, ...]]:
    """Evicting first, then other queues' workloads, lower priority, most recently admitted,
    then by UID (Kueue's ``CandidatesOrdering``).

    The reservation times are compared to the second, as Kueue compares them:
    its cache holds each Workload as the API server returns it, whose
    ``lastTransitionTime`` has seconds, and so do the statuses the engine writes
    and reads back after a restart. The API server makes UIDs at random, so a
    tie there falls anywhere; among Workloads without one (objects from files)
    the newest creation time decides, so that the youngest work is lost first.
    """

    def key(c: Candidate) -> tuple[object, ...]:
        return (
            not c.evicting,
            c.cluster_queue == cq_name,
            c.priority,
            -(c.reserved_ms // 1000),
            c.uid,
            -c.created_ms,
            c.key,
        )

    return key


def find_candidates(
    pre: Preemptor,
    policy: Preemption,
    node: QuotaNode,
    admitted: Mapping[str, Sequence[Candidate]],
    *,
    hierarchical: bool,
) -> list[Candidate]:
    """The workloads the policies let ``pre`` evict, in Kueue's candidate order.

    Another queue's workloads are candidates while that queue borrows on a pair
    needing preemption (Kueue's ``findCandidates``, ``cqIsBorrowing``). With
    ``hierarchical`` (classical preemption), so must every Cohort between it and
    its lowest common ancestor with the preemptor's queue: Kueue's
    ``collectCandidatesInSubtree`` leaves a subtree within its quota alone, where
    fair sharing's ``findCandidates`` looks at the queue only.
    """
    out: list[Candidate] = []
    if policy.within_cluster_queue != "Never":
        newer_equal = policy.within_cluster_queue == "LowerOrNewerEqualPriority"
        for cand in admitted.get(pre.cluster_queue, ()):
            if cand.priority > pre.priority:
                continue
            if cand.priority == pre.priority and not (newer_equal and pre.created_ms < cand.created_ms):
                continue
            if uses_any(cand, pre.preempt_frs):
                out.append(cand)
    if node.parent is not None and policy.reclaim_within_cohort != "Never":
        only_lower = policy.reclaim_within_cohort == "LowerPriority"
        for other in node.root.borrowing_cluster_queues(pre.preempt_frs):
            if other is node or (hierarchical and not over_nominal_to_lca(node, other, pre.preempt_frs)):
                continue
            for cand in admitted.get(other.name, ()):
                if only_lower and cand.priority >= pre.priority:
                    continue
                if uses_any(cand, pre.preempt_frs):
                    out.append(cand)
    out.sort(key=candidate_order(pre.cluster_queue))
    return out


def _fits_in_quota(node: QuotaNode, requests: Mapping[FR, int]) -> tuple[bool, dict[FR, int]]:
    """Whether ``requests`` fit in the node's subtree quota beside its usage, and what is
    left of them once the node's own unused quota is taken (Kueue's ``QuantitiesFitInQuota``)."""
    fits = all(node.usage.get(fr, 0) + v <= node.subtree.get(fr, 0) for fr, v in requests.items())
    return fits, {fr: max(0, v - node.local_available(fr)) for fr, v in requests.items()}


def advantaged_cohorts(pre: Preemptor, node: QuotaNode) -> set[int]:
    """The Cohorts (by id) whose other workloads the preemptor has a hierarchical advantage over.

    Kueue's ``collectCandidatesForHierarchicalReclaim``: walking up from the
    preemptor's ClusterQueue, once its whole usage fits in the subtree quota of
    a node on that path (the ClusterQueue itself included), every candidate whose
    lowest common ancestor with the preemptor lies above that node is reclaimed
    by hierarchy (``HiearchicalReclaim``: ``InCohortReclamation``, whatever the
    priorities and borrowWithinCohort say).
    """
    advantage, remaining = _fits_in_quota(node, pre.usage)
    out: set[int] = set()
    cohort = node.parent
    while cohort is not None:
        if advantage:
            out.add(id(cohort))
        fits, remaining = _fits_in_quota(cohort, remaining)
        advantage = advantage or fits
        cohort = cohort.parent
    return out


def _lowest_common_ancestor(node: QuotaNode, other: QuotaNode) -> QuotaNode | None:
    path: set[int] = set()
    n: QuotaNode | None = node.parent
    while n is not None:
        path.add(id(n))
        n = n.parent
    n = other.parent
    while n is not None and id(n) not in path:
        n = n.parent
    return n


def over_nominal_to_lca(node: QuotaNode, other: QuotaNode, frs: frozenset[FR]) -> bool:
    """Whether ``other`` and every Cohort above it below its lowest common ancestor with
    ``node`` use more than their quota in one of ``frs`` (Kueue's ``candidateIsValid`` and
    ``collectCandidatesInSubtree``, which skip a subtree within its nominal quota)."""
    return _borrowing_below(other, _lowest_common_ancestor(node, other), frs)


def _borrowing_below(other: QuotaNode, lca: QuotaNode | None, frs: frozenset[FR]) -> bool:
    """:func:`over_nominal_to_lca` with the lowest common ancestor already known."""
    n: QuotaNode | None = other
    while n is not None and n is not lca:
        if not is_borrowing(n, frs):
            return False
        n = n.parent
    return True


# Kueue's preemptionVariant: how a candidate may be preempted, and the reason it is given.
_WITHIN_CQ, _HIERARCHICAL, _WITHOUT_BORROWING, _WHILE_BORROWING = range(4)
_VARIANT_REASONS = {
    _WITHIN_CQ: IN_CLUSTER_QUEUE,
    _HIERARCHICAL: IN_COHORT_RECLAMATION,
    _WITHOUT_BORROWING: IN_COHORT_RECLAMATION,
    _WHILE_BORROWING: IN_COHORT_RECLAIM_WHILE_BORROWING,
}


def _variant(
    pre: Preemptor, cand: Candidate, policy: Preemption, lca: QuotaNode | None, advantaged: set[int]
) -> int:
    """Kueue's ``classifyPreemptionVariant`` for a candidate the policies already allow."""
    if cand.cluster_queue == pre.cluster_queue:
        return _WITHIN_CQ
    if id(lca) in advantaged:
        return _HIERARCHICAL
    bwc = policy.borrow_within_cohort
    if bwc.policy == "Never":
        return _WITHOUT_BORROWING
    # isAboveBorrowingThreshold: the preemptor may stay borrowing only at the expense of
    # lower priorities, at or under maxPriorityThreshold when one is set.
    threshold = bwc.max_priority_threshold
    if cand.priority >= pre.priority or (threshold is not None and cand.priority > threshold):
        return _WITHOUT_BORROWING
    return _WHILE_BORROWING


def _under_nominal(node: QuotaNode, frs: Iterable[FR]) -> bool:
    """Kueue's ``queueUnderNominalInResourcesNeedingPreemption``: usage strictly below nominal."""
    return all(node.usage.get(fr, 0) < node.subtree.get(fr, 0) for fr in frs)


@dataclass(frozen=True, slots=True)
class _Elem:
    """A candidate as Kueue's ``candidateElem`` holds it: with its variant and lowest common ancestor."""

    candidate: Candidate
    variant: int
    lca: QuotaNode | None


def _valid(elem: _Elem, borrowing: bool, nodes: Mapping[str, QuotaNode], frs: frozenset[FR]) -> bool:
    """Kueue's ``candidateIsValid``, asked again as removals change the usage."""
    if elem.variant == _WITHIN_CQ:
        return True
    if borrowing and elem.variant == _WITHOUT_BORROWING:
        return False
    # An earlier removal may have brought that queue, or a Cohort between it and
    # the preemptor's, back within its quota.
    return _borrowing_below(nodes[elem.candidate.cluster_queue], elem.lca, frs)


def fill_back(
    targets: list[Target], pre: Preemptor, node: QuotaNode, nodes: Mapping[str, QuotaNode], borrowing: bool
) -> list[Target]:
    """Put back, newest removal first, every workload the preemptor fits without (``fillBackWorkloads``,
    of classical and fair-sharing preemption alike)."""
    i = len(targets) - 2
    while i >= 0:
        restore(nodes, targets[i].candidate)
        if fits(node, pre.usage, borrowing):
            targets[i] = targets[-1]
            targets.pop()
        else:
            remove(nodes, targets[i].candidate)
        i -= 1
    return targets


def classical_targets(
    pre: Preemptor,
    policy: Preemption,
    node: QuotaNode,
    nodes: Mapping[str, QuotaNode],
    admitted: Mapping[str, Sequence[Candidate]],
) -> list[Target]:
    """Kueue's ``classicalPreemptions``: the smallest set of candidates to evict, or none.

    Candidates come in three groups, each in Kueue's candidate order: those the
    preemptor has a hierarchical advantage over, those of other queues that
    priorities decide, and its own queue's; every group's evicting workloads
    come before the rest. Up to two attempts are made, one letting the
    preemptor borrow once the candidates are gone and one not, in the order
    Kueue makes them; an attempt that lets it borrow skips the other queues'
    candidates ``borrowWithinCohort`` does not allow.
    """
    candidates = find_candidates(pre, policy, node, admitted, hierarchical=True)
    if not candidates:
        return []
    advantaged = advantaged_cohorts(pre, node)
    groups: list[list[_Elem]] = [[], [], []]
    for cand in candidates:
        lca = _lowest_common_ancestor(node, nodes[cand.cluster_queue])
        variant = _variant(pre, cand, policy, lca, advantaged)
        group = 0 if variant == _HIERARCHICAL else 2 if variant == _WITHIN_CQ else 1
        groups[group].append(_Elem(cand, variant, lca))
    ordered = [e for g in groups for e in g if e.candidate.evicting] + [
        e for g in groups for e in g if not e.candidate.evicting
    ]
    forbidden = policy.borrow_within_cohort.policy == "Never"
    if (not groups[0] and not groups[1]) or (forbidden and not _under_nominal(node, pre.preempt_frs)):
        attempts = [True]
    elif forbidden and not groups[0]:
        attempts = [False, True]
    else:
        attempts = [True, False]
    for borrowing in attempts:
        targets: list[Target] = []
        for elem in ordered:
            if not _valid(elem, borrowing, nodes, pre.preempt_frs):
                continue
            remove(nodes, elem.candidate)
            targets.append(Target(elem.candidate, _VARIANT_REASONS[elem.variant]))
            if fits(node, pre.usage, borrowing):
                targets = fill_back(targets, pre, node, nodes, borrowing)
                for t in reversed(targets):
                    restore(nodes, t.candidate)
                return targets
        for t in reversed(targets):
            restore(nodes, t.candidate)
    return []


def cq_path(node: QuotaNode | None) -> str:
    """The ClusterQueue's place in its cohort tree, root first: ``/root/.../cq`` (``buildCQPath``)."""
    parts: list[str] = []
    while node is not None:
        parts.append(node.name)
        node = node.parent
    return "/" + "/".join(reversed(parts)) if parts else "UNKNOWN"


def preemption_message(
    reason: str, preemptor_uid: str, preemptor_job_uid: str, preemptor_path: str, preemptee_path: str
) -> str:
    """The Evicted and Preempted conditions' message (Kueue's ``preemptionMessage``)."""
    return (
        f"Preempted to accommodate a workload (UID: {preemptor_uid}, "
        f"JobUID: {preemptor_job_uid}) due to {HUMAN_REASONS[reason]}; "
        f"preemptor path: {preemptor_path}; preemptee path: {preemptee_path}"
    )
