"""The quota tree: ClusterQueues and Cohorts, their quotas and their usage.

Amounts follow Kueue's resource nodes: a node's subtree quota is its own
nominal quota plus what its children lend to it; a child keeps back
(guarantees itself) whatever exceeds its lending limit; usage climbs to the
parent only beyond that guarantee.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction

FR = tuple[str, str]  # (flavor, resource)


@dataclass(frozen=True, slots=True)
class Quota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(eq=False, slots=True)
class QuotaNode:
    name: str
    is_cluster_queue: bool
    quotas: dict[FR, Quota] = field(default_factory=dict)
    parent: QuotaNode | None = None
    children: list[QuotaNode] = field(default_factory=list)
    subtree: dict[FR, int] = field(default_factory=dict)
    usage: dict[FR, int] = field(default_factory=dict)
    fair_weight: Fraction = Fraction(1)
    # ClusterQueues of this subtree by name, filled in when the tree is built.
    subtree_cqs: list[QuotaNode] = field(default_factory=list)
    # Bumped on every usage change in the tree (kept on the root), so lookups over
    # the whole tree can be cached between changes.
    version: int = 0
    borrowers: dict[frozenset[FR], tuple[int, list[QuotaNode]]] = field(default_factory=dict)
    # What each pair keeps back from its parent (beyond the lending limit); fixed per build.
    kept: dict[FR, int] = field(default_factory=dict)
    top: QuotaNode | None = None
    # Distance to the furthest leaf below (Kueue's getNodeHeight); fixed per build.
    height: int = 0

    def __repr__(self) -> str:
        kind = "ClusterQueue" if self.is_cluster_queue else "Cohort"
        return f"<{kind} {self.name}>"

    @property
    def root(self) -> QuotaNode:
        if self.top is not None:
            return self.top
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def guaranteed(self, fr: FR) -> int:
        return self.kept.get(fr, 0)

    def available(self, fr: FR) -> int:
        """What a workload in this node could still take, borrowing where allowed."""
        if self.parent is None:
            return self.subtree.get(fr, 0) - self.usage.get(fr, 0)
        usage = self.usage.get(fr, 0)
        guaranteed = self.guaranteed(fr)
        local = max(0, guaranteed - usage)
        from_parent = self.parent.available(fr)
        quota = self.quotas.get(fr)
        if quota is not None and quota.borrowing_limit is not None:
            stored_in_parent = self.subtree.get(fr, 0) - guaranteed
            used_in_parent = max(0, usage - guaranteed)
            from_parent = min(from_parent, stored_in_parent - used_in_parent + quota.borrowing_limit)
        return local + from_parent

    def potential_available(self, fr: FR) -> int:
        """What this node could take if nothing else were running."""
        if self.parent is None:
            return self.subtree.get(fr, 0)
        total = self.guaranteed(fr) + self.parent.potential_available(fr)
        quota = self.quotas.get(fr)
        if quota is not None and quota.borrowing_limit is not None:
            total = min(total, self.subtree.get(fr, 0) + quota.borrowing_limit)
        return total

    def borrowing_with(self, fr: FR, extra: int) -> bool:
        return self.usage.get(fr, 0) + extra > self.subtree.get(fr, 0)

    def local_available(self, fr: FR) -> int:
        """What this node keeps back from its parent and does not use yet."""
        return max(0, self.kept.get(fr, 0) - self.usage.get(fr, 0))

    def borrowing_height(self, fr: FR, value: int) -> tuple[int, bool]:
        """How high in the cohort tree ``value`` more of ``fr`` must be found (Kueue's
        ``FindHeightOfLowestSubtreeThatFits``).

        Returns the height of the lowest Cohort whose subtree quota covers the
        extra usage (0 when the ClusterQueue's own quota does; the whole tree's
        height when nothing does), and whether that Cohort is below the root,
        so quota may still be reclaimed in the part of the tree above it.
        """
        if self.parent is None or not self.borrowing_with(fr, value):
            return 0, self.parent is not None
        remaining = value - self.local_available(fr)
        node: QuotaNode | None = self.parent
        while node is not None:
            if not node.borrowing_with(fr, remaining):
                return node.height, node.parent is not None
            remaining -= node.local_available(fr)
            node = node.parent
        return self.root.height, False

    def add_usage(self, fr: FR, amount: int) -> None:
        self.root.version += 1
        node: QuotaNode | None = self
        while node is not None and amount > 0:
            usage = node.usage.get(fr, 0)
            local_free = node.kept.get(fr, 0) - usage
            node.usage[fr] = usage + amount
            if local_free > 0:
                amount -= local_free
            node = node.parent

    def remove_usage(self, fr: FR, amount: int) -> None:
        self.root.version += 1
        node: QuotaNode | None = self
        while node is not None and amount > 0:
            usage = node.usage.get(fr, 0)
            stored_in_parent = usage - node.kept.get(fr, 0)
            node.usage[fr] = usage - amount
            if stored_in_parent <= 0:
                return
            if stored_in_parent < amount:
                amount = stored_in_parent
            node = node.parent

    def borrowing_cluster_queues(self, frs: frozenset[FR]) -> list[QuotaNode]:
        """ClusterQueues of this tree over their nominal quota in any of ``frs`` (root only)."""
        cached = self.borrowers.get(frs)
        if cached is not None and cached[0] == self.version:
            return cached[1]
        found = [n for n in self.subtree_cqs if any(n.usage.get(fr, 0) > n.subtree.get(fr, 0) for fr in frs)]
        self.borrowers[frs] = (self.version, found)
        return found

    def walk(self) -> Iterator[QuotaNode]:
        yield self
        for child in self.children:
            yield from child.walk()

    def cluster_queues(self) -> Iterator[QuotaNode]:
        return (n for n in self.walk() if n.is_cluster_queue)


def compute_subtree_quotas(root: QuotaNode) -> None:
    for child in root.children:
        compute_subtree_quotas(child)
    # A Cohort with children stands one above them; ClusterQueues are leaves.
    root.height = max((c.height + 1 for c in root.children), default=0)
    root.subtree_cqs = sorted(root.cluster_queues(), key=lambda n: n.name)
    top = root.root
    for node in root.walk():
        node.top = top
    subtree = {fr: q.nominal for fr, q in root.quotas.items()}
    for child in root.children:
        for fr, amount in child.subtree.items():
            subtree[fr] = subtree.get(fr, 0) + amount - child.guaranteed(fr)
    root.subtree = subtree
    root.kept = {
        fr: max(0, subtree.get(fr, 0) - q.lending_limit)
        for fr, q in sorted(root.quotas.items())
        if q.lending_limit is not None
    }
