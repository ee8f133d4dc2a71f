"""The embedded runtime: one process, no broker (``kueuestream run`` and ``admit``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from kueuestream.agents.admission import AdmissionHandler
from kueuestream.agents.embedded.memory_log import MemoryLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.embedded.status_files import StatusDirectory
from kueuestream.agents.embedded.stop_signals import StopRequest
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


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def _fs_problem(exc: OSError) -> str:
    """An OSError as one line: the file and the system's reason, without Python's wrapping."""
    reason = exc.strerror or str(exc)
    return f"{exc.filename}: {reason}" if exc.filename else reason


def _failure(exc: OSError | LogError) -> tuple[str, int]:
    """The line to print for an error that stopped the run, and the exit code.

    A file-system error (a folder that cannot be written, a full disk) is exit
    2, like invalid input; a log that is damaged or locked is exit 1.
    """
    if isinstance(exc, OSError):
        # The run reads only the source, whose problems are reported as errors; this was a write.
        return f"error: cannot write {_fs_problem(exc)}", 2
    if isinstance(exc.__cause__, OSError):
        return f"error: cannot write the log: {_fs_problem(exc.__cause__)}", 2
    return f"error: {exc}", 1


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
    ``status_dir`` (default ``<log_dir>/status``); neither is ever read as part
    of the source, and a source inside either is refused. With ``once`` the
    current contents are processed and the run ends; otherwise the folder is
    watched until SIGTERM or SIGINT, which end the run after the batch in hand
    with the summary line and exit 0. A file-system error ends it with one
    line on stderr and exit 2.
    """
    stream = out or sys.stdout
    source = Path(source_dir)
    if not source.is_dir():
        print(f"error: --source {source_dir}: not a directory", file=sys.stderr)
        return 2
    log_path = Path(log_dir) if log_dir else DEFAULT_DIRECTORY
    status_path = Path(status_dir) if status_dir else log_path / STATUS_SUBDIRECTORY
    for what, written in (("the log folder", log_path), ("the status folder", status_path)):
        if _inside(source, written):
            print(
                f"error: --source {source_dir} is inside {what} {written}; "
                "the folders Kueuestream writes are never read as manifests, choose another source",
                file=sys.stderr,
            )
            return 2
    try:
        log = FileLog(log_path)
    except OSError as exc:
        print(f"error: cannot open the log in {log_path}: {_fs_problem(exc)}", file=sys.stderr)
        return 2
    except LogError as exc:
        print(f"error: cannot open the log in {log_path}: {exc}", file=sys.stderr)
        return 1
    try:
        status = StatusDirectory(status_path)
    except OSError as exc:
        log.close_sync()
        print(f"error: cannot use the status folder {status_path}: {_fs_problem(exc)}", file=sys.stderr)
        return 2

    def show(line: str) -> None:
        print(line, file=stream, flush=True)

    def warn(line: str) -> None:
        print(f"warning: {line}", file=sys.stderr, flush=True)

    for lost in log.cut_on_open:
        warn(
            f"the log lost records: {lost}; those offsets are never used again, what the source "
            "still holds is read again, and `kueuestream replay` reports the loss"
        )
    code = 0
    pipeline: EmbeddedPipeline | None = None
    with StopRequest() as stop:
        try:
            pipeline = EmbeddedPipeline(
                log,
                status=status,
                on_decision=lambda d: show(describe_decision(d)),
                on_error=lambda e: show(describe_error(e)),
            )
            for note in pipeline.skipped:
                warn(f"the log lost records its agents had processed: {note}")
            # Rebuild the state from the log (and finish anything a crash cut short).
            pipeline.pump()
            folder = FolderSource(
                source, known_objects(log, pipeline.names.watch), exclude=(log_path, status_path)
            )
            while not stop.requested:
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
                stop.wait(poll_seconds)
        except (OSError, LogError) as exc:
            line, code = _failure(exc)
            print(line, file=sys.stderr, flush=True)
        finally:
            if pipeline is None:
                log.close_sync()
            else:
                stats = pipeline.stats
                stopped = f"; stopped by {stop.signal_name}" if stop.requested else ""
                show(
                    f"{stats.watch_events} watch events, {stats.admission_records} admission records, "
                    f"{stats.decisions} new decisions, {stats.errors} errors; "
                    f"status in {status.directory}, log in {log_path}{stopped}"
                )
                pipeline.close()
    return code


@dataclass(slots=True)
class Admitted:
    """What admitting a listing gives: every Workload with its status, and the errors recorded.

    Each error comes with the identity (kind, namespace, name) of the object
    whose watch event it is about, when it is about one.
    """

    workloads: list[dict[str, Any]]
    errors: list[tuple[ObjId | None, ErrorRecord]]
    admission: AdmissionHandler = field(repr=False)

    @property
    def cluster_queues(self) -> list[dict[str, Any]]:
        """Every ClusterQueue with its status counts and usage, by name (built when asked for)."""
        return self.admission.cluster_queue_objects()


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
    admission = pipeline.admission
    return Admitted(admission.workload_objects(), errors, admission)


def admit_documents(manifests: Iterable[Any], *, time_ms: int | None = None) -> list[dict[str, Any]]:
    """The Workloads of :func:`admit`, with their status."""
    return admit(manifests, time_ms=time_ms).workloads
