"""`kueuestream drs`: seed 002's Examples A, A2 and B as JSON and as tables; invalid input refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kueuestream.agents.cli.drs import json_node, rounded, run_drs
from tests.fair_sharing.drs_seed import EXAMPLES, INPUTS, PRINTED, SEED, team_report

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
    assert GPU_RATIOS in out
    assert "Dominant resource: cpu (unweighted: cpu)" in out
    assert "Weighted share: 0.500 (fairSharing.weight 1; status.fairSharing.weightedShare 500)" in out
    assert "## Cohort example-b\n\na root Cohort: nothing to borrow from; weighted share 0" in out


def test_drs_table_example_a(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_drs([str(EXAMPLES / "flavors.yaml"), str(EXAMPLES / "example-a.yaml")], "table") == 0
    out = capsys.readouterr().out
    assert GPU_RATIOS in out
    assert "| `cpu` | (300*1)/(1000*1) = 0.300 | 300/1000 = 0.300 |" in out
    assert "Dominant resource: nvidia.com/gpu (unweighted: cpu)" in out


def test_drs_refuses_invalid_manifests(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
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
