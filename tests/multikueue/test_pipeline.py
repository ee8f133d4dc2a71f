"""MultiKueue through the embedded pipeline: a federation's watch events in one file log."""

from __future__ import annotations

import io
from pathlib import Path

from kueuestream.agents.audit.replay import replay
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.streams import codec
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.schemas import ErrorRecord, MultiKueueAction, MultiKueueDecision, WatchEvent
from tests.multikueue.world import MANAGER, World

MINUTE = 60_000


def _history() -> World:
    """Dispatch, first-admit-wins, a lost worker past its timeout, the move, completion."""
    world = World(configuration={"multiKueue": {"workerLostTimeout": "1m", "gcInterval": "0s"}}).setup()
    first, second = world.submit("first"), world.submit("second")
    world.reserve(first)
    world.reserve(second)
    world.admit("w1", first)
    world.admit("w2", second)
    world.remote_job_status("w2", second, {"active": 1})
    world.connect("w1", connected=False, reason="ClientConnectionFailed", message="connection refused")
    world.advance(MINUTE)
    world.reserve(first)
    world.admit("w2", first)
    world.remote_finish("w2", second)
    world.connect("w1")
    return world


def _multikueue(log: FileLog) -> list[bytes]:
    return [r.value for r in log.read_sync("kueue.multikueue", 0)]


def _errors(log: FileLog) -> list[str]:
    return [codec.decode(r.value, ErrorRecord).error for r in log.read_sync("kueue.errors", 0)]


def _run(directory: Path, events: list[WatchEvent]) -> None:
    with FileLog(directory) as log:
        pipeline = EmbeddedPipeline(log)
        pipeline.submit(events)
        pipeline.pump()


def test_the_pipeline_records_every_dispatch_decision_and_ingest_lets_them_by(tmp_path: Path) -> None:
    world = _history()
    _run(tmp_path / "log", world.events)
    with FileLog(tmp_path / "log", read_only=True) as log:
        recorded = _multikueue(log)
        assert recorded == world.encoded()
        assert _errors(log) == []  # worker events, ClusterConnection, MultiKueue objects: no error
    actions = {codec.decode(v, MultiKueueDecision).action for v in recorded}
    made = {MultiKueueAction.CREATE_REMOTE, MultiKueueAction.FINISH, MultiKueueAction.SYNC_JOB_STATUS}
    assert made <= actions


def test_a_restart_resumes_from_the_log_without_deciding_anything_twice(tmp_path: Path) -> None:
    """A manager restart rebuilds the dispatcher from kueue.watch: the decisions already written are not
    written again, the ones not yet made are made once."""
    world = _history()
    events = world.events
    for cut in (5, len(events) // 2, len(events) - 3):
        directory = tmp_path / f"cut{cut}"
        _run(directory, events[:cut])
        _run(directory, events[cut:])
        _run(directory, [])  # and once more with nothing new
        with FileLog(directory, read_only=True) as log:
            assert _multikueue(log) == world.encoded()


def test_clock_ticks_of_the_runtime_bring_the_worker_lost_timeout(tmp_path: Path) -> None:
    """The dispatcher's wakeups are the pipeline's: advance_clock writes the ticks into kueue.watch."""
    world = World(configuration={"multiKueue": {"workerLostTimeout": "1m"}}).setup()
    key = world.submit("job1")
    world.reserve(key)
    world.admit("w1", key)
    world.connect("w1", connected=False)
    lost_at = world.now
    with FileLog(tmp_path / "log") as log:
        pipeline = EmbeddedPipeline(log)
        pipeline.submit(world.events)
        pipeline.pump()
        assert pipeline.next_wakeup_ms() == lost_at + MINUTE
        pipeline.advance_clock(lost_at + MINUTE, cluster=MANAGER)
        decisions = [codec.decode(v, MultiKueueDecision) for v in _multikueue(log)]
    retry = [d for d in decisions if d.action is MultiKueueAction.SET_CHECK_STATE and d.state == "Retry"]
    expected = (lost_at + MINUTE, 'Admitting remote lost, Previously: "Ready"')
    assert [(d.time_ms, d.message) for d in retry] == [expected]


def test_replay_reproduces_the_multikueue_decisions_and_finds_a_forged_one(tmp_path: Path) -> None:
    world = _history()
    _run(tmp_path / "log", world.events)
    out = io.StringIO()
    assert replay(str(tmp_path / "log"), out=out) == 0
    assert f"; {len(world.decisions)} MultiKueue decisions reproduced byte for byte" in out.getvalue()
    with FileLog(tmp_path / "log") as log:
        forged = MultiKueueDecision(
            time_ms=world.now, cause=0, action=MultiKueueAction.DELETE_REMOTE, cluster="w2", name="x"
        )
        log.append_many_sync("kueue.multikueue", [(b"x", codec.encode(forged))], partition=0)
    out = io.StringIO()
    assert replay(str(tmp_path / "log"), out=out) == 1
    assert f"MISMATCH at kueue.multikueue, decision #{len(world.decisions)}" in out.getvalue()


def test_an_invalid_multikueue_object_is_an_error_record_and_nothing_stops(tmp_path: Path) -> None:
    world = World().setup()
    bad = WatchEvent(
        cluster=MANAGER,
        kind="MultiKueueConfig",
        apiVersion="kueue.x-k8s.io/v1beta2",
        name="broken",
        type="ADDED",
        object={
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueConfig",
            "metadata": {"name": "broken"},
            "spec": {"clusters": ["a", "a"]},
        },
        timestamp=world.now,
    )
    key = world.submit("job1")
    world.reserve(key)
    events = [*world.events[:3], bad, *world.events[3:]]
    _run(tmp_path / "log", events)
    with FileLog(tmp_path / "log", read_only=True) as log:
        assert _errors(log) == [
            "MultiKueueConfig broken: spec.clusters[1]: must be unique: 'a' is already spec.clusters[0]"
        ]
        creates = [codec.decode(v, MultiKueueDecision) for v in _multikueue(log)]
    assert [d.cluster for d in creates if d.action is MultiKueueAction.CREATE_REMOTE] == ["w1", "w2"]
