"""The operating flags of ``kueuestream run`` (and ``apply``): what is refused before anything starts."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kueuestream.agents.cli.main import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["run", *argv])
    return code, capsys.readouterr().err


def test_cluster_flags_are_refused_with_a_source_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(["--source", str(tmp_path), "--metrics-port", "0", "--shadow"], capsys)
    assert code == 2
    assert err == "error: --shadow, --metrics-port go with --kubeconfig or --in-cluster, not --source\n"


def test_a_shadow_report_needs_shadow_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(
        ["--kubeconfig", str(tmp_path / "k"), "--shadow-report", str(tmp_path / "r.json")], capsys
    )
    assert (code, err) == (2, "error: --shadow-report goes with --shadow\n")


def test_apply_takes_the_same_shadow_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = str(tmp_path / "r.json")
    code = main(["apply", "--kubeconfig", "k", "--broker", "kafka://127.0.0.1:9", "--shadow-report", report])
    assert (code, capsys.readouterr().err) == (2, "error: --shadow-report goes with --shadow\n")


def test_a_shadow_report_in_a_missing_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "nowhere" / "r.json"
    code, err = run(["--kubeconfig", str(tmp_path / "k"), "--shadow", "--shadow-report", str(report)], capsys)
    assert (code, err) == (2, f"error: --shadow-report {report}: no folder {report.parent}\n")


def test_a_metrics_port_out_of_range_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["--kubeconfig", str(tmp_path / "k"), "--metrics-port", "70000"], capsys)
    assert (code, err) == (2, "error: --metrics-port 70000: a port is 0 to 65535 (0: any free port)\n")


def test_a_metrics_port_in_use_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The port is taken before the kubeconfig is read: the line names the port and the reason."""
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, err = run(["--kubeconfig", str(tmp_path / "k"), "--metrics-port", str(port)], capsys)
    assert (code, err) == (2, f"error: --metrics-port {port}: cannot listen: Address already in use\n")
