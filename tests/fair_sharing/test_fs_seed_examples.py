"""Seed 002's Examples A, A2 and B, from the manifests in config/examples/drs/."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from kueuestream.admission import drs
from kueuestream.agents.cli.drs import rounded, run_drs
from tests.helpers import GPU, load_yaml, run_manifests, strip_weights

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples" / "drs"

# example -> ({resource: (weighted ratio, unweighted ratio)}, dominant, unweighted dominant)
SEED = {
    "example-a": (
        {
            "cpu": (Fraction(3, 10), Fraction(3, 10)),
            GPU: (Fraction(100 * 8, 100 * 8 + 1000), Fraction(100, 1100)),
        },
        GPU,
        "cpu",
    ),
    "example-a2": (
        {
            "cpu": (Fraction(3, 10), Fraction(3, 10)),
            GPU: (Fraction(10 * 8 + 400, 100 * 8 + 1000), Fraction(410, 1100)),
        },
        "cpu",
        GPU,
    ),
    "example-b": (
        {
            "cpu": (Fraction(250 * 3 + 50, 300 * 3 + 700), Fraction(300, 1000)),
            GPU: (Fraction(100 * 8, 100 * 8 + 1000), Fraction(100, 1100)),
        },
        "cpu",
        "cpu",
    ),
}
# What the seed prints, to 3 decimals.
PRINTED = {
    ("example-a", "cpu"): ("0.300", "0.300"),
    ("example-a", GPU): ("0.444", "0.091"),
    ("example-a2", "cpu"): ("0.300", "0.300"),
    ("example-a2", GPU): ("0.267", "0.373"),
    ("example-b", "cpu"): ("0.500", "0.300"),
    ("example-b", GPU): ("0.444", "0.091"),
}
# The seed's input tables: (resource, flavor) -> (borrowed, lendable, weight)
INPUTS: dict[str, dict[tuple[str, str], tuple[int, int, int | Fraction]]] = {
    "example-a": {
        ("cpu", "standard-cpu"): (300, 1000, 1),
        (GPU, "h100-reserved"): (100, 100, 8),
        (GPU, "a10-spot"): (0, 1000, 1),
    },
    "example-a2": {
        ("cpu", "standard-cpu"): (300, 1000, 1),
        (GPU, "h100-reserved"): (10, 100, 8),
        (GPU, "a10-spot"): (400, 1000, 1),
    },
    "example-b": {
        ("cpu", "cpu-premium"): (250, 300, 3),
        ("cpu", "cpu-standard"): (50, 700, 1),
        (GPU, "h100-reserved"): (100, 100, 8),
        (GPU, "a10-spot"): (0, 1000, 1),
    },
}


def example_docs(name: str, weighted: bool = True) -> list[dict[str, object]]:
    docs = load_yaml(EXAMPLES / "flavors.yaml", EXAMPLES / f"{name}.yaml")
    return docs if weighted else strip_weights(docs)


def team_report(name: str, weighted: bool = True) -> drs.NodeReport:
    r = run_manifests(example_docs(name, weighted))
    weights = drs.flavor_weights(r.engine.flavors)
    return drs.explain(r.engine.cqs[f"{name}-team"].node, weights)


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


# ---------------------------------------------------------------------- the CLI

GPU_RATIOS = "| `nvidia.com/gpu` | (100*8 + 0*1)/(100*8 + 1000*1) = 0.444 | (100 + 0)/(100 + 1000) = 0.091 |"


def test_drs_json_reproduces_the_seed(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_drs([str(EXAMPLES)], "json") == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["clusterQueues", "cohorts"]
    nodes = {n["name"]: n for n in out["clusterQueues"]}
    assert sorted(nodes) == sorted(f"{e}-{k}" for e in SEED for k in ("lender", "team"))
    assert [n["name"] for n in out["cohorts"]] == ["example-a", "example-a2", "example-b"]
    for name, (ratios, dominant, _) in SEED.items():
        node = nodes[f"{name}-team"]
        assert list(node) == ["name", "dominantResource", "weightedShare", "resources"]
        assert node["dominantResource"] == dominant
        assert f"{node['weightedShare']:.3f}" == rounded(max(w for w, _ in ratios.values()), 3)
        for res in node["resources"]:
            assert list(res) == ["resource", "ratio", "unweightedRatio", "flavors"]
            printed = PRINTED[(name, res["resource"])]
            assert (f"{res['ratio']:.3f}", f"{res['unweightedRatio']:.3f}") == printed
            for fl in res["flavors"]:
                assert list(fl) == ["flavor", "borrowed", "lendable", "weight"]
                key = (res["resource"], fl["flavor"])
                assert (fl["borrowed"], fl["lendable"], fl["weight"]) == INPUTS[name][key]
    assert nodes["example-a-lender"]["dominantResource"] is None
    assert nodes["example-a-lender"]["weightedShare"] == 0
    for cohort in out["cohorts"]:
        assert cohort == {
            "name": cohort["name"],
            "dominantResource": None,
            "weightedShare": 0,
            "resources": [],
        }


def test_drs_json_numbers() -> None:
    report = team_report("example-a")
    from kueuestream.agents.cli.drs import json_node

    node = json_node(report)
    assert node["weightedShare"] == 0.444444
    gpu = node["resources"][1]
    assert (gpu["ratio"], gpu["unweightedRatio"]) == (0.444444, 0.090909)


def test_drs_table_reproduces_the_seed(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_drs([str(EXAMPLES / "flavors.yaml"), str(EXAMPLES / "example-b.yaml")], "table") == 0
    out = capsys.readouterr().out
    assert "## ClusterQueue example-b-team (cohort example-b)" in out
    assert "| `cpu` | `cpu-premium` | 250 | 300 | 3 |" in out
    assert "| `nvidia.com/gpu` | `h100-reserved` | 100 | 100 | 8 |" in out
    assert "| `cpu` | (250*3 + 50*1)/(300*3 + 700*1) = 0.500 | (250 + 50)/(300 + 700) = 0.300 |" in out
    assert (
        "| `nvidia.com/gpu` | (100*8 + 0*1)/(100*8 + 1000*1) = 0.444 | (100 + 0)/(100 + 1000) = 0.091 |"
        in out
    )
    assert "Dominant resource: cpu (unweighted: cpu)" in out
    assert "Weighted share: 0.500 (fairSharing.weight 1; status.fairSharing.weightedShare 500)" in out
    assert "## Cohort example-b\n\na root Cohort: nothing to borrow from; weighted share 0" in out


def test_drs_table_example_a(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_drs([str(EXAMPLES / "flavors.yaml"), str(EXAMPLES / "example-a.yaml")], "table") == 0
    out = capsys.readouterr().out
    assert (
        "| `nvidia.com/gpu` | (100*8 + 0*1)/(100*8 + 1000*1) = 0.444 | (100 + 0)/(100 + 1000) = 0.091 |"
        in out
    )
    assert "| `cpu` | (300*1)/(1000*1) = 0.300 | 300/1000 = 0.300 |" in out
    assert "Dominant resource: nvidia.com/gpu (unweighted: cpu)" in out


def test_drs_refuses_invalid_manifests(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: free}\n"
        "spec:\n  resourceWeights:\n    nvidia.com/gpu: '0'\n"
    )
    assert run_drs([str(bad)], "table") == 2
    err = capsys.readouterr().err
    assert "ResourceFlavor free: spec.resourceWeights" in err
    assert "weight of nvidia.com/gpu must be greater than 0, got 0" in err
    assert run_drs([str(tmp_path / "missing")], "json") == 2
    assert run_drs([str(EXAMPLES)], "yaml") == 2
