"""Audit replay: a recorded log reproduces its decisions byte for byte; a changed input is caught."""

from __future__ import annotations

import io
from pathlib import Path

import yaml

from kueuestream.agents.audit.replay import replay
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.log_entries import decode_entry, encode_entry
from kueuestream.streams.file_log import FileLog
from tests.helpers import cpu_queue
from tests.pipeline.embedded_run import run_steps
from tests.pipeline.watch_streams import workload_stream


def record(tmp_path: Path, n: int = 40, seed: int = 7) -> Path:
    directory = tmp_path / "recorded"
    with FileLog(directory) as log:
        run_steps(EmbeddedPipeline(log), workload_stream(n, seed).steps)
    return directory


def copy_log(source: Path, target: Path, alter: int | None = None) -> tuple[int, int]:
    """Copy every topic; the ``alter``-th admission Workload upsert asks for more cpu than any queue has."""
    where = (-1, -1)
    seen = 0
    with FileLog(source, read_only=True) as src, FileLog(target) as dst:
        for topic in src.topics_sync():
            for p in range(dst.ensure_topic_sync(topic, src.partitions_sync(topic))):
                values = []
                for r in src.read_sync(topic, p):
                    value = r.value
                    if topic == "kueue.admission" and alter is not None:
                        entry = decode_entry(value)
                        if (
                            entry.kind == "Workload"
                            and entry.object is not None
                            and entry.type.value == "Upsert"
                        ):
                            if seen == alter:
                                obj = entry.object
                                container = obj["spec"]["podSets"][0]["template"]["spec"]["containers"][0]
                                container["resources"]["requests"]["cpu"] = "100"  # fits nowhere
                                value = encode_entry(entry.model_copy(update={"object": obj}))
                                where = (p, r.offset)
                            seen += 1
                    values.append((r.key, value))
                if values:
                    dst.append_many_sync(topic, values, partition=p)
    return where


def test_replay_reproduces_every_decision(tmp_path: Path) -> None:
    out = io.StringIO()
    assert replay(str(record(tmp_path)), out=out) == 0
    text = out.getvalue()
    assert text.startswith("OK: ") and "reproduced byte for byte" in text, text


def test_an_altered_input_event_is_reported(tmp_path: Path) -> None:
    recorded = record(tmp_path)
    altered = tmp_path / "altered"
    partition, offset = copy_log(recorded, altered, alter=5)
    assert partition >= 0
    out = io.StringIO()
    assert replay(str(altered), out=out) == 1
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"MISMATCH at partition {partition}, decision #"), lines
    assert "recorded: {" in lines[1] and "replayed: " in lines[2]
    # The first decision that differs comes from the altered record or a later one.
    shard_offset = int(lines[0].split("@")[1].split(" ")[0])
    assert shard_offset >= offset


def test_an_unchanged_copy_replays_ok(tmp_path: Path) -> None:
    recorded = record(tmp_path, n=10)
    copy = tmp_path / "copy"
    copy_log(recorded, copy)
    assert replay(str(copy), out=io.StringIO()) == 0


def test_what_if_reports_the_difference(tmp_path: Path) -> None:
    recorded = record(tmp_path, n=30, seed=2)
    changes = tmp_path / "smaller.yaml"
    changes.write_text(yaml.safe_dump(cpu_queue("b1", 2, "b")))
    out = io.StringIO()
    assert replay(str(recorded), str(changes), out=out) == 0
    text = out.getvalue()
    assert text.startswith(f"what-if: {changes} against ")
    assert "No longer admitted: " in text and "ClusterQueue usage at the end of the log" in text
    later_or_lost = [
        line for line in text.splitlines() if line.startswith(("Admitted later:", "No longer admitted:"))
    ]
    assert sum(int(line.rsplit(" ", 1)[1]) for line in later_or_lost) > 0, text
    assert "b1 cpu/default: " in text, text


def test_replay_of_a_missing_log_is_an_error(tmp_path: Path) -> None:
    assert replay(str(tmp_path / "nothing"), out=io.StringIO()) == 2
