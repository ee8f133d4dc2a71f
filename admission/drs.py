"""Dominant Resource Share (DRS), flavor-aware (KEP-8902, seed 002).

For a node (ClusterQueue or Cohort) that has a parent, per resource name r::

    borrowed(f, r)  = max(0, usage(f, r) - subtreeQuota(f, r))        over the node's own flavors
    lendable(f, r)  = potentialAvailable(parent, (f, r))               over every flavor of the tree
    ratio(r)        = sum_f borrowed(f, r) * w(f, r) / sum_f lendable(f, r) * w(f, r)
    unweighted(r)   = sum_f borrowed(f, r)           / sum_f lendable(f, r)

where ``w(f, r)`` is ``ResourceFlavor.spec.resourceWeights[r]`` of flavor ``f``
(1 when the map or the entry is missing). Resources nothing is lent of have
ratio 0. The dominant resource is the one with the largest ratio, the
alphabetically first on a tie, and only a ratio above 0 can be dominant. The
node's share is that ratio divided by its ``fairSharing.weight``; a weight of 0
while borrowing is an infinite share. A node without a parent (a root Cohort,
a ClusterQueue without a cohort) has share 0: it has nothing to borrow from.

With no weights anywhere every ``w`` is 1 and this is Kueue's unweighted DRS.
Kueue reports the share per mille, rounded up, in
``status.fairSharing.weightedShare``; see :func:`status_weighted_share`.

Everything is exact (``Fraction``) and pure: the functions only read the quota
tree they are given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from math import ceil

from admission.api.kueue import ResourceFlavor
from admission.quota import FR, QuotaNode

# Kueue writes MaxInt64 into status.fairSharing.weightedShare for an infinite share.
MAX_INT64 = 2**63 - 1
ONE = Fraction(1)
ZERO = Fraction(0)

# flavor name -> resource name -> multiplier
Weights = Mapping[str, Mapping[str, Fraction]]


def flavor_weights(flavors: Mapping[str, ResourceFlavor]) -> dict[str, dict[str, Fraction]]:
    """The configured multipliers of every flavor; absent ones mean 1."""
    out: dict[str, dict[str, Fraction]] = {}
    for name in sorted(flavors):
        weights = flavors[name].spec.resource_weights
        if weights:
            out[name] = {resource: weights[resource].value for resource in sorted(weights)}
    return out


def weight_of(weights: Weights, fr: FR) -> Fraction:
    flavor, resource = fr
    return weights.get(flavor, {}).get(resource, ONE)


@dataclass(frozen=True, slots=True)
class Share:
    """A node's DRS, what fair sharing compares (Kueue's ``DRS``)."""

    fair_weight: Fraction
    # The dominant resource's flavor-weighted ratio, before the fair-sharing weight.
    ratio: Fraction = ZERO
    dominant_resource: str = ""
    # Usage exceeds the subtree quota on some flavor-resource.
    borrowing: bool = False
    borrowed_frs: frozenset[FR] = frozenset()

    @property
    def infinite(self) -> bool:
        """A weight of 0 while borrowing: the share is +infinity."""
        return self.fair_weight == 0 and self.borrowing

    @property
    def weighted_share(self) -> Fraction | None:
        """ratio / fairSharing.weight; None stands for +infinity."""
        if self.infinite:
            return None
        if self.ratio == 0:
            return ZERO
        return self.ratio / self.fair_weight

    def borrowing_on(self, requested: Mapping[FR, int]) -> bool:
        """Borrows on a flavor-resource the request asks a positive amount of."""
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed_frs)


def compare(a: Share, b: Share) -> int:
    """-1, 0 or 1 as ``a`` is the fairer (lower), equal or less fair (higher) share.

    Infinite shares sort above every finite one and among themselves by ratio.
    """
    if a.infinite and b.infinite:
        x, y = a.ratio, b.ratio
    elif a.infinite:
        return 1
    elif b.infinite:
        return -1
    else:
        x, y = a.weighted_share or ZERO, b.weighted_share or ZERO
    return (x > y) - (x < y)


def status_weighted_share(share: Share) -> int:
    """``status.fairSharing.weightedShare`` as Kueue writes it: ceil(per-mille share)."""
    value = share.weighted_share
    if value is None:
        return MAX_INT64
    return min(MAX_INT64, ceil(value * 1000))


def fair_sharing_status(node: QuotaNode, weights: Weights) -> dict[str, int]:
    """The ``status.fairSharing`` stanza of a ClusterQueue or Cohort."""
    return {"weightedShare": status_weighted_share(share(node, weights))}


def _borrowed(node: QuotaNode) -> dict[FR, int]:
    out: dict[FR, int] = {}
    for fr in sorted(node.subtree):
        amount = node.usage.get(fr, 0) - node.subtree[fr]
        if amount > 0:
            out[fr] = amount
    return out


def _lendable_frs(node: QuotaNode) -> list[FR]:
    """Every flavor-resource of the tree; the root's subtree quota holds them all."""
    return sorted(node.root.subtree)


def share(node: QuotaNode, weights: Weights) -> Share:
    """The node's DRS from its current usage."""
    parent = node.parent
    if parent is None:
        return Share(node.fair_weight)
    borrowed = _borrowed(node)
    if not borrowed:
        return Share(node.fair_weight)
    weighted_borrowed: dict[str, Fraction] = {}
    for fr, amount in borrowed.items():
        weighted_borrowed[fr[1]] = weighted_borrowed.get(fr[1], ZERO) + amount * weight_of(weights, fr)
    weighted_lendable: dict[str, Fraction] = {}
    for fr in _lendable_frs(node):
        if fr[1] in weighted_borrowed:
            lent = parent.potential_available(fr)
            weighted_lendable[fr[1]] = weighted_lendable.get(fr[1], ZERO) + lent * weight_of(weights, fr)
    ratio, dominant = _dominant(
        {r: _ratio(weighted_borrowed[r], weighted_lendable.get(r, ZERO)) for r in weighted_borrowed}
    )
    return Share(node.fair_weight, ratio, dominant, True, frozenset(borrowed))


def _ratio(borrowed: Fraction, lendable: Fraction) -> Fraction:
    return borrowed / lendable if lendable > 0 else ZERO


def _dominant(ratios: Mapping[str, Fraction]) -> tuple[Fraction, str]:
    best, dominant = ZERO, ""
    for resource in sorted(ratios):  # alphabetical, so a tie keeps the first name
        if ratios[resource] > best:
            best, dominant = ratios[resource], resource
    return best, dominant


# ---------------------------------------------------------------- the report


@dataclass(frozen=True, slots=True)
class FlavorShare:
    flavor: str
    borrowed: int  # Kueue's internal units: millicores for cpu
    lendable: int
    weight: Fraction


@dataclass(frozen=True, slots=True)
class ResourceShare:
    resource: str
    flavors: tuple[FlavorShare, ...]

    @property
    def weighted_borrowed(self) -> Fraction:
        return sum((f.borrowed * f.weight for f in self.flavors), ZERO)

    @property
    def weighted_lendable(self) -> Fraction:
        return sum((f.lendable * f.weight for f in self.flavors), ZERO)

    @property
    def borrowed(self) -> int:
        return sum(f.borrowed for f in self.flavors)

    @property
    def lendable(self) -> int:
        return sum(f.lendable for f in self.flavors)

    @property
    def ratio(self) -> Fraction:
        """weightedBorrowed / weightedLendable."""
        return _ratio(self.weighted_borrowed, self.weighted_lendable)

    @property
    def unweighted_ratio(self) -> Fraction:
        """borrowed / lendable, every flavor counted alike (Kueue without weights)."""
        return _ratio(Fraction(self.borrowed), Fraction(self.lendable))


@dataclass(frozen=True, slots=True)
class NodeReport:
    """Everything the DRS of one node is made of, for people and scripts."""

    name: str
    is_cluster_queue: bool
    parent: str  # "" for a root
    share: Share
    resources: tuple[ResourceShare, ...]

    @property
    def dominant_resource(self) -> str:
        return self.share.dominant_resource

    @property
    def unweighted_dominant_resource(self) -> str:
        """The dominant resource had every flavor weight been 1."""
        return _dominant({r.resource: r.unweighted_ratio for r in self.resources})[1]

    @property
    def status(self) -> int:
        return status_weighted_share(self.share)


def _row_order(node: QuotaNode) -> list[FR]:
    """The node's own flavors in spec order first, then the rest of the tree's."""
    seen: dict[FR, None] = {}
    for fr in [*node.quotas, *node.subtree, *node.root.subtree]:
        seen.setdefault(fr, None)
    return list(seen)


def explain(node: QuotaNode, weights: Weights) -> NodeReport:
    """The per-(resource, flavor) breakdown behind :func:`share`."""
    parent = node.parent
    rows: dict[str, list[FlavorShare]] = {}
    if parent is not None:
        for fr in _row_order(node):
            borrowed = max(0, node.usage.get(fr, 0) - node.subtree[fr]) if fr in node.subtree else 0
            rows.setdefault(fr[1], []).append(
                FlavorShare(fr[0], borrowed, parent.potential_available(fr), weight_of(weights, fr))
            )
    resources = tuple(ResourceShare(r, tuple(rows[r])) for r in sorted(rows))
    return NodeReport(
        name=node.name,
        is_cluster_queue=node.is_cluster_queue,
        parent=parent.name if parent is not None else "",
        share=share(node, weights),
        resources=resources,
    )


def explain_all(nodes: Iterable[QuotaNode], weights: Weights) -> list[NodeReport]:
    return [explain(node, weights) for node in sorted(nodes, key=lambda n: (n.is_cluster_queue, n.name))]
