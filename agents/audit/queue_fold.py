"""Who waits in which ClusterQueue at the end of a log, without a scheduling replay.

A queue's order needs far less than the engine's whole state: the
ClusterQueues and LocalQueues, and of each Workload its queue, priority and
queue-order time, and whether it still waits. The first come from
``kueue.admission``, read as plain JSON; whether a Workload waits, and why,
is what the engine last decided about it, in ``kueue.decisions`` (a Workload
with no decision yet keeps the status it arrived with). This reads a log of
50,000 pending Workloads about fifty times faster than rebuilding the engines
(see ``bench/pending_bench.py``).

Records are decoded with :mod:`msgspec` into just the fields the fold
reads; the rest of a manifest (its pod templates) is skipped, never built
into objects. A record that does not have the plain shape those fields
expect (a field of another type, a Workload with no ``spec.priority``) is
decoded whole with :mod:`orjson` and folded as before, so both decodings give
the same fold.

It is exact for the logs it accepts, and accepts only those where nothing
else bears on the order: :func:`fold` raises :class:`NeedsReplay` (and the
caller rebuilds the engines instead) for a log with shard handovers, Jobs,
admission checks or a retry backoff, Workloads whose priority comes from a
class, a ClusterQueue that is stopped or inactive, or an object the engine
refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
import orjson

from kueuestream.admission.pending_reasons import (
    DEACTIVATED,
    INADMISSIBLE,
    MISCONFIGURED,
    SUSPENDED,
    WAITING_FOR_PREEMPTED_WORKLOADS,
)
from kueuestream.admission.queues import OrderKey
from kueuestream.admission.status import FINISHED, QUOTA_RESERVED
from kueuestream.admission.timefmt import parse_rfc3339
from kueuestream.agents.log_entries import GROUP_VERSION
from kueuestream.streams.log import Record
from kueuestream.streams.topics import BROADCAST

# Reasons of a Workload the engine could not queue at all (``Lifecycle.place``).
NOT_QUEUED = frozenset({DEACTIVATED, MISCONFIGURED, SUSPENDED, INADMISSIBLE})
# The scheduler's message for a head waiting for its victims, whatever the reason's name.
_PREEMPTING = re.compile(r"Pending the preemption of \d+ workload\(s\)$")
_REPLAY_KINDS = frozenset({"Job", "AdmissionCheck"})


class NeedsReplay(Exception):
    """The log holds something only the engines can account for; the message says what."""


@dataclass(slots=True)
class Waiting:
    """A Workload as the queue sees it."""

    namespace: str
    name: str
    queue_name: str
    priority: int
    created_ms: int
    # The manifest's metadata, or the admission entry holding the manifest (its JSON
    # text, decoded only for the Workloads shown).
    metadata: dict[str, Any] | bytes
    active: bool
    standing: Standing

    def manifest_metadata(self) -> dict[str, Any]:
        if isinstance(self.metadata, bytes):
            obj = orjson.loads(self.metadata).get("object") or {}
            metadata: dict[str, Any] = obj.get("metadata") or {}
            return metadata
        return self.metadata


@dataclass(slots=True)
class QueueFold:
    """ClusterQueues, LocalQueues (``(namespace, name)`` -> ClusterQueue) and Workloads at the log's end."""

    cluster_queues: set[str] = field(default_factory=set)
    local_queues: dict[tuple[str, str], str] = field(default_factory=dict)
    stopped_local_queues: set[tuple[str, str]] = field(default_factory=set)
    workloads: dict[tuple[str, str], Waiting] = field(default_factory=dict)


# A Workload's place by its status: in its queue, in it and sorted first while its
# preemptions complete, in no queue, or in the queue of an inactive ClusterQueue.
QUEUED, FIRST, OUT, INACTIVE = 0, 1, 2, 3
# The place, and the reason and message of the status's (first) QuotaReserved condition.
Standing = tuple[int, str, str]


def condition(status: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


def standing(status: dict[str, Any]) -> Standing:
    """What ``status`` says of a Workload's place in its queue, and why it waits."""
    held = condition(status, QUOTA_RESERVED) or {}
    why = (str(held.get("reason") or ""), str(held.get("message") or ""))
    reserved: dict[str, Any] = {}
    for cond in status.get("conditions") or ():
        kind = cond.get("type") if isinstance(cond, dict) else None
        if kind == QUOTA_RESERVED:
            reserved = cond
        elif kind == FINISHED and cond.get("status") == "True":
            return (OUT, *why)
    reason = reserved.get("reason")
    if reserved.get("status") == "True":
        return (OUT, *why)
    if reason in NOT_QUEUED:
        if reason in (SUSPENDED, INADMISSIBLE) and "is inactive" in str(reserved.get("message")):
            # Kueue keeps the Workloads of a stopped queue queued; the engine does not.
            return (INACTIVE, *why)
        return (OUT, *why)
    message = reserved.get("message")
    # Sorted first while its preemptions complete, as the scheduler marks it.
    sticky = reason == WAITING_FOR_PREEMPTED_WORKLOADS or (
        isinstance(message, str) and "Pending the preemption" in message and bool(_PREEMPTING.search(message))
    )
    return (FIRST if sticky else QUEUED, *why)


NO_STATUS = standing({})


def queued_order(wl: Waiting) -> OrderKey | None:
    """``wl``'s place in its queue (:meth:`~kueuestream.admission.state.WorkloadRecord.order_key`),
    or None when the engine has it in no queue: not pending, not active, or kept out of every queue.
    :class:`NeedsReplay` when its queue is inactive."""
    place = wl.standing[0]
    if not wl.active or place == OUT:
        return None
    if place == INACTIVE:
        raise NeedsReplay(f"the queue of Workload {wl.namespace}/{wl.name} is inactive")
    return (place != FIRST, -wl.priority, wl.created_ms, wl.namespace, wl.name)


def _priority(manifest: dict[str, Any]) -> int | None:
    """``spec.priority``, 0 when nothing names a priority, None when a class would decide it."""
    spec = manifest.get("spec") or {}
    if isinstance(spec.get("priority"), int):
        return int(spec["priority"])
    if spec.get("priorityClassName") or spec.get("priorityClassRef"):
        return None
    for pod_set in spec.get("podSets") or []:
        pod = ((pod_set or {}).get("template") or {}).get("spec") or {}
        if pod.get("priority") is not None or pod.get("priorityClassName"):
            return None
    return 0


# An integer orjson also reads as one (it reads larger ones as floats): an int64.
_Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class _Origin(msgspec.Struct):
    stream: str
    offset: _Int
    index: _Int


class _Spec(msgspec.Struct):
    priority: _Int | None = None
    queueName: str | None = None  # the manifest's spelling
    active: bool | None = None


# A field left as its JSON text; empty when absent.
_ABSENT = msgspec.Raw()


class _Metadata(msgspec.Struct):
    creationTimestamp: Any = None


class _Object(msgspec.Struct):
    metadata: _Metadata | None = None
    spec: _Spec | None = None
    status: msgspec.Raw = _ABSENT


class _Entry(msgspec.Struct, kw_only=True):
    """The fields of a ``kueue.admission`` entry the fold reads."""

    kind: str = ""
    name: str
    namespace: str = ""
    type: str | None = None
    shard: str
    time_ms: _Int
    origin: _Origin
    object: _Object | None = None


class _Ref(msgspec.Struct):
    kind: Any = None
    name: str | None = ""
    namespace: str | None = ""


class _Decision(msgspec.Struct):
    """The fields of a ``kueue.decisions`` record the fold reads."""

    action: Any = None
    ref: _Ref | None = None
    status: msgspec.Raw = _ABSENT


_read_entry = msgspec.json.Decoder(_Entry).decode
_read_decision = msgspec.json.Decoder(_Decision).decode


def fold(admission: Sequence[Sequence[Record]], decisions: Sequence[Sequence[Record]]) -> QueueFold:
    """The queues at the end of the recorded partitions; :class:`NeedsReplay` when that takes the engines."""
    out = fold_admission(admission)
    apply_decisions(out, last_decisions(decisions))
    return out


def fold_admission(admission: Iterable[Iterable[Record]]) -> QueueFold:
    """The queues the ``kueue.admission`` partitions leave, each Workload with the status it arrived with."""
    out = QueueFold()
    for records in admission:
        _fold_partition(records, out)
    return out


# What a Workload's last decision says of it (:func:`standing`); None when it deleted the Workload.
LastDecisions = dict[tuple[str, str], Standing | None]


def last_decisions(decisions: Sequence[Sequence[Record]]) -> LastDecisions:
    """Of each Workload, what the status its last decision in the ``kueue.decisions`` partitions gives says.

    A Workload decided in several partitions takes its decision in the first.
    """
    last: LastDecisions = {}
    # One object per distinct reason or message: fewer to send from a forked child.
    texts: dict[str, str] = {}
    # Decisions repeat the same status for many Workloads: each distinct one is read once.
    said: dict[bytes, Standing] = {}
    loads = orjson.loads
    for records in decisions:
        # Newest first: only a Workload's last decision is read (decisions are keyed by Workload).
        read: set[bytes] = set()
        for record in reversed(records):
            value = record.value
            if b'"Rejected"' in value:
                d = loads(value)
                if d.get("action") == "Rejected":
                    ref = d.get("ref") or {}
                    raise NeedsReplay(
                        f"the engine refused {ref.get('kind')} {ref.get('namespace')}/{ref.get('name')}"
                    )
            if record.key:
                if record.key in read:
                    continue
                read.add(record.key)
            try:
                decision = _read_decision(value)
            except msgspec.DecodeError:
                decision = None
            if decision is None:
                d = loads(value)
                ref = d.get("ref") or {}
                kind, action, status = ref.get("kind"), d.get("action"), d.get("status")
                key = (ref.get("namespace", ""), ref.get("name", ""))
            else:
                found = decision.ref
                if found is None:
                    continue
                kind, action, status = found.kind, decision.action, decision.status
                key = (found.namespace, found.name)
            if kind != "Workload" or key in last:
                continue
            if action == "Deleted":
                last[key] = None
            elif isinstance(status, msgspec.Raw):
                text = bytes(status)
                known = said.get(text)
                if known is None:
                    known = said[text] = _interned(standing((loads(text) if text else None) or {}), texts)
                last[key] = known
            else:
                last[key] = _interned(standing(status or {}), texts)
    return last


def _interned(place: Standing, texts: dict[str, str]) -> Standing:
    _, reason, message = place
    return (place[0], texts.setdefault(reason, reason), texts.setdefault(message, message))


def apply_decisions(out: QueueFold, last: LastDecisions) -> None:
    """Give each folded Workload what its last decision says, if it has one."""
    workloads = out.workloads
    for key, said in last.items():
        wl = workloads.get(key)
        if wl is not None:
            # After a Deleted decision, a Workload of that name is a new one, with no status yet.
            wl.standing = NO_STATUS if said is None else said


def _fold_partition(records: Iterable[Record], out: QueueFold) -> None:
    seen: set[tuple[Any, Any, Any]] = set()
    # Each shard's engine clock: the latest event time it was given (broadcasts reach every shard).
    clocks: dict[str, int] = {}
    broadcast_clock = 0
    workloads = out.workloads
    read_entry = _read_entry
    for record in records:
        value = record.value
        entry: dict[str, Any] | None = None
        try:
            plain: _Entry | None = read_entry(value)
        except msgspec.DecodeError:
            plain = None
        if plain is not None:
            origin = plain.origin
            key: tuple[Any, Any, Any] = (origin.stream, origin.offset, origin.index)
            shard, time_ms, kind = plain.shard, plain.time_ms, plain.kind
        else:
            entry, key, shard, time_ms = _decoded_entry(record)
            kind = entry.get("kind", "")
        if key in seen:
            continue
        seen.add(key)
        if shard == BROADCAST:
            if time_ms > broadcast_clock:
                broadcast_clock = time_ms
            now = broadcast_clock
        else:
            now = clocks.get(shard, 0)
            if time_ms > now:
                clocks[shard] = now = time_ms
            if broadcast_clock > now:
                now = broadcast_clock
        if kind == "Workload":
            if plain is not None:
                fields = plain.object
                spec = fields.spec if fields is not None else None
                wl_key = (plain.namespace, plain.name)
                if (
                    fields is not None
                    and spec is not None
                    and spec.priority is not None
                    and plain.type == "Upsert"
                    and not fields.status
                    and wl_key not in workloads
                ):
                    # Most entries: a Workload first seen, with no status. What _put_workload does then.
                    metadata = fields.metadata
                    created = None if metadata is None else metadata.creationTimestamp
                    created_ms = parse_rfc3339(created) if isinstance(created, str) else None
                    workloads[wl_key] = Waiting(
                        wl_key[0],
                        wl_key[1],
                        spec.queueName or "",
                        spec.priority,
                        now if created_ms is None else created_ms,
                        {} if metadata is None else value,
                        spec.active is not False,
                        NO_STATUS,
                    )
                    continue
                if _plain_workload(out, plain, value, now):
                    continue
            if entry is None:
                entry = _decoded_entry(record)[0]
            _workload(
                out,
                (entry.get("namespace", ""), entry["name"]),
                entry.get("type"),
                entry.get("object") or {},
                now,
            )
            continue
        if entry is None:
            entry = _decoded_entry(record)[0]
        obj = entry.get("object") or {}
        if kind in _REPLAY_KINDS or (obj.get("apiVersion") == GROUP_VERSION and kind != "WatchBatch"):
            raise NeedsReplay(f"the log holds a {kind or obj.get('kind')}")
        elif kind == "ClusterQueue":
            _cluster_queue(out, entry["name"], obj if entry.get("type") == "Upsert" else None)
        elif kind == "LocalQueue":
            key_lq = (entry.get("namespace", ""), entry["name"])
            _local_queue(out, key_lq, obj if entry.get("type") == "Upsert" else None)


def _decoded_entry(record: Record) -> tuple[dict[str, Any], tuple[Any, Any, Any], Any, int]:
    """The whole entry, its origin, shard and time; :class:`NeedsReplay` when it cannot be read."""
    try:
        entry = orjson.loads(record.value)
        origin = entry["origin"]
        return (
            entry,
            (origin["stream"], origin["offset"], origin["index"]),
            entry["shard"],
            int(entry["time_ms"]),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise NeedsReplay(f"record {record.offset} cannot be read as JSON: {exc}") from exc


def _cluster_queue(out: QueueFold, name: str, obj: dict[str, Any] | None) -> None:
    if obj is None:
        out.cluster_queues.discard(name)
        return
    spec = obj.get("spec") or {}
    if spec.get("admissionChecks") or spec.get("admissionChecksStrategy"):
        raise NeedsReplay(f"ClusterQueue {name} has admission checks")
    if spec.get("stopPolicy", "None") != "None":
        raise NeedsReplay(f"ClusterQueue {name} is stopped")
    out.cluster_queues.add(name)


def _local_queue(out: QueueFold, key: tuple[str, str], obj: dict[str, Any] | None) -> None:
    out.stopped_local_queues.discard(key)
    if obj is None:
        out.local_queues.pop(key, None)
        return
    spec = obj.get("spec") or {}
    out.local_queues[key] = str(spec.get("clusterQueue") or "")
    if spec.get("stopPolicy", "None") != "None":
        out.stopped_local_queues.add(key)


def _plain_workload(out: QueueFold, entry: _Entry, value: bytes, now_ms: int) -> bool:
    """Fold a Workload entry (its JSON text is ``value``) from its decoded fields; False when it
    takes the whole manifest (:func:`_workload`): it has no ``spec.priority``."""
    key = (entry.namespace, entry.name)
    event = entry.type
    if event == "Delete":
        out.workloads.pop(key, None)
        return True
    if event in ("Stopped", "Finished"):
        return True  # what follows is in the decisions
    obj = entry.object
    spec = obj.spec if obj is not None else None
    if obj is None or spec is None or spec.priority is None:
        return False
    metadata = obj.metadata
    created = None if metadata is None else metadata.creationTimestamp
    status = None
    if obj.status:
        try:
            status = orjson.loads(bytes(obj.status))
        except orjson.JSONDecodeError:
            return False
    _put_workload(
        out,
        key,
        status,
        spec.priority,
        spec.queueName or "",
        {} if metadata is None else value,
        created,
        spec.active is not False,
        now_ms,
    )
    return True


def _workload(
    out: QueueFold, key: tuple[str, str], event: str | None, obj: dict[str, Any], now_ms: int
) -> None:
    if event == "Delete":
        out.workloads.pop(key, None)
        return
    if event in ("Stopped", "Finished"):
        return  # what follows is in the decisions
    spec = obj.get("spec") or {}
    given = spec.get("priority")
    metadata = obj.get("metadata") or {}
    queue_name = spec.get("queueName")
    queue_name = queue_name if type(queue_name) is str else str(queue_name or "")
    _put_workload(
        out,
        key,
        obj.get("status"),
        given if isinstance(given, int) else None,
        queue_name,
        metadata,
        metadata.get("creationTimestamp"),
        spec.get("active", True) is not False,
        now_ms,
        obj,
    )


def _put_workload(
    out: QueueFold,
    key: tuple[str, str],
    status: Any,
    given: int | None,
    queue_name: str,
    metadata: dict[str, Any] | bytes,
    created: Any,
    active: bool,
    now_ms: int,
    obj: dict[str, Any] | None = None,
) -> None:
    """Add or update a Workload; ``given`` is its ``spec.priority`` when that is an integer, and
    ``obj`` its manifest, read for a priority only when none is given."""
    if status and (status.get("requeueState") or status.get("admissionChecks")):
        raise NeedsReplay(f"Workload {key[0]}/{key[1]} waits for admission checks or a retry")
    if given is not None:
        priority = given
    else:
        named = _priority(obj or {})
        if named is None:
            raise NeedsReplay(f"Workload {key[0]}/{key[1]} takes its priority from a class")
        priority = named
    known = out.workloads.get(key)
    if known is not None:
        # As the engine updates a Workload: the priority only when given, the age never.
        known.queue_name = queue_name
        known.metadata = metadata
        known.active = active
        if given is not None:
            known.priority = priority
        return
    created_ms = parse_rfc3339(created) if isinstance(created, str) else None
    out.workloads[key] = Waiting(
        key[0],
        key[1],
        queue_name,
        priority,
        now_ms if created_ms is None else created_ms,
        metadata,
        active,
        standing(status) if status else NO_STATUS,
    )
