"""ClusterQueue and Cohort status.fairSharing.weightedShare reach the decision stream."""

from __future__ import annotations

from pathlib import Path

from kueuestream.admission.events import Action
from tests.helpers import Run, run

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples" / "drs"
FAIR_SHARING = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
fairSharing:
  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]
---
"""


def _example_a(with_fair_sharing: bool) -> Run:
    text = (EXAMPLES / "flavors.yaml").read_text() + "\n---\n" + (EXAMPLES / "example-a.yaml").read_text()
    return run((FAIR_SHARING if with_fair_sharing else "") + text)


def _shares(r: Run) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for d in r.decisions:
        if d.action == Action.STATUS:
            out[(d.ref.kind, d.ref.name)] = d.status["fairSharing"]["weightedShare"]
    return out


def test_weighted_share_is_reported_per_cluster_queue_and_cohort() -> None:
    shares = _shares(_example_a(with_fair_sharing=True))
    # Example A: the team borrows 100 h100 (weight 8) of 100 and no a10: 800/1800 = 0.444...,
    # reported per mille and rounded up as Kueue does.
    team = next(name for kind, name in shares if kind == "ClusterQueue" and "lender" not in name)
    assert shares[("ClusterQueue", team)] == 445
    assert all(v == 0 for (kind, name), v in shares.items() if "lender" in name)
    assert any(kind == "Cohort" for kind, _ in shares)


def test_no_fair_sharing_no_share_in_status() -> None:
    assert _shares(_example_a(with_fair_sharing=False)) == {}
