"""The embedded runtime: one process, no broker (``kueuestream run`` and ``admit``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from kueuestream.agents.embedded.memory_log import MemoryLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.embedded.status_files import StatusDirectory
from kueuestream.agents.sources.folder import FolderSource, known_objects
from kueuestream.agents.sources.watch_events import ObjId, listing_events
from kueuestream.streams import codec
from kueuestream.streams.file_log import DEFAULT_DIRECTORY, FileLog
from kueuestream.streams.log import LogError
from kueuestream.streams.schemas import DecisionRecord, ErrorRecord

POLL_SECONDS = 1.0
STATUS_SUBDIRECTORY = "status"


def now_ms() -> int:
    # Event time of what a source sees: the watcher's clock is the event's timestamp.
    return time.time_ns() // 1_000_000


def describe_decision(d: DecisionRecord) -> str:
    ident = f"{d.ref.namespace}/{d.ref.name}" if d.ref.namespace else d.ref.name
    admission = d.status.get("admission") or {}
    where = ""
    if admission:
        flavors = sorted(
            {
                f"{r}={f}"
                for psa in admission.get("podSetAssignments", [])
                for r, f in psa.get("flavors", {}).items()
            }
        )
        where = f" in ClusterQueue {admission.get('clusterQueue', '')}" + (
            f" ({', '.join(flavors)})" if flavors else ""
        )
    message = d.message
    if d.action.value == "Evicted":
        # The eviction's own reason, not the reservation it ends.
        message = next(
            (c["message"] for c in d.status.get("conditions", []) if c["type"] == "Evicted"), message
        )
    message = f": {message}" if message and d.action.value not in ("Admitted", "Deleted") else ""
    return f"{d.action.value:<9} {d.ref.kind} {ident}{where}{message}"


def describe_error(e: ErrorRecord) -> str:
    where = str(e.source)
    # The loader's messages already start with the file they are about.
    return (
        f"error     {e.error}"
        if e.error.startswith(e.source.file or "\0")
        else f"error     {where}: {e.error}"
    )


def run_source(
    source_dir: str,
    status_dir: str | None = None,
    log_dir: str | None = None,
    once: bool = False,
    *,
    poll_seconds: float = POLL_SECONDS,
    out: TextIO | None = None,
) -> int:
    """``kueuestream run --source DIR``: admit continuously from a folder; 0 on a clean stop.

    The log goes to ``log_dir`` (default ``./.kueuestream``), Workload status to
    ``status_dir`` (default ``<log_dir>/status``). With ``once`` the current
    contents are processed and the run ends; otherwise the folder is watched
    until interrupted.
    """
    stream = out or sys.stdout
    source = Path(source_dir)
    if not source.is_dir():
        print(f"error: --source {source_dir}: not a directory", file=sys.stderr)
        return 2
    log_path = Path(log_dir) if log_dir else DEFAULT_DIRECTORY
    try:
        log = FileLog(log_path)
    except LogError as exc:
        print(f"error: cannot open the log in {log_path}: {exc}", file=sys.stderr)
        return 1
    status = StatusDirectory(status_dir or log_path / STATUS_SUBDIRECTORY)

    def show(line: str) -> None:
        print(line, file=stream, flush=True)

    pipeline = EmbeddedPipeline(
        log,
        status=status,
        on_decision=lambda d: show(describe_decision(d)),
        on_error=lambda e: show(describe_error(e)),
    )
    try:
        # Rebuild the state from the log (and finish anything a crash cut short).
        pipeline.pump()
        folder = FolderSource(source, known_objects(log, pipeline.names.watch))
        while True:
            poll = folder.poll(now_ms())
            pipeline.record_errors(poll.errors)
            if poll.events:
                pipeline.submit(poll.events)
                pipeline.pump()
            if once:
                # What is there now, to quiescence: deferred retries run at their due times.
                pipeline.advance_clock()
                break
            pipeline.advance_clock(now_ms())
            time.sleep(poll_seconds)
    except KeyboardInterrupt:
        pass
    finally:
        stats = pipeline.stats
        show(
            f"{stats.watch_events} watch events, {stats.admission_records} admission records, "
            f"{stats.decisions} new decisions, {stats.errors} errors; "
            f"status in {status.directory}, log in {log_path}"
        )
        pipeline.close()
    return 0


@dataclass(slots=True)
class Admitted:
    """What admitting a listing gives: every Workload with its status, and the errors recorded.

    Each error comes with the identity (kind, namespace, name) of the object
    whose watch event it is about, when it is about one.
    """

    workloads: list[dict[str, Any]]
    errors: list[tuple[ObjId | None, ErrorRecord]]


def admit(manifests: Iterable[Any], *, time_ms: int | None = None) -> Admitted:
    """Admit a set of manifests through the pipeline's handlers, in memory.

    The manifests are one listing (one batch), admitted to quiescence with the
    runtime playing the job controller, exactly as ``run --once`` would, and
    the errors are those ``run`` would record for them. Manifests that cannot
    even be identified (no kind, no name) are skipped; ``kueuestream validate``
    reports them.
    """
    timestamp = now_ms() if time_ms is None else time_ms
    events, _ = listing_events(manifests, timestamp)
    log = MemoryLog()
    pipeline = EmbeddedPipeline(log)
    pipeline.submit(events)
    # The log holds the events now; keep their keys only, not a second copy of every object.
    keys = [(e.kind, e.namespace, e.name) for e in events]
    del events
    pipeline.pump()
    pipeline.advance_clock()
    errors: list[tuple[ObjId | None, ErrorRecord]] = []
    for record in log.read_sync(pipeline.names.errors, 0):
        error = codec.decode(record.value, ErrorRecord)
        offset = error.source.offset
        about = None
        if error.source.topic == pipeline.names.watch and offset is not None and offset < len(keys):
            about = keys[offset]
        errors.append((about, error))
    return Admitted(pipeline.admission.workload_objects(), errors)


def admit_documents(manifests: Iterable[Any], *, time_ms: int | None = None) -> list[dict[str, Any]]:
    """The Workloads of :func:`admit`, with their status."""
    return admit(manifests, time_ms=time_ms).workloads
