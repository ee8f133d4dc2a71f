"""Fair-sharing admission order (Kueue's tournament), with no resourceWeights anywhere.

One flavor, ``a10-spot``, with no weights: these are Kueue's plain DRS rules.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

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
    replaced,
    run_manifests,
    with_uniform_weights,
    workload_manifest,
)

EARLY = "2026-01-01T00:00:00Z"
LATE = "2026-01-01T00:05:00Z"


def queues(*names: str) -> list[Manifest]:
    return [local_queue_manifest(n, n) for n in names]


def flat(fair: Manifest | None) -> list[Manifest]:
    """Cohort c: pool 10, a 5, b 5 (20 lendable). a already borrows 4: a runs 9, b runs 5.

    6 GPUs are free. Heads: a-next (4, older, higher priority) and b-next (4).
    a after a-next borrows 8: 8/20 = 0.4. b after b-next borrows 4: 4/20 = 0.2.
    Fair sharing admits b-next first; then a-next no longer fits (2 free).
    The classical order (all borrow; priority, then age) admits a-next instead.
    """
    return [
        *([fair] if fair else []),
        *gpu_flavors(weighted=False),
        gpu_queue("pool", "c", {A10: 10}),
        gpu_queue("a", "c", {A10: 5}),
        gpu_queue("b", "c", {A10: 5}),
        *queues("a", "b"),
        admitted_workload("a-old", "a", {GPU: (A10, 9)}),
        admitted_workload("b-old", "b", {GPU: (A10, 5)}),
        workload_manifest("a-next", "a", {GPU: "4"}, priority=5, created=EARLY),
        workload_manifest("b-next", "b", {GPU: "4"}, priority=1, created=LATE),
    ]


def test_the_lower_share_after_admission_goes_first() -> None:
    r = run_manifests(flat(fair_sharing_config()))
    assert r.is_admitted("b-next")
    assert not r.is_admitted("a-next")
    assert r.statuses()[("ClusterQueue", "b")] == 200
    assert r.statuses()[("ClusterQueue", "a")] == 200  # 4/20 now, a-next not admitted


@pytest.mark.parametrize(
    "fair",
    [
        None,
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta1",
            "kind": "Configuration",
            "fairSharing": {"enable": False},
        },
    ],
    ids=["no-configuration", "v1beta1-enable-false"],
)
def test_without_fair_sharing_the_classical_order_applies(fair: Manifest | None) -> None:
    r = run_manifests(flat(fair))
    assert r.is_admitted("a-next")
    assert not r.is_admitted("b-next")


def test_a_present_v1beta2_fair_sharing_stanza_enables_it() -> None:
    r = run_manifests(flat(fair_sharing_config(v1beta2=True)))
    assert r.engine.config.fair_sharing_enabled
    assert r.is_admitted("b-next")


def test_fair_sharing_weight_divides_the_share() -> None:
    # a with weight 3: (8/20)/3 = 0.133 < b's 0.2, so a-next goes first now.
    r = run_manifests(replaced(flat(fair_sharing_config()), gpu_queue("a", "c", {A10: 5}, weight="3")))
    assert r.is_admitted("a-next")
    assert not r.is_admitted("b-next")
    assert r.share("a").weighted_share == Fraction(8, 20) / 3
    assert r.statuses()[("ClusterQueue", "a")] == 134  # ceil(133.3)


def test_weight_zero_while_borrowing_is_an_infinite_share() -> None:
    # b with weight 0 borrows after admission: infinite share, so a-next goes first.
    r = run_manifests(replaced(flat(fair_sharing_config()), gpu_queue("b", "c", {A10: 5}, weight="0")))
    assert r.is_admitted("a-next")
    assert not r.is_admitted("b-next")
    # b does not borrow now: a weight of 0 then means share 0.
    assert r.statuses()[("ClusterQueue", "b")] == 0
    assert r.statuses()[("ClusterQueue", "a")] == 400


def test_equal_shares_go_by_priority_then_age() -> None:
    docs = [
        fair_sharing_config(),
        *gpu_flavors(weighted=False),
        gpu_queue("pool", "c", {A10: 4}),
        gpu_queue("a", "c", {A10: 0}),
        gpu_queue("b", "c", {A10: 0}),
        *queues("a", "b"),
        workload_manifest("a-next", "a", {GPU: "4"}, priority=1, created=EARLY),
        workload_manifest("b-next", "b", {GPU: "4"}, priority=2, created=LATE),
    ]
    r = run_manifests(docs)
    assert r.is_admitted("b-next") and not r.is_admitted("a-next")
    r = run_manifests(replaced(docs, workload_manifest("b-next", "b", {GPU: "4"}, priority=1, created=LATE)))
    assert r.is_admitted("a-next") and not r.is_admitted("b-next")


def non_borrowing(**gates: bool) -> list[Manifest]:
    """a borrows 50 a10-spot GPUs but asks for h100 within its nominal quota.

    h100: a 5, b 5; b runs 5. a10-spot: pool 100, a runs 50. Lendable 110.
    a-next (5 h100) keeps a within nominal on h100, but a's share is 50/110;
    b-next (5 h100) makes b borrow 5: 5/110. Only 5 h100 GPUs are free.
    """
    return [
        fair_sharing_config(None, **gates),
        *gpu_flavors(weighted=False),
        gpu_queue("pool", "c", {A10: 100}),
        gpu_queue("a", "c", {H100: 5, A10: 0}),
        gpu_queue("b", "c", {H100: 5}),
        *queues("a", "b"),
        admitted_workload("a-spot", "a", {GPU: (A10, 50)}),
        admitted_workload("b-old", "b", {GPU: (H100, 5)}),
        workload_manifest("a-next", "a", {GPU: "5"}, selector={"accelerator": "nvidia-h100"}),
        workload_manifest("b-next", "b", {GPU: "5"}),
    ]


def test_a_queue_not_borrowing_on_what_it_asks_for_goes_first() -> None:
    r = run_manifests(non_borrowing())
    assert r.is_admitted("a-next")
    assert not r.is_admitted("b-next")


def test_without_prioritize_non_borrowing_the_share_decides() -> None:
    r = run_manifests(non_borrowing(FairSharingPrioritizeNonBorrowing=False))
    assert r.is_admitted("b-next")
    assert not r.is_admitted("a-next")


def hierarchy() -> list[Manifest]:
    """Cohort org: pool 12 and cohorts left (l1 5, l2 5) and right (r1 10); 32 lendable.

    l1 runs 13 (borrows 8, so left borrows 8), l2 runs 5, r1 runs 10: 4 free.
    Heads: l2-next (1) and r1-next (4).
    Flat, l2 with l2-next borrows 1/32 against r1's 4/32: l2-next would win.
    But the tournament compares at org the children of org: left with l2-next
    borrows 9/32, right with r1-next 4/32. r1-next wins; then 0 GPUs are free.
    """
    return [
        fair_sharing_config(),
        *gpu_flavors(weighted=False),
        cohort_manifest("org"),
        cohort_manifest("left", "org"),
        cohort_manifest("right", "org"),
        gpu_queue("pool", "org", {A10: 12}),
        gpu_queue("l1", "left", {A10: 5}),
        gpu_queue("l2", "left", {A10: 5}),
        gpu_queue("r1", "right", {A10: 10}),
        *queues("l1", "l2", "r1"),
        admitted_workload("l1-old", "l1", {GPU: (A10, 13)}),
        admitted_workload("l2-old", "l2", {GPU: (A10, 5)}),
        admitted_workload("r1-old", "r1", {GPU: (A10, 10)}),
        workload_manifest("l2-next", "l2", {GPU: "1"}, created=EARLY),
        workload_manifest("r1-next", "r1", {GPU: "4"}, created=LATE),
    ]


def test_the_tournament_compares_at_every_cohort_level() -> None:
    r = run_manifests(hierarchy())
    assert r.is_admitted("r1-next")
    assert not r.is_admitted("l2-next")
    assert r.statuses() == {
        ("ClusterQueue", "l1"): 250,  # 8/32
        ("ClusterQueue", "l2"): 0,
        ("ClusterQueue", "pool"): 0,
        ("ClusterQueue", "r1"): 125,  # 4/32
        ("Cohort", "left"): 250,
        ("Cohort", "org"): 0,
        ("Cohort", "right"): 125,
    }


def test_each_pop_sees_what_the_previous_ones_took() -> None:
    """Cohort org: pool 8, left (l1 5, l2 5), right (r1 10); 28 lendable; 8 free.

    Heads l2-next 3, l1-next 4, r1-next 5.
    Pop 1: at left, l2 (3/28) beats l1 (4/28); at org left 3/28 beats right 5/28.
    Pop 2, with l2-next admitted: left with l1-next borrows 7/28, right 5/28:
    r1-next. Then 0 GPUs are free and l1-next does not fit. (Shares taken once
    before the cycle would have let l1-next, 4/28 < 5/28, go second.)
    """
    docs = [
        fair_sharing_config(),
        *gpu_flavors(weighted=False),
        cohort_manifest("org"),
        cohort_manifest("left", "org"),
        cohort_manifest("right", "org"),
        gpu_queue("pool", "org", {A10: 8}),
        gpu_queue("l1", "left", {A10: 5}),
        gpu_queue("l2", "left", {A10: 5}),
        gpu_queue("r1", "right", {A10: 10}),
        *queues("l1", "l2", "r1"),
        admitted_workload("l1-old", "l1", {GPU: (A10, 5)}),
        admitted_workload("l2-old", "l2", {GPU: (A10, 5)}),
        admitted_workload("r1-old", "r1", {GPU: (A10, 10)}),
        workload_manifest("l2-next", "l2", {GPU: "3"}),
        workload_manifest("l1-next", "l1", {GPU: "4"}),
        workload_manifest("r1-next", "r1", {GPU: "5"}),
    ]
    r = run_manifests(docs)
    assert r.admitted_in("l2") == ["l2-next", "l2-old"]
    assert r.admitted_in("r1") == ["r1-next", "r1-old"]
    assert r.admitted_in("l1") == ["l1-old"]


@pytest.mark.parametrize(
    "scenario",
    [
        lambda: flat(fair_sharing_config()),
        lambda: non_borrowing(),
        lambda: non_borrowing(FairSharingPrioritizeNonBorrowing=False),
        hierarchy,
    ],
    ids=["flat", "non-borrowing", "non-borrowing-gate-off", "hierarchy"],
)
def test_uniform_weights_decide_exactly_as_no_weights(scenario: Callable[[], list[Manifest]]) -> None:
    plain, weighted = run_manifests(scenario()), run_manifests(with_uniform_weights(scenario()))
    assert [(d.ref, d.action, d.status) for d in weighted.decisions] == [
        (d.ref, d.action, d.status) for d in plain.decisions
    ]
    assert weighted.statuses() == plain.statuses()
