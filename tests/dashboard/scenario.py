"""The dashboard tests' scenario: the team-queues and DRS examples, recorded in an embedded log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.streams.file_log import FileLog
from tests.helpers import load_yaml
from tests.pipeline.embedded_run import run_steps
from tests.pipeline.watch_streams import Stream

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"
FOLDERS = (EXAMPLES / "team-queues", EXAMPLES / "drs")


def manifests() -> list[dict[str, Any]]:
    return load_yaml(*sorted(p for folder in FOLDERS for p in folder.glob("*.yaml")))


def record(directory: Path) -> tuple[FileLog, EmbeddedPipeline, Stream]:
    """The examples admitted by the embedded runtime into a log at ``directory``, left open to append."""
    log = FileLog(directory)
    stream = Stream()
    stream.listing(manifests())
    pipeline = run_steps(EmbeddedPipeline(log), stream.steps)
    return log, pipeline, stream


def new_workload(name: str, namespace: str, queue: str, requests: dict[str, str]) -> dict[str, Any]:
    """A Workload of one pod asking for ``requests``, in ``namespace``'s LocalQueue ``queue``."""
    container = {"name": "c", "resources": {"requests": requests}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-11-01T12:00:00Z"},
        "spec": {
            "queueName": queue,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
        },
    }


def append(pipeline: EmbeddedPipeline, stream: Stream, manifest: dict[str, Any]) -> None:
    """Watch ``manifest`` appear, and let the runtime decide."""
    stream.event(manifest)
    run_steps(pipeline, stream.steps[-1:])
