"""Seed 002, Story 1: borrowing cheap a10-spot GPUs must not cost Team-A a premium h100 GPU.

Setup (the seed's table, plus who holds the a10-spot capacity):

| ClusterQueue | h100-reserved nominal | a10-spot nominal | flavors        |
| ------------ | --------------------: | ---------------: | -------------- |
| team-a       |                    10 |                0 | h100, a10-spot |
| team-b       |                    90 |                - | h100           |
| gpu-pool     |                     - |              500 | a10-spot       |

All three are in cohort ``gpus``: 100 h100-reserved GPUs and 500 a10-spot GPUs.
Weights as in the seed: h100-reserved ``nvidia.com/gpu: "8"``, a10-spot ``"1"``.
Fair sharing is on, both teams may reclaim within the cohort.

Already running: team-a borrows 60 a10-spot GPUs (``a-spot-sweep``) and uses no
h100; team-b uses 85 h100 (``b-training``). So 15 h100 GPUs are free, all of
them nominal quota of the two teams (10 of team-a's, 5 of team-b's).

Pending, one head per team, both pinned to h100 by node selector:
``a-finetune`` wants 11 h100 (team-a ends at 11, borrowing 1 beyond its 10);
``b-eval`` wants 15 h100 (team-b ends at 100, borrowing 10 beyond its 90).
Each fits the 15 free GPUs alone, not both: the two contest the same h100s.
Both would borrow on h100-reserved, so "not borrowing first" does not decide;
the DRS after admission does (``b-eval`` is older, so a tie would go to it).

Lendable at the cohort: h100 100, a10-spot 500.

With weights (weighted lendable = 100*8 + 500*1 = 1300):
  team-a after a-finetune: (1*8 + 60*1) / 1300 = 68/1300 = 0.0523
  team-b after b-eval:     (10*8)       / 1300 = 80/1300 = 0.0615
  -> team-a has the lower share: a-finetune wins and gets h100; b-eval no longer fits.

Without weights (lendable = 100 + 500 = 600):
  team-a after a-finetune: (1 + 60) / 600 = 0.1017
  team-b after b-eval:     10 / 600       = 0.0167
  -> team-b wins: b-eval gets the h100 GPUs; a-finetune no longer fits.

The loser then tries fair-sharing preemption, which must not turn the result:
* weighted, team-b: its share with b-eval, 80/1300, is neither <= team-a's
  share without a-finetune (60/1300, rule S2-a) nor < team-a's current share
  (68/1300, rule S2-b): no preemption.
* unweighted, team-a: 61/600 is neither <= team-b's share without a victim (0)
  nor < team-b's current 10/600: no preemption.
"""

from __future__ import annotations

from fractions import Fraction

from tests.helpers import (
    A10,
    GPU,
    H100,
    Manifest,
    admitted_workload,
    fair_sharing_config,
    gpu_flavors,
    gpu_queue,
    local_queue_manifest,
    run_manifests,
    without,
    workload_manifest,
)

RECLAIM = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
H100_ONLY = {"accelerator": "nvidia-h100"}


def story(weighted: bool) -> list[Manifest]:
    return [
        fair_sharing_config(),
        *gpu_flavors(weighted),
        gpu_queue("team-a", "gpus", {H100: 10, A10: 0}, RECLAIM),
        gpu_queue("team-b", "gpus", {H100: 90}, RECLAIM),
        gpu_queue("gpu-pool", "gpus", {A10: 500}),
        local_queue_manifest("team-a", "team-a"),
        local_queue_manifest("team-b", "team-b"),
        admitted_workload("a-spot-sweep", "team-a", {GPU: (A10, 60)}),
        admitted_workload("b-training", "team-b", {GPU: (H100, 85)}),
        workload_manifest(
            "b-eval", "team-b", {GPU: "1"}, count=15, selector=H100_ONLY, created="2026-02-15T10:00:00Z"
        ),
        workload_manifest(
            "a-finetune", "team-a", {GPU: "1"}, count=11, selector=H100_ONLY, created="2026-02-15T10:01:00Z"
        ),
    ]


def test_with_weights_the_team_borrowing_cheap_gpus_wins_the_h100() -> None:
    r = run_manifests(story(weighted=True))
    assert r.is_admitted("a-finetune")
    assert r.flavors("a-finetune") == {GPU: H100}
    assert not r.is_admitted("b-eval")
    assert r.condition("b-eval", "QuotaReserved")["message"] == (  # type: ignore[index]
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
        "in flavor h100-reserved, 11 more needed"
    )
    assert r.evictions() == []
    assert r.share("team-a").weighted_share == Fraction(68, 1300)
    assert r.share("team-a").dominant_resource == GPU
    assert r.share("team-b").weighted_share == 0
    statuses = r.statuses()
    assert statuses[("ClusterQueue", "team-a")] == 53  # ceil(52.3)
    assert statuses[("ClusterQueue", "team-b")] == 0
    assert statuses[("ClusterQueue", "gpu-pool")] == 0
    assert statuses[("Cohort", "gpus")] == 0


def test_without_weights_the_outcome_flips() -> None:
    r = run_manifests(story(weighted=False))
    assert r.is_admitted("b-eval")
    assert r.flavors("b-eval") == {GPU: H100}
    assert not r.is_admitted("a-finetune")
    assert r.evictions() == []
    assert r.share("team-b").weighted_share == Fraction(10, 600)
    assert r.share("team-a").weighted_share == Fraction(60, 600)
    statuses = r.statuses()
    assert statuses[("ClusterQueue", "team-b")] == 17  # ceil(16.7)
    assert statuses[("ClusterQueue", "team-a")] == 100


def test_the_shares_the_tournament_compares() -> None:
    """The hand-worked numbers above, from the engine's own quota tree."""
    for weighted, a_share, b_share in (
        (True, Fraction(68, 1300), Fraction(80, 1300)),
        (False, Fraction(61, 600), Fraction(10, 600)),
    ):
        r = run_manifests(without(story(weighted), "a-finetune", "b-eval"))
        a, b = r.engine.cqs["team-a"].node, r.engine.cqs["team-b"].node
        a.add_usage((H100, GPU), 11)
        b.add_usage((H100, GPU), 15)
        assert r.share("team-a").weighted_share == a_share
        assert r.share("team-b").weighted_share == b_share
