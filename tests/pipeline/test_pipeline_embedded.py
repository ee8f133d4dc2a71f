"""The embedded runtime end to end: folder in, status files out, log kept; restarts and crashes."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
import yaml

from kueuestream.agents.embedded.memory_log import MemoryLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.embedded.runtime import admit_documents, run_source
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams.file_log import FileLog
from tests.helpers import T0, cluster_queue, docs_of, flavor, run, two_trees, workload
from tests.pipeline.checks import Limits, assert_exactly_once, check_limits
from tests.pipeline.embedded_run import decisions, raw_topic, run_steps
from tests.pipeline.watch_streams import workload_stream

CQ4 = "default: [{name: cpu, nominalQuota: 4}]"
PREEMPTING = "  preemption: {withinClusterQueue: LowerPriority}"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def status_of(status_dir: Path, name: str, namespace: str = "default") -> dict:
    doc = yaml.safe_load((status_dir / namespace / f"{name}.yaml").read_text())
    assert doc["kind"] == "Workload" and doc["metadata"] == {"name": name, "namespace": namespace}
    return doc["status"]


def conditions(status: dict) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status.get("conditions", [])}


def log_sizes(log_dir: Path) -> dict[str, int]:
    with FileLog(log_dir, read_only=True) as log:
        return {t: sum(log.end_offsets_sync(t).values()) for t in log.topics_sync()}


def test_run_once_writes_status_files_and_a_restart_decides_nothing_twice(tmp_path: Path, capsys) -> None:
    src, logs, status = tmp_path / "src", tmp_path / "log", tmp_path / "status"
    write(src / "queues.yaml", flavor("default") + cluster_queue("q", CQ4, spec_extra=PREEMPTING))
    write(src / "jobs/a.yaml", workload("a", "q", cpu="2", priority=1))
    write(src / "jobs/b.yaml", workload("b", "q", cpu="2", priority=1, created="2024-01-01T00:00:01Z"))
    assert run_source(str(src), str(status), str(logs), once=True) == 0
    assert conditions(status_of(status, "a")) == {"QuotaReserved": "True", "Admitted": "True"}
    assert status_of(status, "b")["admission"]["clusterQueue"] == "q"
    first = log_sizes(logs)
    assert first["kueue.decisions"] == 2

    # Nothing changed: the restart rebuilds from the log and writes nothing new.
    assert run_source(str(src), str(status), str(logs), once=True) == 0
    assert log_sizes(logs) == first
    assert "0 new decisions" in capsys.readouterr().out

    # A new file is a watch event: "high" preempts "b", whose job stops at once (the runtime
    # plays the job controller), and "high" is admitted, all in one run.
    write(src / "jobs/high.yaml", workload("high", "q", cpu="2", priority=10, created="2024-01-01T01:00:00Z"))
    assert run_source(str(src), str(status), str(logs), once=True) == 0
    assert conditions(status_of(status, "high"))["Admitted"] == "True"
    b = conditions(status_of(status, "b"))
    assert (b["QuotaReserved"], b["Evicted"], b["Preempted"], b["Requeued"]) == (
        "False",
        "True",
        "True",
        "True",
    )
    out = capsys.readouterr().out
    assert "Evicted   Workload default/b" in out and "Admitted  Workload default/high" in out

    # A deleted file deletes its objects: "high" goes, "b" comes back.
    (src / "jobs/high.yaml").unlink()
    assert run_source(str(src), str(status), str(logs), once=True) == 0
    assert not (status / "default" / "high.yaml").exists()
    assert conditions(status_of(status, "b"))["QuotaReserved"] == "True"
    with FileLog(logs, read_only=True) as log:
        assert_exactly_once(decisions(log))


def test_a_crash_at_any_point_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """Cut the log after every prefix of what one run wrote; a restart completes it exactly."""
    stream = workload_stream(25, seed=3)
    full = run_steps(EmbeddedPipeline(MemoryLog()), stream.steps).log
    names = TopicNames()
    reference = {t: raw_topic(full, t) for t in (names.admission, names.decisions)}
    watch = [r.value for r in full.read_sync(names.watch, 0)]
    total_admission = sum(len(p) for p in reference[names.admission])
    for keep in (0.0, 0.3, 0.6, 0.9):
        cut = MemoryLog()
        cut.append_many_sync(names.watch, [(b"", v) for v in watch], partition=0)
        for topic, parts in reference.items():
            cut.ensure_topic_sync(topic, len(parts))
            for p, values in enumerate(parts):
                # A crash leaves a prefix of each partition.
                n = int(len(values) * keep)
                if n:
                    cut.append_many_sync(topic, [(b"", v) for v in values[:n]], partition=p)
        EmbeddedPipeline(cut).pump()
        for topic, parts in reference.items():
            assert raw_topic(cut, topic) == parts, f"{topic} differs after a restart from {keep:.0%}"
    assert total_admission > 80


def test_restart_from_the_file_log_continues_without_duplicates(tmp_path: Path) -> None:
    stream = workload_stream(30, seed=5)
    half = len(stream.steps) // 2
    with FileLog(tmp_path / "log") as log:
        run_steps(EmbeddedPipeline(log), stream.steps[:half])
    with FileLog(tmp_path / "log") as log:
        run_steps(EmbeddedPipeline(log), stream.steps[half:])
        restarted = {t: raw_topic(log, t) for t in ("kueue.admission", "kueue.decisions")}
    straight = run_steps(EmbeddedPipeline(MemoryLog()), stream.steps).log
    assert restarted == {t: raw_topic(straight, t) for t in ("kueue.admission", "kueue.decisions")}


def test_admit_documents_matches_the_engine_driven_directly() -> None:
    text = (
        flavor("default")
        + flavor("spot")
        + cluster_queue("q", CQ4, spec_extra=PREEMPTING)
        + workload("low-old", "q", cpu="2", priority=1)
        + workload("low-new", "q", cpu="2", priority=1, created="2024-01-01T00:00:01Z")
        + cluster_queue(
            "r", "default: [{name: cpu, nominalQuota: 4}]\nspot: [{name: cpu, nominalQuota: 2}]", "co"
        )
        + cluster_queue("s", CQ4, cohort="co")
        + workload("w1", "r", cpu="6")
        + workload("w2", "s", cpu="3")
        + workload("w3", "r", cpu="2", created="2024-01-01T00:00:09Z")
    )
    got = admit_documents(docs_of(text), time_ms=T0)
    want = run(text).engine.workload_objects()
    assert orjson.dumps(got, option=orjson.OPT_SORT_KEYS) == orjson.dumps(want, option=orjson.OPT_SORT_KEYS)


def test_a_workload_stream_stays_within_every_limit() -> None:
    stream = workload_stream(60, seed=11)
    log = run_steps(EmbeddedPipeline(MemoryLog()), stream.steps).log
    parts = decisions(log)
    assert_exactly_once(parts)
    tracker = check_limits(Limits.of(two_trees()), parts)
    assert tracker.checked > 60


@pytest.fixture
def example_dir(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    write(src / "all.yaml", flavor("default") + cluster_queue("q", CQ4) + workload("a", "q", cpu="1"))
    return src


def test_run_uses_the_default_status_directory_under_the_log(example_dir: Path, tmp_path: Path) -> None:
    assert run_source(str(example_dir), None, str(tmp_path / "log"), once=True) == 0
    assert (tmp_path / "log" / "status" / "default" / "a.yaml").is_file()
    shutil.rmtree(tmp_path / "log" / "status")
    # Status files are derived: a restart writes them again from the log.
    assert run_source(str(example_dir), None, str(tmp_path / "log"), once=True) == 0
    assert (tmp_path / "log" / "status" / "default" / "a.yaml").is_file()
