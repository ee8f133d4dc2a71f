"""Fair-sharing preemption on the flavor-weighted DRS, both strategies, worked out by hand.

Weights as in seed 002: h100-reserved ``nvidia.com/gpu: "8"``, a10-spot ``"1"``.
In every scenario the preemptor ClusterQueue ``p`` borrows a10-spot GPUs and
wants more h100-reserved GPUs than are free; the victims are in ``t``, which
borrows h100-reserved GPUs. Shares are compared between ``p`` and ``t``
(the almost-least-common-ancestors are the queues themselves: one cohort).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import pytest

from kueuestream.admission import drs
from kueuestream.admission.fair_sharing import LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
from kueuestream.admission.preemption import Candidate, Preemptor
from kueuestream.admission.state import Phase
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
    run_manifests,
    strip_weights,
    with_uniform_weights,
    without,
    workload_manifest,
)

S2A = [LESS_THAN_OR_EQUAL_TO_FINAL_SHARE]
S2B = [LESS_THAN_INITIAL_SHARE]
BOTH = [LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE]
RECLAIM = {"reclaimWithinCohort": "Any"}
H100_ONLY = {"accelerator": "nvidia-h100"}


def lab(
    strategies: list[str] | None, weighted: bool, *, lender_h100: int, p_spot: int, t_h100: dict[str, int]
) -> list[Manifest]:
    """Cohort ``lab`` of the two scenarios below: the lender has ``lender_h100`` h100 and 100
    a10-spot, p (reclaiming) and t 10 h100 each. p runs 10 h100 and borrows ``p_spot`` a10-spot;
    t runs the workloads of ``t_h100`` (name: h100 GPUs), admitted 10 minutes apart in that
    order. p-new asks for 5 h100."""
    docs = [
        fair_sharing_config(strategies),
        *gpu_flavors(weighted=True),
        gpu_queue("lender", "lab", {H100: lender_h100, A10: 100}),
        gpu_queue("p", "lab", {H100: 10, A10: 0}, RECLAIM),
        gpu_queue("t", "lab", {H100: 10}),
        local_queue_manifest("p", "p"),
        local_queue_manifest("t", "t"),
        admitted_workload("p-h100", "p", {GPU: (H100, 10)}),
        admitted_workload("p-spot", "p", {GPU: (A10, p_spot)}),
        *(
            admitted_workload(name, "t", {GPU: (H100, gpus)}, reserved=f"2026-01-01T09:{10 * i:02d}:00Z")
            for i, (name, gpus) in enumerate(t_h100.items())
        ),
        workload_manifest("p-new", "p", {GPU: "5"}, selector=H100_ONLY),
    ]
    return docs if weighted else strip_weights(docs)


def final_share_scenario(strategies: list[str] | None, weighted: bool) -> list[Manifest]:
    """Where rule S2-a (LessThanOrEqualToFinalShare) decides.

    Cohort ``lab``: lender h100 20 + a10-spot 100, p h100 10, t h100 10. So at
    the cohort h100 40 and a10-spot 100 are lendable: weighted 40*8 + 100 = 420,
    unweighted 140. p runs 10 h100 and borrows 40 a10-spot; t runs 30 h100
    (20 borrowed) in t-big (20), t-mid (5) and t-new (5), newest last. No h100
    is free. p-new asks 5 h100.

    p with p-new: borrows 5 h100 + 40 a10   weighted (5*8+40)/420 = 0.190  unweighted 45/140 = 0.321
    t now:        borrows 20 h100           weighted 160/420      = 0.381  unweighted 20/140 = 0.143
    t without t-new (the first candidate: most recently admitted):
                  borrows 15 h100           weighted 120/420      = 0.286  unweighted 15/140 = 0.107

    S2-a weighted: 0.190 <= 0.286, so t-new goes, and p-new then fits.
    S2-a unweighted: 0.321 > 0.107 (t-mid: the same; t-big: t's share 0): no victim.
    S2-b unweighted: 0.321 is not < 0.143 either.
    """
    return lab(strategies, weighted, lender_h100=20, p_spot=40, t_h100={"t-big": 20, "t-mid": 5, "t-new": 5})


def initial_share_scenario(strategies: list[str] | None, weighted: bool) -> list[Manifest]:
    """Where only rule S2-b (LessThanInitialShare) can preempt.

    Cohort ``lab``: lender h100 10 + a10-spot 100, p h100 10, t h100 10:
    lendable weighted 30*8 + 100 = 340, unweighted 130. p runs 10 h100 and
    borrows 20 a10-spot; t runs t-old (10) and t-new (10): 10 h100 borrowed.
    No h100 is free. p-new asks 5 h100.

    p with p-new: borrows 5 h100 + 20 a10   weighted (5*8+20)/340 = 0.176  unweighted 25/130 = 0.192
    t now:        borrows 10 h100           weighted 80/340       = 0.235  unweighted 10/130 = 0.077
    t without either candidate: borrows nothing, share 0.

    S2-a fails for every candidate, weighted or not (0.176 > 0).
    S2-b weighted: 0.176 < 0.235, so t-new (the first candidate) goes.
    S2-b unweighted: 0.192 is not < 0.077: no victim.
    """
    return lab(strategies, weighted, lender_h100=10, p_spot=20, t_h100={"t-old": 10, "t-new": 10})


# ------------------------------------------------------ LessThanOrEqualToFinalShare


@pytest.mark.parametrize("strategies", [S2A, BOTH, None], ids=["S2-a", "both", "default"])
def test_final_share_rule_preempts_on_the_weighted_share(strategies: list[str] | None) -> None:
    r = run_manifests(final_share_scenario(strategies, weighted=True))
    assert r.evictions() == [("t-new", "InCohortFairSharing")]
    assert r.is_admitted("p-new")
    assert r.flavors("p-new") == {GPU: H100}
    assert r.admitted_in("t") == ["t-big", "t-mid"]
    preempted = r.condition("t-new", "Preempted")
    assert preempted is not None
    assert preempted["message"] == (
        "Preempted to accommodate a workload (UID: UNKNOWN, JobUID: UNKNOWN) "
        "due to Fair Sharing within the cohort; preemptor path: /lab/p; preemptee path: /lab/t"
    )


@pytest.mark.parametrize("strategies", [S2A, BOTH], ids=["S2-a", "both"])
def test_final_share_rule_without_weights_preempts_nothing(strategies: list[str]) -> None:
    r = run_manifests(final_share_scenario(strategies, weighted=False))
    assert r.evictions() == []
    assert not r.is_admitted("p-new")
    assert r.admitted_in("t") == ["t-big", "t-mid", "t-new"]


def test_final_share_shares_match_the_hand_computation() -> None:
    for weighted, p_new, t_old, t_new in (
        (True, Fraction(80, 420), Fraction(160, 420), Fraction(120, 420)),
        (False, Fraction(45, 140), Fraction(20, 140), Fraction(15, 140)),
    ):
        docs = without(final_share_scenario(S2A, weighted), "p-new")
        r = run_manifests(docs)
        assert r.share("t").weighted_share == t_old
        r.engine.cqs["p"].node.add_usage((H100, GPU), 5)
        assert r.share("p").weighted_share == p_new
        r.engine.cqs["t"].node.remove_usage((H100, GPU), 5)
        assert r.share("t").weighted_share == t_new


# ------------------------------------------------------------- LessThanInitialShare


@pytest.mark.parametrize("strategies", [S2B, BOTH, None], ids=["S2-b", "both", "default"])
def test_initial_share_rule_preempts_on_the_weighted_share(strategies: list[str] | None) -> None:
    r = run_manifests(initial_share_scenario(strategies, weighted=True))
    assert r.evictions() == [("t-new", "InCohortFairSharing")]
    assert r.is_admitted("p-new")
    assert r.admitted_in("t") == ["t-old"]


def test_final_share_rule_alone_cannot_preempt_where_only_the_initial_share_rule_can() -> None:
    r = run_manifests(initial_share_scenario(S2A, weighted=True))
    assert r.evictions() == []
    assert not r.is_admitted("p-new")


@pytest.mark.parametrize("strategies", [S2B, BOTH], ids=["S2-b", "both"])
def test_initial_share_rule_without_weights_preempts_nothing(strategies: list[str]) -> None:
    r = run_manifests(initial_share_scenario(strategies, weighted=False))
    assert r.evictions() == []
    assert not r.is_admitted("p-new")


def test_initial_share_shares_match_the_hand_computation() -> None:
    for weighted, p_new, t_old in (
        (True, Fraction(60, 340), Fraction(80, 340)),
        (False, Fraction(25, 130), Fraction(10, 130)),
    ):
        docs = without(initial_share_scenario(S2B, weighted), "p-new")
        r = run_manifests(docs)
        assert r.share("t").weighted_share == t_old
        r.engine.cqs["p"].node.add_usage((H100, GPU), 5)
        assert r.share("p").weighted_share == p_new


# ------------------------------------------------------------------ without weights


def plain(
    t_sizes: list[int],
    p_running: int,
    strategies: list[str] | None = None,
    lender_running: int = 0,
    **gates: bool,
) -> list[Manifest]:
    """Plain fair sharing, no resourceWeights anywhere (Kueue's behaviour).

    Cohort ``c`` of one flavor: lender, p and t have 10 GPUs each, 30 lendable.
    t runs workloads of ``t_sizes`` GPUs (the last admitted last), p runs
    ``p_running`` GPUs, the lender ``lender_running``, and p-new asks for 4 GPUs.
    """
    docs = [
        fair_sharing_config(strategies, **gates),
        *gpu_flavors(weighted=False),
        gpu_queue("lender", "c", {A10: 10}),
        gpu_queue("p", "c", {A10: 10}, RECLAIM),
        gpu_queue("t", "c", {A10: 10}),
        local_queue_manifest("p", "p"),
        local_queue_manifest("t", "t"),
        *[
            admitted_workload(f"t-{i}", "t", {GPU: (A10, size)}, reserved=f"2026-01-01T09:0{i}:00Z")
            for i, size in enumerate(t_sizes)
        ],
        workload_manifest("p-new", "p", {GPU: "4"}),
    ]
    if p_running:
        docs.append(admitted_workload("p-old", "p", {GPU: (A10, p_running)}))
    if lender_running:
        docs.append(admitted_workload("lender-own", "lender", {GPU: (A10, lender_running)}))
    return docs


FULL = [10, 4, 4, 4, 4, 4]  # t runs 30 (borrows 20): nothing is free


def test_within_nominal_the_preemptor_reclaims_regardless_of_shares() -> None:
    # p runs nothing, so with p-new it stays within its nominal 10: it reclaims.
    # t-5, the most recently admitted, goes first; then 4 GPUs are free.
    r = run_manifests(plain(FULL, p_running=0))
    assert r.evictions() == [("t-5", "InCohortReclamation")]
    assert r.is_admitted("p-new")


def test_with_the_within_nominal_gate_off_the_strategies_decide() -> None:
    # p with p-new borrows nothing (share 0); t borrows 20/30, 16/30 without t-5:
    # 0 <= 16/30, rule S2-a passes.
    r = run_manifests(plain(FULL, p_running=0, strategies=S2A, FairSharingPreemptWithinNominal=False))
    assert r.evictions() == [("t-5", "InCohortFairSharing")]
    assert r.is_admitted("p-new")


def test_equal_final_shares_pass_the_final_share_rule() -> None:
    # t runs 18 (t-0 10, t-1 4, t-2 4: borrows 8), p runs 10: 2 GPUs free.
    # p with p-new borrows 4: 4/30. t without t-2 borrows 4: 4/30. 4/30 <= 4/30.
    r = run_manifests(plain([10, 4, 4], p_running=10, strategies=S2A))
    assert r.evictions() == [("t-2", "InCohortFairSharing")]
    assert r.is_admitted("p-new")
    assert r.share("p").weighted_share == Fraction(4, 30)
    assert r.share("t").weighted_share == Fraction(4, 30)


@pytest.mark.parametrize("strategies", [S2A, S2B, BOTH], ids=["S2-a", "S2-b", "both"])
def test_a_preemptor_does_not_overtake_an_equal_share(strategies: list[str]) -> None:
    # The lender runs 4, t runs 14 (t-0 10, t-1 4: borrows 4), p runs 10: 2 GPUs free.
    # p with p-new borrows 4: 4/30, exactly t's share now (4/30) and above t's
    # share without either candidate (0): neither rule lets p-new through.
    r = run_manifests(plain([10, 4], p_running=10, strategies=strategies, lender_running=4))
    assert r.evictions() == []
    assert not r.is_admitted("p-new")


def test_in_cluster_queue_preemption_by_priority() -> None:
    docs = [
        fair_sharing_config(),
        *strip_weights(gpu_flavors(weighted=False)),
        gpu_queue("p", "c", {A10: 4}, {"withinClusterQueue": "LowerPriority"}),
        gpu_queue("t", "c", {A10: 4}),
        local_queue_manifest("p", "p"),
        admitted_workload("low", "p", {GPU: (A10, 4)}, priority=1),
        admitted_workload("t-0", "t", {GPU: (A10, 4)}),
        workload_manifest("high", "p", {GPU: "4"}, priority=10),
    ]
    r = run_manifests(docs)
    assert r.evictions() == [("low", "InClusterQueue")]
    assert r.is_admitted("high")


def test_targets_leave_the_quota_tree_as_they_found_it() -> None:
    docs = without(final_share_scenario(BOTH, True), "p-new")
    r = run_manifests(docs)
    engine = r.engine
    before = {n.name: dict(n.usage) for n in engine.cohorts["lab"].walk()}
    cq = engine.cqs["p"]
    pre = Preemptor("p", 0, 0, {(H100, GPU): 5}, frozenset({(H100, GPU)}))
    nodes = {name: c.node for name, c in engine.cqs.items()}
    admitted: dict[str, list[Candidate]] = {}
    for key in sorted(engine.workloads):
        rec = engine.workloads[key]
        if rec.phase == Phase.ADMITTED:
            admitted.setdefault(rec.cluster_queue, []).append(
                Candidate(
                    key, rec.cluster_queue, rec.priority, rec.created_ms, rec.reserved_ms, rec.usage, False
                )
            )
    targets = engine.fair_sharing.targets(pre, cq, nodes, admitted)
    assert [t.candidate.key[1] for t in targets] == ["t-new"]
    assert {n.name: dict(n.usage) for n in engine.cohorts["lab"].walk()} == before
    weights = drs.flavor_weights(engine.flavors)
    assert drs.share(cq.node, weights).weighted_share == Fraction(40, 420)


def test_hierarchical_cohorts_compare_the_almost_least_common_ancestors() -> None:
    """Cohort org: pool 10, cohort left (p 10), cohort right (t1 5, t2 5); 30 lendable.

    p runs 10; t1 runs t1-a 6 and t1-b 6 (newest), t2 runs t2-a 4 and t2-b 4:
    right borrows 10 from org. Nothing is free. p-new asks 4.
    Targets: at org, right (10/30) beats left (4/30 with p-new); in right, t1
    (borrows 7) beats t2 (3). p and t1 meet at org, so rule S2-a compares left
    with p-new (4/30) and right without t1-b (borrowing 4: 4/30): 4/30 <= 4/30.
    Compared queue to queue it would fail: t1 without t1-b borrows 1 (1/30).
    """
    docs = [
        fair_sharing_config(S2A),
        *gpu_flavors(weighted=False),
        cohort_manifest("org"),
        cohort_manifest("left", "org"),
        cohort_manifest("right", "org"),
        gpu_queue("pool", "org", {A10: 10}),
        gpu_queue("p", "left", {A10: 10}, RECLAIM),
        gpu_queue("t1", "right", {A10: 5}),
        gpu_queue("t2", "right", {A10: 5}),
        local_queue_manifest("p", "p"),
        admitted_workload("p-old", "p", {GPU: (A10, 10)}),
        admitted_workload("t1-a", "t1", {GPU: (A10, 6)}, reserved="2026-01-01T09:00:00Z"),
        admitted_workload("t1-b", "t1", {GPU: (A10, 6)}, reserved="2026-01-01T09:05:00Z"),
        admitted_workload("t2-a", "t2", {GPU: (A10, 4)}, reserved="2026-01-01T09:01:00Z"),
        admitted_workload("t2-b", "t2", {GPU: (A10, 4)}, reserved="2026-01-01T09:06:00Z"),
        workload_manifest("p-new", "p", {GPU: "4"}),
    ]
    r = run_manifests(docs)
    assert r.evictions() == [("t1-b", "InCohortFairSharing")]
    assert r.is_admitted("p-new")
    assert r.share("left").weighted_share == Fraction(4, 30)
    assert r.share("right").weighted_share == Fraction(4, 30)


@pytest.mark.parametrize(
    "scenario",
    [
        lambda: plain(FULL, p_running=0),
        lambda: plain(FULL, p_running=0, strategies=S2A, FairSharingPreemptWithinNominal=False),
        lambda: plain([10, 4, 4], p_running=10, strategies=S2A),
        lambda: plain([10, 4], p_running=10, strategies=BOTH, lender_running=4),
        lambda: final_share_scenario(BOTH, weighted=False),
        lambda: initial_share_scenario(BOTH, weighted=False),
    ],
    ids=["within-nominal", "gate-off", "equal-final", "equal-initial", "final-share", "initial-share"],
)
def test_uniform_weights_preempt_exactly_as_no_weights(scenario: Callable[[], list[Manifest]]) -> None:
    plain_run, weighted = run_manifests(scenario()), run_manifests(with_uniform_weights(scenario()))
    assert [(d.ref, d.action, d.status) for d in weighted.decisions] == [
        (d.ref, d.action, d.status) for d in plain_run.decisions
    ]
