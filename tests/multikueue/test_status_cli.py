"""``kueuestream multikueue status``: clusters and Workloads folded from the log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kueuestream.agents.cli.main import main
from kueuestream.streams import codec
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.schemas import MultiKueueApplied, MultiKueueDecision
from tests.multikueue.test_pipeline import _history, _run


def _status(directory: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["multikueue", "status", str(directory), *extra]) == 0
    return capsys.readouterr().out


def test_status_lists_clusters_and_where_each_workload_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = _history()
    _run(tmp_path / "log", world.events)
    status = json.loads(_status(tmp_path / "log", capsys, "-o", "json"))
    clusters = {c["name"]: c for c in status["clusters"]}
    # w1 ran "first" until it was lost; w2 got both, finished "second" and runs "first".
    assert clusters["w1"] | {"message": ""} == {
        "name": "w1",
        "active": True,
        "reason": "Active",
        "message": "",
        "lag": clusters["w1"]["lag"],
        "dispatched": 2,
        "running": 0,
        "lost": 1,
    }
    assert (clusters["w2"]["dispatched"], clusters["w2"]["running"], clusters["w2"]["lost"]) == (2, 1, 0)
    workloads = {w["name"]: (w["state"], w["cluster"], w["copies"]) for w in status["workloads"]}
    assert workloads == {"first": ("Running", "w2", ["w2"]), "second": ("Finished", "w2", [])}
    table = _status(tmp_path / "log", capsys)
    lines = table.splitlines()
    assert lines[0].split() == ["CLUSTER", "ACTIVE", "REASON", "LAG", "DISPATCHED", "RUNNING", "LOST"]
    assert lines[2].split()[:3] == ["w2", "True", "Active"]
    assert any(line.split() == ["team", "first", "Running", "w2", "w2"] for line in lines)


def test_lag_counts_the_decisions_the_cluster_side_has_not_applied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = _history()
    _run(tmp_path / "log", world.events)
    with FileLog(tmp_path / "log") as log:
        recorded = [codec.decode(r.value, MultiKueueDecision) for r in log.read_sync("kueue.multikueue", 0)]
        for_w2 = [i for i, d in enumerate(recorded) if d.cluster == "w2"]
        applied = [MultiKueueApplied(decision=i, outcome="applied") for i in for_w2[:-2]]
        log.ensure_topic_sync("kueue.multikueue.applied", 1)
        log.append_many_sync(
            "kueue.multikueue.applied", [(b"", codec.encode(a)) for a in applied], partition=0
        )
    status = json.loads(_status(tmp_path / "log", capsys, "-o", "json"))
    lag = {c["name"]: c["lag"] for c in status["clusters"]}
    assert lag["w2"] == 2
    assert lag["w1"] == sum(1 for d in recorded if d.cluster == "w1")


def test_status_of_a_missing_log_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["multikueue", "status", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"error: no embedded log at {tmp_path / 'nowhere'} (expected a directory, or kafka://HOST:PORT)\n"
    )
