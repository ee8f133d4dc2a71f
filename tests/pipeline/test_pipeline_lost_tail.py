"""A damaged tail in any topic of the embedded log: nothing lost, nothing decided twice, never reported OK."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from kueuestream.agents.audit.replay import replay
from kueuestream.agents.embedded.memory_log import MemoryLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.embedded.runtime import run_source
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.segment_format import FRAME
from tests.helpers import cluster_queue, flavor, workload
from tests.pipeline.checks import per_workload
from tests.pipeline.embedded_run import decisions, errors, run_steps
from tests.pipeline.watch_streams import workload_stream

CQ4 = "default: [{name: cpu, nominalQuota: 4}]"


def last_segment(log_dir: Path, topic: str, partition: int = 0) -> Path:
    return sorted((log_dir / topic / str(partition)).glob("*.log"))[-1]


def flip_last_byte(segment: Path) -> None:
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF
    segment.write_bytes(bytes(data))


def admitted(status_dir: Path, name: str) -> bool:
    path = status_dir / "default" / f"{name}.yaml"
    if not path.is_file():
        return False
    conditions = yaml.safe_load(path.read_text())["status"].get("conditions", [])
    return any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions)


def replayed(log_dir: Path) -> tuple[int, str]:
    out = io.StringIO()
    code = replay(str(log_dir), out=out)
    return code, out.getvalue()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "queues.yaml").write_text(flavor("default") + cluster_queue("q", CQ4))
    (src / "a.yaml").write_text(workload("a", "q", cpu="1"))
    return src


def test_new_events_after_a_damaged_watch_tail_are_decided(folder: Path, tmp_path: Path, capsys) -> None:
    """The reported case: flip the last byte of kueue.watch, change the folder, run again."""
    logs, status = tmp_path / "log", tmp_path / "status"
    assert run_source(str(folder), str(status), str(logs), once=True) == 0
    assert admitted(status, "a")
    flip_last_byte(last_segment(logs, "kueue.watch"))
    (folder / "b.yaml").write_text(workload("b", "q", cpu="1", created="2024-01-01T00:00:05Z"))
    capsys.readouterr()

    assert run_source(str(folder), str(status), str(logs), once=True) == 0
    captured = capsys.readouterr()
    assert "Admitted  Workload default/b" in captured.out
    assert admitted(status, "b") and admitted(status, "a")
    assert "warning: the log lost records: kueue.watch partition 0" in captured.err
    # "a" was decided once, before the damage; reading the folder again changed nothing for it.
    with FileLog(logs, read_only=True) as log:
        history = per_workload(decisions(log))
    assert [action for action, _, _ in history["default/a"]] == ["Admitted"]

    # A restart decides nothing again, and the replay does not call the log whole.
    assert run_source(str(folder), str(status), str(logs), once=True) == 0
    assert "0 new decisions" in capsys.readouterr().out
    code, text = replayed(logs)
    assert code == 1
    assert text.startswith("LOST kueue.watch partition 0, offsets 0..") and "checksum mismatch" in text
    assert "NOT OK: the log lost records (1 range above)" in text


def test_processed_offsets_beyond_a_short_tombstone_are_skipped(folder: Path, tmp_path: Path, capsys) -> None:
    """A watch batch cut inside its header: only what ingest recorded tells how far it went."""
    logs, status = tmp_path / "log", tmp_path / "status"
    assert run_source(str(folder), str(status), str(logs), once=True) == 0
    with FileLog(logs, read_only=True) as log:
        watch_end = log.end_offsets_sync("kueue.watch")[0]
    segment = last_segment(logs, "kueue.watch")
    data = segment.read_bytes()
    assert FRAME.size + FRAME.unpack_from(data, 0)[1] == len(data)  # one batch: the folder's listing
    segment.write_bytes(data[:5])
    (folder / "c.yaml").write_text(workload("c", "q", cpu="1", created="2024-01-01T00:00:09Z"))
    capsys.readouterr()

    assert run_source(str(folder), str(status), str(logs), once=True) == 0
    err = capsys.readouterr().err
    assert admitted(status, "c")
    last = watch_end - 1
    assert f"kueue.watch partition 0, offsets 0..{last}: offsets up to {last} were processed" in err
    with FileLog(logs, read_only=True) as log:
        assert min(r.offset for r in log.read_sync("kueue.watch", 0)) >= watch_end


def run_damaged(tmp_path: Path, topic: str) -> tuple[FileLog, EmbeddedPipeline, int, int]:
    """Half a workload stream, the last byte of ``topic``'s fullest partition flipped, the rest."""
    stream = workload_stream(30, seed=5)
    half = len(stream.steps) // 2
    logs = tmp_path / "log"
    with FileLog(logs) as log:
        run_steps(EmbeddedPipeline(log), stream.steps[:half])
        ends = log.end_offsets_sync(topic)
    partition = max(ends, key=lambda p: ends[p])
    flip_last_byte(last_segment(logs, topic, partition))
    log = FileLog(logs)
    (cut,) = log.cut_on_open
    assert (cut.topic, cut.partition) == (topic, partition) and cut.start < ends[partition] <= cut.end
    pipeline = run_steps(EmbeddedPipeline(log), stream.steps[half:])
    return log, pipeline, partition, cut.end


@pytest.mark.parametrize("topic", ["kueue.admission", "kueue.decisions"])
def test_a_damaged_tail_of_a_derived_topic_is_produced_again_once(tmp_path: Path, topic: str) -> None:
    """What was cut off is written again after the tombstone; decisions are as without the damage."""
    log, pipeline, partition, end = run_damaged(tmp_path, topic)
    try:
        got = per_workload(decisions(log))
        workloads = pipeline.admission.workload_objects()
        after_cut = [r.offset for r in log.read_sync(topic, partition) if r.offset >= end]
        assert after_cut, "what was cut off is written again"
        assert [r.offset for r in log.read_sync(topic, partition)][-len(after_cut) - 1] < end
    finally:
        log.close_sync()
    straight = run_steps(EmbeddedPipeline(MemoryLog()), workload_stream(30, seed=5).steps)
    assert got == per_workload(decisions(straight.log))
    assert workloads == straight.admission.workload_objects()
    code, text = replayed(tmp_path / "log")
    assert code == 1 and text.startswith(f"LOST {topic} partition {partition}, "), text


def test_a_damaged_tail_of_the_errors_topic_is_reported_again_once(tmp_path: Path) -> None:
    logs = tmp_path / "log"
    with FileLog(logs) as log:
        pipeline = EmbeddedPipeline(log)
        pipeline.submit_raw([b"not a watch event", b"{}"])
        pipeline.pump()
        before = errors(log)
    assert len(before) == 2
    flip_last_byte(last_segment(logs, "kueue.errors"))
    with FileLog(logs) as log:
        assert [e.error for e in errors(log)] == [before[0].error]
        pipeline = EmbeddedPipeline(log)
        pipeline.pump()
        assert pipeline.stats.errors == 1
        assert errors(log) == before
        assert log.read_sync("kueue.errors", 0, 1).__next__().offset >= 2
