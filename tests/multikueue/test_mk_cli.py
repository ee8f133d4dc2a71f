"""``run --multikueue-namespace``: a bad value is one ``error:`` line and exit 2, before any connection."""

from __future__ import annotations

from pathlib import Path

import pytest

from kueuestream.agents.cli.main import main


def test_an_invalid_namespace_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--kubeconfig", "/nonexistent", "--multikueue-namespace", "Bad_NS"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: --multikueue-namespace: 'Bad_NS' is not valid: must be a DNS-1123 label: at most 63 "
        "characters, lower-case letters, digits and '-', starting and ending with a letter or digit "
        "(e.g. 'team-a')"
    ]


def test_it_goes_with_a_cluster_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--source", str(tmp_path), "--multikueue-namespace", "kueue-system"]) == 2
    assert "--multikueue-namespace go with --kubeconfig or --in-cluster" in capsys.readouterr().err
