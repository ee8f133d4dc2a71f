"""The pure DRS computation (admission/drs.py) on hand-built quota trees."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from kueuestream.admission import drs
from kueuestream.admission.decode import decode
from kueuestream.admission.quota import FR, Quota, QuotaNode, compute_subtree_quotas

GPU = "nvidia.com/gpu"


def node(name: str, parent: QuotaNode | None = None, cq: bool = True, **quotas: Quota) -> QuotaNode:
    n = QuotaNode(name, is_cluster_queue=cq)
    n.quotas = {tuple(k.split("__")): q for k, q in quotas.items()}  # type: ignore[misc]
    if parent is not None:
        n.parent = parent
        parent.children.append(n)
    return n


def tree(lendable: dict[FR, int], borrowed: dict[FR, int]) -> QuotaNode:
    """A cohort whose lender holds ``lendable``; returns the borrower (no quota) after it borrows."""
    root = QuotaNode("cohort", is_cluster_queue=False)
    lender = QuotaNode("lender", True, {fr: Quota(q) for fr, q in lendable.items()}, parent=root)
    team = QuotaNode("team", True, {fr: Quota(0) for fr in lendable}, parent=root)
    root.children = [lender, team]
    compute_subtree_quotas(root)
    for fr, amount in sorted(borrowed.items()):
        team.add_usage(fr, amount)
    return team


SEED_WEIGHTS = {"h100-reserved": {GPU: Fraction(8)}, "cpu-premium": {"cpu": Fraction(3)}}


def test_example_a_exactly() -> None:
    team = tree(
        {("standard-cpu", "cpu"): 1000, ("h100-reserved", GPU): 100, ("a10-spot", GPU): 1000},
        {("standard-cpu", "cpu"): 300, ("h100-reserved", GPU): 100},
    )
    share = drs.share(team, SEED_WEIGHTS)
    assert (share.dominant_resource, share.ratio) == (GPU, Fraction(4, 9))
    assert drs.share(team, {}).dominant_resource == "cpu"
    assert drs.share(team, {}).ratio == Fraction(3, 10)
    report = drs.explain(team, SEED_WEIGHTS)
    assert report.unweighted_dominant_resource == "cpu"
    assert [(r.resource, r.ratio, r.unweighted_ratio) for r in report.resources] == [
        ("cpu", Fraction(3, 10), Fraction(3, 10)),
        (GPU, Fraction(4, 9), Fraction(1, 11)),
    ]
    assert drs.status_weighted_share(share) == 445  # ceil(444.4)


def test_example_b_exactly() -> None:
    team = tree(
        {
            ("cpu-premium", "cpu"): 300,
            ("cpu-standard", "cpu"): 700,
            ("h100-reserved", GPU): 100,
            ("a10-spot", GPU): 1000,
        },
        {("cpu-premium", "cpu"): 250, ("cpu-standard", "cpu"): 50, ("h100-reserved", GPU): 100},
    )
    share = drs.share(team, SEED_WEIGHTS)
    assert (share.dominant_resource, share.ratio) == ("cpu", Fraction(1, 2))


def test_ties_go_to_the_alphabetically_first_resource() -> None:
    team = tree({("f", "b-res"): 10, ("f", "a-res"): 20}, {("f", "b-res"): 5, ("f", "a-res"): 10})
    assert drs.share(team, {}).dominant_resource == "a-res"
    # Weighting one flavor of b-res up makes it dominant.
    assert drs.share(team, {"f": {"b-res": Fraction(2)}}).dominant_resource == "a-res"  # one flavor: cancels
    team2 = tree(
        {("f", "b-res"): 10, ("g", "b-res"): 10, ("f", "a-res"): 20},
        {("f", "b-res"): 10, ("f", "a-res"): 10},
    )
    assert drs.share(team2, {}).dominant_resource == "a-res"  # 10/20 each
    weighted = drs.share(team2, {"f": {"b-res": Fraction(3)}})
    assert (weighted.dominant_resource, weighted.ratio) == ("b-res", Fraction(30, 40))


def test_a_node_without_parent_has_share_zero() -> None:
    root = QuotaNode("alone", True, {("f", "cpu"): Quota(1)})
    compute_subtree_quotas(root)
    root.add_usage(("f", "cpu"), 5)
    share = drs.share(root, {})
    assert (share.ratio, share.borrowing, drs.status_weighted_share(share)) == (Fraction(0), False, 0)
    assert drs.explain(root, {}).resources == ()


def test_fair_weight_divides_and_zero_weight_is_infinite() -> None:
    team = tree({("f", GPU): 10}, {("f", GPU): 3})
    team.fair_weight = Fraction(1, 2)
    assert drs.share(team, {}).weighted_share == Fraction(6, 10)
    assert drs.status_weighted_share(drs.share(team, {})) == 600
    team.fair_weight = Fraction(0)
    share = drs.share(team, {})
    assert share.infinite and share.weighted_share is None
    assert drs.status_weighted_share(share) == 2**63 - 1
    team.remove_usage(("f", GPU), 3)
    idle = drs.share(team, {})
    assert not idle.infinite and idle.weighted_share == 0


def test_compare() -> None:
    def s(ratio: Fraction, weight: int = 1, borrowing: bool = True) -> drs.Share:
        return drs.Share.of(Fraction(weight), ratio, "cpu" if ratio else "", borrowing)

    assert drs.compare(s(Fraction(1, 2)), s(Fraction(1, 3))) == 1
    assert drs.compare(s(Fraction(1, 2), weight=2), s(Fraction(1, 3))) == -1
    assert drs.compare(s(Fraction(1, 4)), s(Fraction(1, 2), weight=2)) == 0
    inf_small, inf_big = s(Fraction(1, 10), weight=0), s(Fraction(1, 2), weight=0)
    assert drs.compare(inf_small, s(Fraction(99))) == 1
    assert drs.compare(s(Fraction(99)), inf_small) == -1
    assert drs.compare(inf_small, inf_big) == -1
    assert drs.compare(s(Fraction(0), weight=0, borrowing=False), s(Fraction(0))) == 0


def test_borrowing_what_nobody_lends_is_borrowing_with_ratio_zero() -> None:
    root = QuotaNode("cohort", is_cluster_queue=False)
    team = QuotaNode("team", True, {("f", GPU): Quota(0)}, parent=root)
    root.children = [team]
    compute_subtree_quotas(root)
    team.usage[("f", GPU)] = 2  # over-admitted: nothing is lent
    share = drs.share(team, {})
    assert share.borrowing and share.ratio == 0 and share.dominant_resource == ""
    assert share.borrowing_on({("f", GPU): 1}) and not share.borrowing_on({("g", GPU): 1})


def test_cohort_levels_and_lending_limits() -> None:
    """root: pool 40; child cohort mid: a (10, lends at most 4), b (0).

    a keeps 6 for itself, so mid's subtree quota is 4 and the root's 44.
    b runs 12: 6 fit in a's guarantee? No: a's guarantee is a's alone. b borrows
    12 at mid; mid holds 4, so mid borrows 8 from the root.
    Lendable to b at mid = potentialAvailable(mid) = 0 + 44 = 44 -> 12/44.
    Lendable to mid at the root = 44 -> 8/44. a lends to nobody else what it keeps:
    potentialAvailable(a) = 6 + 44 = 50.
    """
    fr = ("f", GPU)
    root = QuotaNode("root", False)
    pool = QuotaNode("pool", True, {fr: Quota(40)}, parent=root)
    mid = QuotaNode("mid", False, parent=root)
    a = QuotaNode("a", True, {fr: Quota(10, lending_limit=4)}, parent=mid)
    b = QuotaNode("b", True, {fr: Quota(0)}, parent=mid)
    root.children = [mid, pool]
    mid.children = [a, b]
    compute_subtree_quotas(root)
    assert (root.subtree[fr], mid.subtree[fr], a.potential_available(fr)) == (44, 4, 50)
    b.add_usage(fr, 12)
    assert drs.share(b, {}).ratio == Fraction(12, 44)
    assert drs.share(mid, {}).ratio == Fraction(8, 44)
    assert drs.share(root, {}).ratio == 0
    weights = {"f": {GPU: Fraction(5)}}
    assert drs.share(b, weights).ratio == Fraction(12, 44)  # one flavor: the weight cancels
    report = drs.explain(mid, {})
    assert [(f.flavor, f.borrowed, f.lendable) for r in report.resources for f in r.flavors] == [("f", 8, 44)]


# ------------------------------------------------------- backward compatibility


def kueue_unweighted(n: QuotaNode) -> tuple[Fraction, str]:
    """Kueue's DRS (pkg/cache/scheduler/fair_sharing.go), written out independently."""
    if n.parent is None:
        return Fraction(0), ""
    borrowing: dict[str, int] = {}
    for fr, quota in n.subtree.items():
        amount = n.usage.get(fr, 0) - quota
        if amount > 0:
            borrowing[fr[1]] = borrowing.get(fr[1], 0) + amount
    root = n
    while root.parent is not None:
        root = root.parent
    lendable: dict[str, int] = {}
    for fr in root.subtree:
        lendable[fr[1]] = lendable.get(fr[1], 0) + n.parent.potential_available(fr)
    best, name = Fraction(0), ""
    for r, b in borrowing.items():
        if lendable.get(r, 0) > 0:
            ratio = Fraction(b * 1000, lendable[r])
            if ratio > best or (ratio == best and r < name):
                best, name = ratio, r
    return best / 1000, name


def random_tree(rng: random.Random) -> list[QuotaNode]:
    frs = [(f, r) for f in ("x", "y", "z") for r in ("cpu", "memory", GPU)]
    root = QuotaNode("root", False)
    cohorts = [root]
    nodes = [root]
    for i in range(rng.randint(0, 3)):
        c = QuotaNode(f"c{i}", False, parent=rng.choice(cohorts))
        c.parent.children.append(c)  # type: ignore[union-attr]
        cohorts.append(c)
        nodes.append(c)
    cqs = []
    for i in range(rng.randint(2, 6)):
        quotas = {}
        for fr in rng.sample(frs, rng.randint(1, len(frs))):
            nominal = rng.randint(0, 20)
            lending = rng.choice([None, rng.randint(0, nominal)])
            borrowing = rng.choice([None, rng.randint(0, 20)])
            quotas[fr] = Quota(nominal, borrowing, lending)
        parent = rng.choice(cohorts)
        q = QuotaNode(f"q{i}", True, quotas, parent=parent)
        parent.children.append(q)
        cqs.append(q)
        nodes.append(q)
    compute_subtree_quotas(root)
    for q in cqs:
        for fr in sorted(q.quotas):
            q.add_usage(fr, rng.randint(0, 30))
    return nodes


@pytest.mark.parametrize("seed", range(200))
def test_no_weights_is_kueues_unweighted_drs(seed: int) -> None:
    rng = random.Random(seed)
    nodes = random_tree(rng)
    random_weights = {
        f: {r: Fraction(rng.randint(1, 9), rng.randint(1, 4)) for r in ("cpu", "memory", GPU)} for f in "xyz"
    }
    # One multiplier per resource, the same for every flavor: it cancels (the seed's guideline).
    per_resource = {r: Fraction(rng.randint(1, 9), rng.randint(1, 4)) for r in ("cpu", "memory", GPU)}
    uniform = {f: dict(per_resource) for f in "xyz"}
    for n in nodes:
        expected = kueue_unweighted(n)
        assert (drs.share(n, {}).ratio, drs.share(n, {}).dominant_resource) == expected
        ones = {f: {r: Fraction(1) for r in ("cpu", "memory", GPU)} for f in "xyz"}
        assert (drs.share(n, ones).ratio, drs.share(n, ones).dominant_resource) == expected
        assert (drs.share(n, uniform).ratio, drs.share(n, uniform).dominant_resource) == expected
        report = drs.explain(n, random_weights)
        assert report.share == drs.share(n, random_weights)
        # The report adds up Fractions, the share scaled integers: they must agree.
        assert max([r.ratio for r in report.resources], default=Fraction(0)) == report.share.ratio
        assert drs._dominant({r.resource: r.ratio for r in report.resources})[1] == report.dominant_resource
        assert max([r.unweighted_ratio for r in report.resources], default=Fraction(0)) == expected[0]


# -------------------------------------------------------------- the API field


@pytest.mark.parametrize("value", ["0", "-1", "-0.5", 0])
def test_zero_and_negative_weights_are_rejected(value: object) -> None:
    decoded = decode(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "f"},
            "spec": {"resourceWeights": {GPU: value}},
        }
    )
    assert decoded.obj is None
    [err] = decoded.errors
    assert err.path == f"spec.resourceWeights[{GPU}]"
    assert err.message.startswith(f"weight of {GPU} must be greater than 0, got ")


@pytest.mark.parametrize(("value", "expected"), [("8", 8), ("0.5", Fraction(1, 2)), ("500m", Fraction(1, 2))])
def test_decimal_weights_are_accepted(value: str, expected: Fraction) -> None:
    decoded = decode(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "f"},
            "spec": {"resourceWeights": {GPU: value}},
        }
    )
    assert decoded.obj is not None
    weights = drs.flavor_weights({"f": decoded.obj})  # type: ignore[dict-item]
    assert drs.weight_of(weights, ("f", GPU)) == expected
    assert drs.weight_of(weights, ("f", "cpu")) == 1  # a missing entry is 1
    assert drs.weight_of(weights, ("other", GPU)) == 1  # a missing map is 1
