"""The launcher of Faust worker processes: what it runs, when it calls a group settled, and how a
worker that dies while starting is reported (the Kafka tests use it with a broker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kueuestream.agents.cli.main import build_parser
from kueuestream.agents.faust_worker.processes import WorkerProcesses, WorkerStartError, group_settled

READY = "[2026-01-01 00:00:01] Worker ready\n"
REVOKED = "[2026-01-01 00:00:00] Revoking previously assigned partitions set()\n"


@pytest.mark.parametrize("clock", [True, False])
def test_the_command_line_is_one_the_cli_accepts(tmp_path: Path, clock: bool) -> None:
    workers = WorkerProcesses("127.0.0.1:9092", 2, tmp_path, app_id="ks-a", topic_prefix="t.", clock=clock)
    command = workers.command(1)
    assert command[1:3] == ["-m", "kueuestream"]
    args = build_parser().parse_args(command[3:])
    assert (args.command, args.broker, args.app_id, args.topic_prefix) == (
        "worker",
        "127.0.0.1:9092",
        "ks-a",
        "t.",
    )
    assert args.datadir == str(tmp_path / "faust-1")
    assert args.no_clock is not clock


def test_isolated_workers_never_share_an_app_or_topics(tmp_path: Path) -> None:
    a = WorkerProcesses.isolated("127.0.0.1:9092", 1, tmp_path, tag="x")
    b = WorkerProcesses.isolated("127.0.0.1:9092", 1, tmp_path, tag="x")
    assert a.app_id != b.app_id and a.prefix != b.prefix
    assert a.app_id.endswith("x") and a.prefix.endswith("x.")


@pytest.mark.parametrize(
    ("logs", "settled"),
    [
        ([REVOKED + READY], True),
        ([REVOKED + READY, REVOKED + READY], True),
        # Joined but not yet given its partitions back after the rebalance.
        ([REVOKED + READY + REVOKED], False),
        # One worker settled, the other has not joined the group yet.
        ([REVOKED + READY, ""], False),
        ([READY], False),
    ],
)
def test_a_group_is_settled_when_every_worker_is_ready_after_its_last_rebalance(
    logs: list[str], settled: bool
) -> None:
    assert group_settled(logs) is settled


def test_a_worker_that_exits_while_starting_fails_the_wait_with_its_log(tmp_path: Path) -> None:
    workers = WorkerProcesses("kafka://", 1, tmp_path, app_id="ks-broken", topic_prefix="t.", clock=False)
    workers.start(0)
    try:
        # A broker URL that does not parse is a usage error: exit 2, one line.
        with pytest.raises(WorkerStartError, match=r"^worker 0 of ks-broken exited with code 2:") as failed:
            workers.wait_settled(timeout=120)
        assert "broker URL 'kafka://'" in str(failed.value)
        assert workers.alive() == []
    finally:
        workers.stop()
    with pytest.raises(ValueError, match="worker 0 is not running"):
        workers.kill(0)
