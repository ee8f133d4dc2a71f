"""Fair sharing: admission order and preemption by (flavor-weighted) DRS.

Both follow Kueue's scheduler with fair sharing enabled, on the share
:mod:`kueuestream.admission.drs` computes (ResourceFlavor ``resourceWeights`` included):

* **Order** (Kueue's ``fairSharingIterator``). Each pop runs a tournament in a
  cohort tree: every ClusterQueue head's usage is added to its queue in turn,
  and the share of the queue and of each Cohort on its way to the root is
  noted. At every Cohort, bottom-up, the child whose nominee leaves it the
  fairest share wins: first a child that does not borrow on the flavor-resources
  its workload asks for (FairSharingPrioritizeNonBorrowing), then the lower
  share, the higher priority, the earlier queue time. The tournament is run
  again for every pop, so it sees what the entries processed before took.
* **Preemption** (Kueue's ``fairPreemptions``). Candidates are the preemptor
  queue's own workloads (withinClusterQueue) and those of queues of the tree
  that borrow on a flavor-resource needing preemption (reclaimWithinCohort).
  With the preemptor's usage added, target queues are picked from the root by
  highest share, and a candidate goes when the configured strategy holds
  between the two queues' almost-least-common-ancestors:
  ``LessThanOrEqualToFinalShare`` (preemptor's share with the workload <= the
  target's share without the candidate) and/or ``LessThanInitialShare``
  (preemptor's share < the target's share before). A preemptor queue within
  its nominal quota on the contested flavor-resources reclaims regardless of
  shares (FairSharingPreemptWithinNominal). Unneeded victims are then put back.

Everything is deterministic: children, candidates and queues are visited in
sorted order, ties fall back to names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from kueuestream.admission import drs
from kueuestream.admission.api.config import Configuration
from kueuestream.admission.api.kueue import ResourceFlavor
from kueuestream.admission.drs import Share, Weights
from kueuestream.admission.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAMATION,
    Candidate,
    Preemptor,
    Target,
    candidate_order,
    fill_back,
    find_candidates,
    fits,
    remove,
    restore,
)
from kueuestream.admission.quota import FR, QuotaNode

if TYPE_CHECKING:
    from kueuestream.admission.scheduler import Entry
    from kueuestream.admission.state import ClusterQueueRecord

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"

# Fair-sharing feature gates and their defaults in Kueue main (both Beta, on).
FAIR_SHARING_GATES = {
    "FairSharingPrioritizeNonBorrowing": True,
    "FairSharingPreemptWithinNominal": True,
}

# (preemptor's new share, target's old share, target's new share) -> may preempt
Strategy = Callable[[Share, Share, Share], bool]


def less_than_or_equal_to_final_share(preemptor_new: Share, _old: Share, target_new: Share) -> bool:
    """Rule S2-a."""
    return drs.compare(preemptor_new, target_new) <= 0


def less_than_initial_share(preemptor_new: Share, target_old: Share, _new: Share) -> bool:
    """Rule S2-b."""
    return drs.compare(preemptor_new, target_old) < 0


STRATEGIES: dict[str, Strategy] = {
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE: less_than_or_equal_to_final_share,
    LESS_THAN_INITIAL_SHARE: less_than_initial_share,
}


def _add(node: QuotaNode, usage: Mapping[FR, int]) -> None:
    for fr, amount in sorted(usage.items()):
        node.add_usage(fr, amount)


def _sub(node: QuotaNode, usage: Mapping[FR, int]) -> None:
    for fr, amount in sorted(usage.items()):
        node.remove_usage(fr, amount)


def _path_to_root(node: QuotaNode) -> Iterator[QuotaNode]:
    ancestor = node.parent
    while ancestor is not None:
        yield ancestor
        ancestor = ancestor.parent


class QuotaTree(Protocol):
    """What fair sharing reads: the configuration, the flavors (for their weights) and the quota tree."""

    @property
    def config(self) -> Configuration: ...

    @property
    def flavors(self) -> Mapping[str, ResourceFlavor]: ...

    @property
    def cohorts(self) -> Mapping[str, QuotaNode]: ...

    @property
    def cq_nodes(self) -> Mapping[str, QuotaNode]: ...


class FairSharing:
    """The scheduler's fair-sharing half: ``order`` and ``targets``, and the nodes' shares."""

    def __init__(self, tree: QuotaTree) -> None:
        self.tree = tree

    # ---------------------------------------------------------------- helpers

    @property
    def weights(self) -> Weights:
        return drs.flavor_weights(self.tree.flavors)

    def gate(self, name: str) -> bool:
        config = self.tree.config
        gates: dict[str, bool] = config.feature_gates
        if name in gates:
            return gates[name]
        if name in FAIR_SHARING_GATES:
            return FAIR_SHARING_GATES[name]
        return bool(config.gate(name))

    def strategies(self) -> list[Strategy]:
        config = self.tree.config.fair_sharing
        names: list[str] = list(config.preemption_strategies) if config is not None else []
        if not names:
            names = [LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE]
        return [STRATEGIES[name] for name in names]

    def statuses(self) -> dict[tuple[str, str], dict[str, Any]]:
        """``status.fairSharing`` of every ClusterQueue and Cohort, keyed by (kind, name)."""
        weights = self.weights
        cohorts, cq_nodes = self.tree.cohorts, self.tree.cq_nodes
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for name in sorted(cohorts):
            out[("Cohort", name)] = drs.fair_sharing_status(cohorts[name], weights)
        for name in sorted(cq_nodes):
            out[("ClusterQueue", name)] = drs.fair_sharing_status(cq_nodes[name], weights)
        return out

    # ------------------------------------------------------------------ order

    def order(self, entries: list[Entry]) -> Iterator[Entry]:
        """The entries in fair-sharing order, decided one pop at a time.

        This is a generator on purpose: each next entry is chosen only after the
        caller has processed the previous one, so the shares include what it took.
        """
        weights = self.weights
        cache = drs.ShareCache(weights)  # the tree's structure is fixed for the cycle
        remaining: dict[str, Entry] = {}
        unassigned: list[Entry] = []
        for entry in entries:
            if entry.assignment is None:
                unassigned.append(entry)
            else:
                remaining[entry.cq.name] = entry
        while remaining:
            first = remaining[min(remaining)]
            root = first.cq.node.root
            if first.cq.node.parent is None:
                winner = first
            else:
                winner = self._tournament_winner(root, remaining, weights, cache)
            del remaining[winner.cq.name]
            yield winner
        yield from unassigned

    def _tournament_winner(
        self, root: QuotaNode, remaining: dict[str, Entry], weights: Weights, cache: drs.ShareCache
    ) -> Entry:
        # shares[(cohort, cq)]: the share of the cohort's child on the way to the cq,
        # with the cq's nominee admitted.
        shares: dict[tuple[str, str], Share] = {}
        for cq_node in root.cluster_queues():
            entry = remaining.get(cq_node.name)
            if entry is None or entry.assignment is None:
                continue
            usage = entry.assignment.usage
            _add(cq_node, usage)
            try:
                child_share = drs.share(cq_node, weights, cache)
                for ancestor in _path_to_root(cq_node):
                    shares[(ancestor.name, cq_node.name)] = child_share
                    if ancestor.parent is not None:
                        child_share = drs.share(ancestor, weights, cache)
            finally:
                _sub(cq_node, usage)
        winner = self._tournament(root, remaining, shares)
        assert winner is not None
        return winner

    def _tournament(
        self, cohort: QuotaNode, remaining: dict[str, Entry], shares: dict[tuple[str, str], Share]
    ) -> Entry | None:
        candidates: list[Entry] = []
        for child in cohort.children:
            if not child.is_cluster_queue:
                found = self._tournament(child, remaining, shares)
                if found is not None:
                    candidates.append(found)
        for child in cohort.children:
            if child.is_cluster_queue and child.name in remaining:
                candidates.append(remaining[child.name])
        if not candidates:
            return None
        best = candidates[0]
        for current in candidates[1:]:
            if self._less(current, best, cohort.name, shares):
                best = current
        return best

    def _less(self, a: Entry, b: Entry, cohort: str, shares: dict[tuple[str, str], Share]) -> bool:
        a_share, b_share = shares[(cohort, a.cq.name)], shares[(cohort, b.cq.name)]
        if self.gate("FairSharingPrioritizeNonBorrowing"):
            a_usage = a.assignment.usage if a.assignment else {}
            b_usage = b.assignment.usage if b.assignment else {}
            a_borrows, b_borrows = a_share.borrowing_on(a_usage), b_share.borrowing_on(b_usage)
            if a_borrows != b_borrows:
                return not a_borrows
        order = drs.compare(a_share, b_share)
        if order != 0:
            return order < 0
        if self.gate("PrioritySortingWithinCohort") and a.rec.priority != b.rec.priority:
            return a.rec.priority > b.rec.priority
        return a.rec.queued_ms < b.rec.queued_ms

    # ------------------------------------------------------------- preemption

    def targets(
        self,
        pre: Preemptor,
        cq: ClusterQueueRecord,
        nodes: Mapping[str, QuotaNode],
        admitted: Mapping[str, Sequence[Candidate]],
    ) -> list[Target]:
        """Fair-sharing preemption targets; the quota tree is left as it was found."""
        candidates = find_candidates(pre, cq.obj.spec.preemption, cq.node, admitted, hierarchical=False)
        if not candidates:
            return []
        run = _PreemptionRun(self, pre, cq.node, nodes, self.weights)
        return run.targets(candidates)


class _Ordering:
    """Which ClusterQueue to take the next victim from (Kueue's TargetClusterQueueOrdering)."""

    def __init__(
        self,
        preemptor: QuotaNode,
        candidates: Sequence[Candidate],
        weights: Weights,
        key: Callable[[Candidate], tuple[object, ...]],
        cache: drs.ShareCache,
    ) -> None:
        self.preemptor = preemptor
        self.ancestors = set(map(id, _path_to_root(preemptor)))
        self.weights = weights
        self.cache = cache
        self.key = key
        self.queued: dict[str, list[Candidate]] = {}
        for cand in candidates:
            self.queued.setdefault(cand.cluster_queue, []).append(cand)
        self.pruned: set[int] = set()

    def has_workload(self, cq: QuotaNode) -> bool:
        return bool(self.queued.get(cq.name))

    def pop(self, cq: QuotaNode) -> Candidate:
        return self.queued[cq.name].pop(0)

    def drop(self, cq: QuotaNode) -> None:
        self.pruned.add(id(cq))

    def __iter__(self) -> Iterator[QuotaNode]:
        if self.preemptor.parent is None:
            while id(self.preemptor) not in self.pruned and self.has_workload(self.preemptor):
                yield self.preemptor
            return
        root = self.preemptor.root
        while id(root) not in self.pruned:
            target = self._next(root)
            if target is not None:
                yield target

    def _next(self, cohort: QuotaNode) -> QuotaNode | None:
        best_cq: QuotaNode | None = None
        best_cq_share: Share | None = None
        for child in cohort.children:
            if not child.is_cluster_queue or id(child) in self.pruned:
                continue
            share = drs.share(child, self.weights, self.cache)
            if (not share.borrowing and child is not self.preemptor) or not self.has_workload(child):
                self.pruned.add(id(child))
                continue
            if best_cq is None or best_cq_share is None:
                best_cq, best_cq_share = child, share
                continue
            order = drs.compare(share, best_cq_share)
            if order > 0 or (
                order == 0 and self.key(self.queued[child.name][0]) < self.key(self.queued[best_cq.name][0])
            ):
                best_cq, best_cq_share = child, share

        best_cohort: QuotaNode | None = None
        best_cohort_share: Share | None = None
        for child in cohort.children:
            if child.is_cluster_queue or id(child) in self.pruned:
                continue
            share = drs.share(child, self.weights, self.cache)
            if not share.borrowing and id(child) not in self.ancestors:
                self.pruned.add(id(child))
            elif best_cohort_share is None or drs.compare(share, best_cohort_share) >= 0:
                best_cohort, best_cohort_share = child, share

        if (
            best_cohort is not None
            and best_cohort_share is not None
            and (best_cq_share is None or drs.compare(best_cohort_share, best_cq_share) >= 0)
        ):
            return self._next(best_cohort)
        if best_cq is None:
            self.pruned.add(id(cohort))
            return None
        return best_cq


class _PreemptionRun:
    """One fair-sharing preemption attempt; undoes every change to the quota tree."""

    def __init__(
        self,
        fs: FairSharing,
        pre: Preemptor,
        node: QuotaNode,
        nodes: Mapping[str, QuotaNode],
        weights: Weights,
    ) -> None:
        self.fs = fs
        self.pre = pre
        self.node = node
        self.nodes = nodes
        self.weights = weights
        self.key = candidate_order(pre.cluster_queue)
        self.cache = drs.ShareCache(weights)

    def targets(self, candidates: list[Candidate]) -> list[Target]:
        strategies = self.fs.strategies()
        targets: list[Target] = []
        # Shares are compared with the preemptor's workload admitted.
        _add(self.node, self.pre.usage)
        try:
            ok, retry = self._first_strategy(candidates, strategies[0], targets)
            if not ok and len(strategies) > 1:
                ok = self._second_strategy(retry, targets)
        finally:
            _sub(self.node, self.pre.usage)
        if ok:
            targets = fill_back(targets, self.pre, self.node, self.nodes, borrowing=True)
        for target in reversed(targets):
            restore(self.nodes, target.candidate)
        return targets if ok else []

    def _fits(self) -> bool:
        """Whether the workload fits now; its simulated usage is taken out to check."""
        _sub(self.node, self.pre.usage)
        try:
            return fits(self.node, self.pre.usage, allow_borrowing=True)
        finally:
            _add(self.node, self.pre.usage)

    def _take(self, targets: list[Target], cand: Candidate, reason: str) -> bool:
        remove(self.nodes, cand)
        targets.append(Target(cand, reason))
        return self._fits()

    def _almost_lcas(self, target: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
        """The preemptor's and the target's nodes just below their least common ancestor."""
        preemptor_path = [self.node, *_path_to_root(self.node)]
        on_path = {id(n) for n in preemptor_path}
        lca = next(a for a in _path_to_root(target) if id(a) in on_path)

        def below(node: QuotaNode) -> QuotaNode:
            while node.parent is not lca:
                assert node.parent is not None
                node = node.parent
            return node

        return below(self.node), below(target)

    def _shares(self, target: QuotaNode) -> tuple[Share, Share]:
        mine, theirs = self._almost_lcas(target)
        return drs.share(mine, self.weights, self.cache), drs.share(theirs, self.weights, self.cache)

    def _share_without(self, target: QuotaNode, cand: Candidate) -> Share:
        remove(self.nodes, cand)
        try:
            return drs.share(self._almost_lcas(target)[1], self.weights, self.cache)
        finally:
            restore(self.nodes, cand)

    def _within_nominal(self) -> bool:
        return not any(self.node.borrowing_with(fr, 0) for fr in sorted(self.pre.preempt_frs))

    def _first_strategy(
        self, candidates: list[Candidate], strategy: Strategy, targets: list[Target]
    ) -> tuple[bool, list[Candidate]]:
        ordering = _Ordering(self.node, candidates, self.weights, self.key, self.cache)
        retry: list[Candidate] = []
        within_nominal = self.fs.gate("FairSharingPreemptWithinNominal") and self._within_nominal()
        for target in ordering:
            if target is self.node:
                if self._take(targets, ordering.pop(target), IN_CLUSTER_QUEUE):
                    return True, []
                continue
            if within_nominal:
                if self._take(targets, ordering.pop(target), IN_COHORT_RECLAMATION):
                    return True, []
                continue
            preemptor_new, target_old = self._shares(target)
            if preemptor_new.infinite and not target_old.infinite:
                # Nothing in this queue can pass either rule; keep them for S2-b.
                while ordering.has_workload(target):
                    retry.append(ordering.pop(target))
                continue
            while ordering.has_workload(target):
                cand = ordering.pop(target)
                target_new = self._share_without(target, cand)
                if strategy(preemptor_new, target_old, target_new):
                    if self._take(targets, cand, IN_COHORT_FAIR_SHARING):
                        return True, []
                    break  # the shares changed: pick the target queue again
                retry.append(cand)
        return False, retry

    def _second_strategy(self, retry: list[Candidate], targets: list[Target]) -> bool:
        ordering = _Ordering(self.node, retry, self.weights, self.key, self.cache)
        for target in ordering:
            preemptor_new, target_old = self._shares(target)
            cand = ordering.pop(target)
            if less_than_initial_share(preemptor_new, target_old, target_old) and self._take(
                targets, cand, IN_COHORT_FAIR_SHARING
            ):
                return True
            # S2-b does not depend on the candidate: one try per queue is enough.
            ordering.drop(target)
        return False
