"""``kueuestream explain NAMESPACE/NAME LOG [-o text|json]`` on the command line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kueuestream.agents.cli.main import main
from kueuestream.agents.embedded.runtime import run_source
from tests.helpers import cluster_queue, flavor, workload


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("explain")
    src = root / "src"
    src.mkdir()
    (src / "q.yaml").write_text(
        flavor("default") + cluster_queue("q", "default: [{name: cpu, nominalQuota: 4}]")
    )
    (src / "w.yaml").write_text(
        workload("training-a", "q", cpu="3")
        + workload("training-b", "q", cpu="3", created="2024-01-01T00:00:01Z")
    )
    assert run_source(str(src), str(root / "status"), str(root / "log"), once=True, out=io.StringIO()) == 0
    return root / "log"


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["explain", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_text_shows_the_wait_its_numbers_and_what_would_admit(
    capsys: pytest.CaptureFixture[str], log: Path
) -> None:
    code, out, err = explain(capsys, "default/training-b", str(log))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "Workload default/training-b"
    assert any("Waiting  WaitingForQuota" in line for line in lines)
    assert (
        "      cpu in flavor default: requested 3, available 1, short 2 (WaitingForQuota, ClusterQueue q)"
        in lines
    )
    assert lines[-3:] == [
        "What would admit it now:",
        "  nominal quota of ClusterQueue q, flavor default: cpu +2",
        "  the finishing of: default/training-a",
    ]


def test_json_has_workload_timeline_and_would_admit(capsys: pytest.CaptureFixture[str], log: Path) -> None:
    code, out, _ = explain(capsys, "default/training-a", str(log), "-o", "json")
    assert code == 0
    answer = json.loads(out)
    assert set(answer) == {"workload", "timeline", "wouldAdmit"}
    assert [e["event"] for e in answer["timeline"]] == ["Created", "Queued", "Admitted"]
    assert all({"event", "reason", "message"} <= set(e) for e in answer["timeline"])
    assert answer["wouldAdmit"] is None


def test_an_unknown_name_exits_2_naming_the_closest(capsys: pytest.CaptureFixture[str], log: Path) -> None:
    code, out, err = explain(capsys, "default/training-c", str(log))
    assert (code, out) == (2, "")
    assert err == (
        "error: Workload default/training-c: not in the log; "
        "closest: default/training-b, default/training-a\n"
    )


@pytest.mark.parametrize("name", ["training-a", "default/", "/training-a", "a/b/c"])
def test_a_name_without_its_namespace_exits_2(
    capsys: pytest.CaptureFixture[str], log: Path, name: str
) -> None:
    code, _, err = explain(capsys, name, str(log))
    assert code == 2
    assert err == f"error: {name!r}: expected NAMESPACE/NAME, for example default/my-job\n"


def test_a_missing_log_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = explain(capsys, "default/w", str(tmp_path / "nowhere"))
    assert code == 2
    assert err.startswith("error: no embedded log at ")
    assert err.count("\n") == 1


def test_a_damaged_log_exits_2(capsys: pytest.CaptureFixture[str], log: Path, tmp_path: Path) -> None:
    import shutil

    damaged = tmp_path / "log"
    shutil.copytree(log, damaged)
    segment = sorted((damaged / "kueue.decisions").rglob("*.log"), key=lambda p: p.stat().st_size)[-1]
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF
    segment.write_bytes(bytes(data))
    code, out, err = explain(capsys, "default/training-b", str(damaged))
    assert (code, out) == (2, "")
    assert err.startswith("error: the log lost records, so the timeline would be incomplete: kueue.decisions")
