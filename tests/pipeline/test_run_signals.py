"""``kueuestream run`` stops cleanly on SIGTERM and SIGINT: the batch in hand done, the summary, exit 0."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cluster_queue, flavor, workload

WORKLOADS = 150


RUN = [
    sys.executable,
    "-m",
    "kueuestream",
    "run",
    "--source",
    "src",
    "--log-dir",
    "log",
    "--status-dir",
    "status",
]


def start_run(tmp_path: Path) -> subprocess.Popen[str]:
    src = tmp_path / "src"
    src.mkdir()
    (src / "queues.yaml").write_text(
        flavor("default") + cluster_queue("q", "default: [{name: cpu, nominalQuota: 64}]")
    )
    (src / "jobs.yaml").write_text(
        "".join(
            workload(f"w{i}", "q", cpu="1", created=f"2024-01-01T00:{i // 60:02d}:{i % 60:02d}Z")
            for i in range(WORKLOADS)
        )
    )
    return subprocess.Popen(
        RUN,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_in_the_middle_of_a_batch(tmp_path: Path, sig: signal.Signals) -> None:
    proc = start_run(tmp_path)
    try:
        assert proc.stdout is not None
        # The first decision line: the batch of the first poll is being written.
        first = proc.stdout.readline()
        assert first.startswith(("Admitted", "Pending")), first
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    # The whole batch was finished before stopping: every Workload has its status file.
    statuses = sorted(p.stem for p in (tmp_path / "status" / "default").glob("*.yaml"))
    assert statuses == sorted(f"w{i}" for i in range(WORKLOADS))
    summary = out.splitlines()[-1]
    assert f"status in status, log in log; stopped by {sig.name}" in summary, out[-2000:]
    # And it is all in the log: a restart has nothing new to decide.
    again = subprocess.run(
        [*RUN, "--once"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert " 0 new decisions, 0 errors;" in again.stdout.splitlines()[-1]
