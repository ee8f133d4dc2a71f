"""Seed 002's Examples A, A2 and B, from the manifests in config/examples/drs/."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kueuestream.admission import drs
from kueuestream.agents.cli.drs import rounded
from tests.fair_sharing.drs_seed import EXAMPLES, INPUTS, PRINTED, SEED, example_docs, team_report
from tests.helpers import GPU, load_yaml, run_manifests


@pytest.mark.parametrize("name", sorted(SEED))
def test_the_inputs_are_the_seed_tables(name: str) -> None:
    report = team_report(name)
    milli = {"cpu": 1000}  # Kueue keeps cpu in millicores
    rows = {
        (res.resource, f.flavor): (
            f.borrowed // milli.get(res.resource, 1),
            f.lendable // milli.get(res.resource, 1),
            f.weight,
        )
        for res in report.resources
        for f in res.flavors
    }
    assert rows == INPUTS[name]


@pytest.mark.parametrize("name", sorted(SEED))
def test_ratios_and_dominant_resource_match_the_seed(name: str) -> None:
    ratios, dominant, unweighted_dominant = SEED[name]
    report = team_report(name)
    got = {r.resource: (r.ratio, r.unweighted_ratio) for r in report.resources}
    assert got == ratios
    for resource, (weighted, unweighted) in got.items():
        assert (rounded(weighted, 3), rounded(unweighted, 3)) == PRINTED[(name, resource)]
    assert report.dominant_resource == dominant
    assert report.unweighted_dominant_resource == unweighted_dominant
    assert report.share.weighted_share == max(w for w, _ in ratios.values())


@pytest.mark.parametrize("name", sorted(SEED))
def test_without_weights_the_share_is_the_unweighted_drs(name: str) -> None:
    ratios, _, unweighted_dominant = SEED[name]
    report = team_report(name, weighted=False)
    assert {r.resource: r.ratio for r in report.resources} == {k: u for k, (_, u) in ratios.items()}
    assert report.dominant_resource == unweighted_dominant
    assert report.share.weighted_share == max(u for _, u in ratios.values())


def test_equal_gpu_weights_cancel() -> None:
    """Seed: 'If GPU weights are constant across GPU flavors (both 8.0), they cancel'."""
    docs = example_docs("example-a")
    for doc in docs:
        if doc["metadata"]["name"] == "a10-spot":  # type: ignore[index]
            doc["spec"]["resourceWeights"][GPU] = "8"  # type: ignore[index]
    r = run_manifests(docs)
    report = drs.explain(r.engine.cqs["example-a-team"].node, drs.flavor_weights(r.engine.flavors))
    gpu = next(res for res in report.resources if res.resource == GPU)
    assert gpu.ratio == gpu.unweighted_ratio == Fraction(1, 11)
    assert report.dominant_resource == "cpu"


def test_the_lenders_and_the_root_cohorts_have_share_zero() -> None:
    r = run_manifests(load_yaml(*sorted(EXAMPLES.glob("*.yaml"))))
    statuses = r.statuses()
    assert statuses == {
        ("ClusterQueue", "example-a-lender"): 0,
        ("ClusterQueue", "example-a-team"): 445,
        ("ClusterQueue", "example-a2-lender"): 0,
        ("ClusterQueue", "example-a2-team"): 300,
        ("ClusterQueue", "example-b-lender"): 0,
        ("ClusterQueue", "example-b-team"): 500,
        ("Cohort", "example-a"): 0,
        ("Cohort", "example-a2"): 0,
        ("Cohort", "example-b"): 0,
    }
