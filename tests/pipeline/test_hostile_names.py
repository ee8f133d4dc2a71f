"""Names that look like paths, carry NUL bytes or disagree with their watch event.

Whatever the names, ``run`` writes and removes status files only inside its
status folder, never lets two objects share one, keeps restarting over a log
that holds such names (even one written before names were checked), and
takes in an object only under its own key. Name rules are the API server's
(k8s.io/apimachinery ``ValidateObjectMetaAccessor`` with ``NameIsDNSSubdomain``
for names and ``ValidateNamespaceName`` for namespaces).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueuestream.admission.events import Action, EventType
from kueuestream.agents.cli.main import main
from kueuestream.agents.embedded.memory_log import MemoryLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.embedded.runtime import run_source
from kueuestream.agents.embedded.status_files import StatusDirectory
from kueuestream.agents.log_entries import WATCH_STREAM, AdmissionEntry, Origin, encode_entry
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.schemas import (
    ApplyOutcome,
    Cause,
    DecisionRecord,
    ErrorRecord,
    Ref,
    WatchEvent,
    WatchEventType,
)
from kueuestream.streams.topics import partition_for_shard, shard_for_root
from tests.helpers import NS, T0, cluster_queue, cpu_workload, flavor, two_trees
from tests.pipeline.embedded_run import decisions, errors, run_steps
from tests.pipeline.watch_streams import Stream

QUEUES = flavor("default") + cluster_queue("q", "default: [{name: cpu, nominalQuota: 4}]")


def workload(name: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "queueName": "q-lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}},
                }
            ],
        },
    }


def write(path: Path, *docs: str | dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n---\n".join(d if isinstance(d, str) else yaml.safe_dump(d) for d in docs))
    return path


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def strays(root: Path, *allowed: Path) -> list[str]:
    return sorted(str(p) for p in files_under(root) if not any(p.is_relative_to(a) for a in allowed))


def validate(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, list[str]]:
    code = main(["validate", str(path)])
    return code, capsys.readouterr().err.splitlines()


def status_file(status: Path, name: str, namespace: str = "default") -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((status / namespace / f"{name}.yaml").read_text())
    return loaded


def test_path_like_names_write_and_remove_nothing_outside_the_status_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reported escape: namespace "../.." with name "../../../outside/x", and an absolute namespace."""
    src, deep = tmp_path / "src", tmp_path / "a" / "b" / "c" / "d"
    status, logs = deep / "status", deep / "log"
    victim = tmp_path / "victim"
    (victim / "x.yaml").parent.mkdir()
    (victim / "x.yaml").write_text("precious\n")
    write(src / "queues.yaml", QUEUES)
    escape = write(
        src / "escape.yaml",
        workload("../../../outside/x", "../.."),
        workload("x", str(victim)),
        workload("fine"),
    )

    code, lines = validate(capsys, src)
    assert code == 2
    assert [line.split(": ")[:3] for line in lines] == [
        [f"{escape}:0", "Workload ../../../../../outside/x", "metadata.name"],
        [f"{escape}:0", "Workload ../../../../../outside/x", "metadata.namespace"],
        [f"{escape}:1", f"Workload {victim}/x", "metadata.namespace"],
    ]

    assert run_source(str(src), str(status), str(logs), once=True) == 0
    out = capsys.readouterr().out
    assert "metadata.namespace: '../..' is not valid: must be a DNS-1123 label" in out
    assert status_file(status, "fine")["status"]["admission"]["clusterQueue"] == "q"
    assert strays(tmp_path, src, status, logs, victim) == []
    # A delete of the bad objects must not reach outside either.
    escape.unlink()
    assert run_source(str(src), str(status), str(logs), once=True) == 0
    assert (victim / "x.yaml").read_text() == "precious\n"
    assert strays(tmp_path, src, status, logs, victim) == []


def test_two_workloads_never_share_a_status_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ns/"b/x" and "ns/b"/x used to map to the same status/ns/b/x.yaml."""
    src, status, logs = tmp_path / "src", tmp_path / "status", tmp_path / "log"
    write(src / "queues.yaml", QUEUES)
    write(src / "pair.yaml", workload("b/x", "team"), workload("x", "team/b"))
    code, lines = validate(capsys, src)
    assert code == 2 and len(lines) == 2
    assert run_source(str(src), str(status), str(logs), once=True) == 0
    assert files_under(status) == set()


def decision(namespace: str, name: str, action: Action = Action.ADMITTED) -> DecisionRecord:
    return DecisionRecord(
        ref=Ref(kind="Workload", namespace=namespace, name=name),
        action=action,
        status={"conditions": []},
        cause=Cause(shard="cq:q", offset=0),
        index=0,
    )


@pytest.mark.parametrize(
    ("namespace", "name"),
    [("..", "x"), ("default", "../x"), ("default", "a/b"), ("a/b", "x"), ("default", "x\x00y"), (".", "x")],
)
def test_the_status_writer_refuses_names_that_leave_its_folder(
    tmp_path: Path, namespace: str, name: str
) -> None:
    """Independent of validation: the writer itself resolves and checks every path."""
    status = StatusDirectory(tmp_path / "status")
    for action in (Action.ADMITTED, Action.DELETED):
        outcome, detail = status.apply(decision(namespace, name, action))
        assert outcome is ApplyOutcome.ERROR
        assert "status not written" in detail
    assert files_under(tmp_path) == set()


def test_the_status_writer_follows_no_link_out_of_its_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.yaml").write_text("precious\n")
    status = StatusDirectory(tmp_path / "status")
    os.symlink(outside, tmp_path / "status" / "team")
    for action in (Action.ADMITTED, Action.DELETED):
        outcome, detail = status.apply(decision("team", "x", action))
        assert outcome is ApplyOutcome.ERROR
        assert "leads outside" in detail
    assert (outside / "x.yaml").read_text() == "precious\n"
    assert sorted(p.name for p in outside.iterdir()) == ["x.yaml"]


def test_a_valid_name_too_long_for_a_file_name_still_gets_its_status(tmp_path: Path) -> None:
    name = ".".join(["a" * 63] * 3) + "." + "b" * 61  # 253 characters: a valid Workload name
    status = StatusDirectory(tmp_path / "status")
    outcome, path = status.apply(decision("default", name))
    assert outcome is ApplyOutcome.APPLIED
    written = yaml.safe_load(Path(path).read_text())
    assert written["metadata"] == {"name": name, "namespace": "default"}
    assert len(Path(path).name) < 255
    assert status.apply(decision("default", name, Action.DELETED))[0] is ApplyOutcome.APPLIED
    assert not Path(path).exists()


def test_a_nul_byte_in_a_name_is_an_error_on_every_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, status, logs = tmp_path / "src", tmp_path / "status", tmp_path / "log"
    write(src / "queues.yaml", QUEUES)
    bad = write(src / "nul.yaml", workload("a\x00b"), workload("fine"))
    assert run_source(str(src), str(status), str(logs), once=True) == 0
    assert "metadata.name: 'a\\x00b' is not valid" in capsys.readouterr().out
    assert files_under(status) == {status / "default" / "fine.yaml"}
    assert run_source(str(src), str(status), str(logs), once=True) == 0
    bad.unlink()
    assert run_source(str(src), str(status), str(logs), once=True) == 0
    assert files_under(status) == set()  # "fine" went with its manifest
    with FileLog(logs, read_only=True) as log:
        recorded = [codec.decode(r.value, ErrorRecord).error for r in log.read_sync(TopicNames().errors, 0)]
    assert any("'a\\x00b'" in e for e in recorded)


def test_a_log_written_before_names_were_checked_still_restarts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Records an older version wrote for a NUL-named Workload: a restart records an error, skips, goes on."""
    src, status, logs = tmp_path / "src", tmp_path / "status", tmp_path / "log"
    write(src / "queues.yaml", QUEUES)
    write(src / "fine.yaml", workload("fine"))
    assert run_source(str(src), str(status), str(logs), once=True) == 0
    names = TopicNames()
    bad = workload("a\x00b")
    shard = shard_for_root("q", "ClusterQueue")
    with FileLog(logs) as log:
        offset = log.end_offsets_sync(names.watch)[0]
        event = WatchEvent(
            cluster="local",
            kind="Workload",
            apiVersion="kueue.x-k8s.io/v1beta2",
            namespace="default",
            name="a\x00b",
            type=WatchEventType.ADDED,
            object=bad,
            timestamp=T0,
        )
        log.append_many_sync(names.watch, [(b"", codec.encode(event))], partition=0)
        # What ingest wrote for it before names were checked: the object, then a TICK to its shard.
        partition = partition_for_shard(shard, log.partitions_sync(names.admission))
        upsert = AdmissionEntry(
            shard=shard,
            time_ms=T0,
            type=EventType.UPSERT,
            kind="Workload",
            namespace="default",
            name="a\x00b",
            object=bad,
            origin=Origin(stream=WATCH_STREAM, offset=offset, index=0),
        )
        tick = AdmissionEntry(
            shard=shard,
            time_ms=T0,
            type=EventType.TICK,
            origin=Origin(stream=WATCH_STREAM, offset=offset, index=1),
        )
        log.append_many_sync(
            names.admission, [(shard.encode(), encode_entry(e)) for e in (upsert, tick)], partition=partition
        )
    capsys.readouterr()

    assert run_source(str(src), str(status), str(logs), once=True) == 0
    out = capsys.readouterr().out
    assert "metadata.name: 'a\\x00b' is not valid" in out
    assert files_under(status) == {status / "default" / "fine.yaml"}
    assert status_file(status, "fine")["status"]["admission"]["clusterQueue"] == "q"
    # And again, with nothing new to say.
    assert run_source(str(src), str(status), str(logs), once=True) == 0


def test_a_watch_event_is_taken_in_only_under_its_own_key() -> None:
    """Key g1, object OTHER: refused, so a later delete of g1 cannot leave OTHER behind."""
    stream = Stream()
    stream.listing(two_trees())
    pipeline = run_steps(EmbeddedPipeline(MemoryLog()), stream.steps)
    other = cpu_workload("other", "lq-solo", 1)
    mismatched = WatchEvent(
        cluster="local",
        kind="Workload",
        apiVersion="kueue.x-k8s.io/v1beta1",
        namespace=NS,
        name="g1",
        type=WatchEventType.ADDED,
        object=other,
        timestamp=T0 + 5000,
    )
    pipeline.submit_raw([codec.encode(mismatched)])
    pipeline.pump()
    [error] = [e for e in errors(pipeline.log) if "g1" in e.error]
    assert error.error == (
        "watch event for 'Workload team/g1 (kueue.x-k8s.io/v1beta1)' carries another object, "
        "'Workload team/other (kueue.x-k8s.io/v1beta1)'; an event's kind, namespace, name and apiVersion "
        "must be its object's own (kind, metadata.namespace, metadata.name, apiVersion); skipped"
    )
    decided = {d.ref.name for part in decisions(pipeline.log) for d in part}
    assert "other" not in decided and "g1" not in decided

    deleted = mismatched.model_copy(update={"type": WatchEventType.DELETED, "object": None})
    pipeline.submit_raw([codec.encode(deleted)])
    pipeline.pump()
    assert [w["metadata"]["name"] for w in pipeline.admission.workload_objects()] == []
