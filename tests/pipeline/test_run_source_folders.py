"""``kueuestream run``: the log and status folders it writes are never read as its source."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kueuestream.agents.embedded.runtime import run_source
from kueuestream.streams.file_log import FileLog
from tests.helpers import cluster_queue, flavor, workload

CQ4 = "default: [{name: cpu, nominalQuota: 4}]"


@pytest.fixture
def src(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "queues.yaml").write_text(flavor("default") + cluster_queue("q", CQ4))
    # "-" sorts before ".", so these files are read before the default log folder's status files.
    (folder / "-a.yaml").write_text(workload("a", "q", cpu="1"))
    (folder / "-b.yaml").write_text(workload("b", "q", cpu="1", created="2024-01-01T00:00:01Z"))
    return folder


def watch_events(log_dir: Path) -> int:
    with FileLog(log_dir, read_only=True) as log:
        return sum(1 for _ in log.read_sync("kueue.watch", 0))


def test_run_in_the_source_folder_never_reads_its_own_log(
    src: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``run --source .`` with the default ``./.kueuestream``, twice."""
    monkeypatch.chdir(src)
    assert run_source(".", once=True) == 0
    status = src / ".kueuestream" / "status" / "default" / "a.yaml"
    assert yaml.safe_load(status.read_text())["status"]["admission"]["clusterQueue"] == "q"
    first = watch_events(src / ".kueuestream")
    capsys.readouterr()

    assert run_source(".", once=True) == 0
    out = capsys.readouterr().out
    # Neither the status files (Workloads without a spec) nor topic.json were taken as manifests.
    assert "error" not in out.replace("0 errors", ""), out
    assert "0 new decisions, 0 errors" in out
    assert watch_events(src / ".kueuestream") == first
    assert yaml.safe_load(status.read_text())["status"]["admission"]["clusterQueue"] == "q"


def test_explicit_log_and_status_folders_inside_the_source_are_not_read(
    src: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs, status = src / "state" / "log", src / "state" / "status"
    assert run_source(str(src), str(status), str(logs), once=True) == 0
    first = watch_events(logs)
    assert run_source(str(src), str(status), str(logs), once=True) == 0
    out = capsys.readouterr().out
    assert "error" not in out.replace("0 errors", ""), out
    assert "0 new decisions, 0 errors" in out
    assert watch_events(logs) == first


@pytest.mark.parametrize("inside", ["log", "log/status", "status/default"])
def test_a_source_inside_the_log_or_status_folder_is_refused(
    tmp_path: Path, inside: str, capsys: pytest.CaptureFixture[str]
) -> None:
    logs, status = tmp_path / "log", tmp_path / "status"
    source = tmp_path / inside
    source.mkdir(parents=True)
    status_dir = str(status) if inside.startswith("status") else None
    # --once, so that where the check is missing the run ends instead of watching the folder.
    assert run_source(str(source), status_dir, str(logs), once=True) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --source {source} is inside the ") and err.count("\n") == 1
    assert not (logs / "kueue.watch").exists()
