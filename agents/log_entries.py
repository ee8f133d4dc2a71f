"""What the agents add to the records of :mod:`kueuestream.streams.schemas`.

``AdmissionEntry`` is ``kueuestream.streams.schemas.AdmissionRecord`` plus ``origin``: which
input produced it (the watch event at an offset, or an admission record of some
partition for the records the runtime writes itself). Writers outside a
transaction may send a record twice after a crash (at-least-once); the origin
makes the copy recognisable, so the admission agent applies each input once and
the embedded runtime never appends what is already there.

Control records are ordinary-looking manifests of our own API group, so they
travel through the same topics and schemas and an engine that does not know
them ignores them (``kueuestream.admission.decode`` calls unknown kinds irrelevant):

- ``WatchBatch`` (in ``kueue.watch``), named ``begin`` or ``end``: the events
  between them are one batch (an initial listing, a folder) and scheduling waits
  for its end, so that the order of a listing decides nothing.
- ``WatchProgress`` (in ``kueue.watch``), named after a kind: how far a
  Kubernetes watcher has seen that kind (``resourceVersion``), written after a
  list and on bookmarks so that a restarted watcher resumes from there.
  Ingest passes it by.
- ``ShardHandover`` (in ``kueue.admission``), phases ``Out``, ``Expect`` and
  ``In``: moves ClusterQueues, LocalQueues and their Workloads from one shard to
  another when a cohort tree changes (see :mod:`kueuestream.agents.admission_shards`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from kueuestream.streams.codec import decode, encode
from kueuestream.streams.schemas import AdmissionRecord, NonNegativeInt, WatchEvent, WatchEventType

GROUP_VERSION = "kueuestream.io/v1alpha1"
WATCH_BATCH = "WatchBatch"
WATCH_PROGRESS = "WatchProgress"
SHARD_HANDOVER = "ShardHandover"
BATCH_BEGIN = "begin"
BATCH_END = "end"
# Time passing with nothing else happening: every shard gets a TICK at that time,
# so work the engines deferred (Kueue's once-a-second requeue) gets its turn.
CLOCK_TICK = "tick"

# Origin streams: the watch log, or the admission partition whose agent wrote the record.
WATCH_STREAM = "watch"


def admission_stream(partition: int) -> str:
    return f"admission/{partition}"


class Origin(BaseModel):
    """The input that produced a record: ``index`` counts the records one input produced."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stream: str
    offset: NonNegativeInt
    index: NonNegativeInt

    def key(self) -> tuple[int, int]:
        return (self.offset, self.index)


class AdmissionEntry(AdmissionRecord):
    origin: Origin


def encode_entry(entry: AdmissionEntry) -> bytes:
    return encode(entry)


def decode_entry(raw: bytes) -> AdmissionEntry:
    return decode(raw, AdmissionEntry)


# --- control manifests ------------------------------------------------------------


def _control(kind: str, name: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": GROUP_VERSION, "kind": kind, "metadata": {"name": name}}
    if spec is not None:
        out["spec"] = spec
    return out


def control_kind(manifest: dict[str, Any] | None) -> str:
    """The kind of one of our control manifests, or "" for anything else."""
    if isinstance(manifest, dict) and manifest.get("apiVersion") == GROUP_VERSION:
        kind = manifest.get("kind")
        if kind in (WATCH_BATCH, WATCH_PROGRESS, SHARD_HANDOVER):
            return str(kind)
    return ""


def batch_marker(edge: str, cluster: str, timestamp: int) -> WatchEvent:
    """The watch event that opens (``begin``) or closes (``end``) a batch, or a clock ``tick``."""
    return _control_event(WATCH_BATCH, edge, cluster, timestamp)


def progress_marker(cluster: str, kind: str, resource_version: str, timestamp: int) -> WatchEvent:
    """The watch event saying that the watcher has seen ``kind`` up to ``resource_version``."""
    return _control_event(WATCH_PROGRESS, kind, cluster, timestamp, resource_version)


def _control_event(
    control: str, name: str, cluster: str, timestamp: int, resource_version: str = ""
) -> WatchEvent:
    return WatchEvent(
        cluster=cluster,
        kind=control,
        apiVersion=GROUP_VERSION,
        name=name,
        type=WatchEventType.MODIFIED,
        resourceVersion=resource_version,
        object=_control(control, name),
        timestamp=timestamp,
    )


def handover_manifest(handover_id: str, spec: dict[str, Any]) -> dict[str, Any]:
    return _control(SHARD_HANDOVER, handover_id, spec)
