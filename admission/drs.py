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
from math import lcm

from kueuestream.admission.api.kueue import ResourceFlavor
from kueuestream.admission.quota import FR, QuotaNode

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
    """A node's DRS, what fair sharing compares (Kueue's ``DRS``).

    The dominant resource's flavor-weighted ratio is kept as two integers,
    ``num / den``, so that comparisons are exact and cheap.
    """

    fair_weight: Fraction
    num: int = 0
    den: int = 1
    dominant_resource: str = ""
    # Usage exceeds the subtree quota on some flavor-resource.
    borrowing: bool = False
    borrowed_frs: frozenset[FR] = frozenset()

    @classmethod
    def of(cls, fair_weight: Fraction, ratio: Fraction, dominant: str = "", borrowing: bool = False) -> Share:
        return cls(fair_weight, ratio.numerator, ratio.denominator, dominant, borrowing)

    @property
    def ratio(self) -> Fraction:
        """The dominant resource's flavor-weighted ratio, before the fair-sharing weight."""
        return Fraction(self.num, self.den)

    @property
    def infinite(self) -> bool:
        """A weight of 0 while borrowing: the share is +infinity.

        (Borrowing only what nobody lends gives ratio 0; with weight 0 that is
        still "weight 0 while borrowing", so infinite, as the issue states.)
        """
        return self.borrowing and not self.fair_weight

    @property
    def weighted_share(self) -> Fraction | None:
        """ratio / fairSharing.weight; None stands for +infinity."""
        if self.infinite:
            return None
        if not self.num:
            return ZERO
        return Fraction(self.num, self.den) / self.fair_weight

    def _share_terms(self) -> tuple[int, int]:
        """The finite weighted share as (numerator, positive denominator)."""
        if not self.num:
            return 0, 1
        weight = self.fair_weight
        return self.num * weight.denominator, self.den * weight.numerator

    def borrowing_on(self, requested: Mapping[FR, int]) -> bool:
        """Borrows on a flavor-resource the request asks a positive amount of."""
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed_frs)


def compare(a: Share, b: Share) -> int:
    """-1, 0 or 1 as ``a`` is the fairer (lower), equal or less fair (higher) share.

    Infinite shares sort above every finite one and among themselves by ratio.
    """
    a_inf, b_inf = a.infinite, b.infinite
    if a_inf and b_inf:
        x, y = a.num * b.den, b.num * a.den
    elif a_inf:
        return 1
    elif b_inf:
        return -1
    else:
        an, ad = a._share_terms()
        bn, bd = b._share_terms()
        x, y = an * bd, bn * ad
    return (x > y) - (x < y)


def status_weighted_share(share: Share) -> int:
    """``status.fairSharing.weightedShare`` as Kueue writes it: ceil(per-mille share)."""
    if share.infinite:
        return MAX_INT64
    num, den = share._share_terms()
    return min(MAX_INT64, -(-num * 1000 // den))


def fair_sharing_status(node: QuotaNode, weights: Weights) -> dict[str, int]:
    """The ``status.fairSharing`` stanza of a ClusterQueue or Cohort."""
    return {"weightedShare": status_weighted_share(share(node, weights))}


class ShareCache:
    """What :func:`share` can keep between calls: integer weights and lendable amounts.

    Both depend on quotas and weights only, never on usage, so one cache may
    serve every call made while the tree's structure and the weights stay the
    same (one scheduling cycle, one preemption attempt).
    """

    __slots__ = ("_int_weights", "lendable", "scale", "weights")

    def __init__(self, weights: Weights) -> None:
        self.weights = weights
        # Per resource, the lcm of the weights' denominators: w * scale is an integer
        # and ratios are unchanged, as numerator and denominator scale alike.
        self.scale: dict[str, int] = {}
        for flavor in sorted(weights):
            for resource, weight in sorted(weights[flavor].items()):
                self.scale[resource] = lcm(self.scale.get(resource, 1), weight.denominator)
        self._int_weights: dict[FR, int] = {}
        self.lendable: dict[QuotaNode, dict[str, int]] = {}

    def weight(self, fr: FR) -> int:
        found = self._int_weights.get(fr)
        if found is None:
            scaled = weight_of(self.weights, fr) * self.scale.get(fr[1], 1)
            found = self._int_weights[fr] = scaled.numerator
        return found

    def lendable_at(self, parent: QuotaNode) -> dict[str, int]:
        """sum_f potentialAvailable(parent, (f, r)) * w(f, r), per resource r (scaled)."""
        found = self.lendable.get(parent)
        if found is None:
            found = {}
            for fr in _lendable_frs(parent):
                found[fr[1]] = found.get(fr[1], 0) + parent.potential_available(fr) * self.weight(fr)
            self.lendable[parent] = found
        return found


def _lendable_frs(node: QuotaNode) -> list[FR]:
    """Every flavor-resource of the tree; the root's subtree quota holds them all."""
    return sorted(node.root.subtree)


def share(node: QuotaNode, weights: Weights, cache: ShareCache | None = None) -> Share:
    """The node's DRS from its current usage.

    ``cache`` must have been made for the same ``weights`` (and the same tree structure).
    """
    parent = node.parent
    if parent is None:
        return Share(node.fair_weight)
    usage = node.usage
    borrowed: list[tuple[FR, int]] = []
    for fr, quota in node.subtree.items():
        amount = usage.get(fr, 0) - quota
        if amount > 0:
            borrowed.append((fr, amount))
    if not borrowed:
        return Share(node.fair_weight)
    if cache is None:
        cache = ShareCache(weights)
    weighted: dict[str, int] = {}
    for fr, amount in borrowed:
        weighted[fr[1]] = weighted.get(fr[1], 0) + amount * cache.weight(fr)
    lendable = cache.lendable_at(parent)
    num, den, dominant = 0, 1, ""
    for resource in sorted(weighted):  # alphabetical, so a tie keeps the first name
        lent = lendable.get(resource, 0)
        if lent > 0 and weighted[resource] * den > num * lent:
            num, den, dominant = weighted[resource], lent, resource
    return Share(node.fair_weight, num, den, dominant, True, frozenset(fr for fr, _ in borrowed))


def _ratio(borrowed: Fraction | int, lendable: Fraction | int) -> Fraction:
    if lendable <= 0:
        return ZERO
    return Fraction(borrowed) / lendable


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
