"""Folders the CLI cannot write: one line naming the file and the reason, exit 2, never a traceback.

The commands run as separate processes. Root ignores file modes, so when the
tests run as root the process gives up that power (and keeps the others).
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.helpers import TWO_JOBS, cluster_queue, flavor, workload

# <linux/prctl.h> and <linux/capability.h>
PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE = 1
CAP_FOWNER = 3
CQ4 = "default: [{name: cpu, nominalQuota: 4}]"


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Path]:
    src = tmp_path / "src"
    src.mkdir()
    (src / "queues.yaml").write_text(flavor("default") + cluster_queue("q", CQ4))
    (src / "jobs.yaml").write_text(workload("a", "q", cpu="1") + workload("b", "q", cpu="1"))
    yield tmp_path
    writable(tmp_path)  # so that pytest can remove it


def read_only(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)


def writable(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)


def _file_modes_apply() -> None:
    """In the child, before exec: drop the capabilities that let root write where modes forbid it."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_FOWNER):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def kueuestream(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kueuestream", *args],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        preexec_fn=_file_modes_apply if os.geteuid() == 0 else None,
        check=False,
    )


def one_error_line(result: subprocess.CompletedProcess[str], *parts: str) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


def run_args(work: Path) -> list[str]:
    return ["run", "--source", "src", "--log-dir", "log", "--status-dir", "status", "--once"]


def test_a_read_only_log_folder(work: Path) -> None:
    assert kueuestream(work, *run_args(work)).returncode == 0
    read_only(work / "log")
    line = one_error_line(kueuestream(work, *run_args(work)), "Permission denied")
    assert line.startswith("error: cannot open the log in log: ")


def test_a_log_folder_that_cannot_be_created(work: Path) -> None:
    (work / "locked").mkdir(mode=0o555)
    args = ["run", "--source", "src", "--log-dir", "locked/log", "--once"]
    one_error_line(kueuestream(work, *args), "cannot open the log in locked/log", "Permission denied")


def test_a_read_only_status_folder_loses_nothing(work: Path) -> None:
    (work / "status").mkdir(mode=0o555)
    one_error_line(kueuestream(work, *run_args(work)), "status/default", "Permission denied")
    # Every decision is in the log; with a writable folder the next run writes every status file.
    writable(work / "status")
    assert kueuestream(work, *run_args(work)).returncode == 0
    for name in ("a", "b"):
        status = yaml.safe_load((work / "status" / "default" / f"{name}.yaml").read_text())["status"]
        assert status["admission"]["clusterQueue"] == "q"


def test_any_command_reports_an_unwritable_output_folder_in_one_line(work: Path) -> None:
    (work / "g.yaml").write_text(TWO_JOBS)
    (work / "locked").mkdir(mode=0o555)
    args = ["simulate", "g.yaml", "--out", "locked/sim", "--no-progress"]
    one_error_line(kueuestream(work, *args), "locked/sim", "Permission denied")
