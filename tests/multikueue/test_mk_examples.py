"""config/examples/multikueue/: the manager's and a worker's manifests are valid as they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from kueuestream.agents.cli.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "multikueue"


@pytest.mark.parametrize("cluster", ["manager.yaml", "worker.yaml"])
def test_the_multikueue_example_is_valid(cluster: str, capsys: pytest.CaptureFixture[str]) -> None:
    files = [EXAMPLE / cluster, EXAMPLE / "configuration.yaml", EXAMPLE / "job.yaml"]
    assert main(["validate", *map(str, files)]) == 0, capsys.readouterr().out
