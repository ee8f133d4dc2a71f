"""The admission state of one partition of ``kueue.admission``: an engine per shard.

Everything here is a pure function of the partition's records, read in order:
the decisions, the records it asks the runtime to append (handovers, and the
job controller's STOPPED events), and what it skips. That is what makes a
restart (rebuild by reading the partition again) and an audit replay exact.

Rules, all deterministic:

- Each record is applied as part of a batch (``Event.batch=True``); a TICK ends
  the batch and lets the engine schedule. Ingest ends every watch event (or
  every ``WatchBatch``) with a TICK to the shards it touched.
- A record whose origin (see :class:`kueuestream.agents.log_entries.Origin`) was already seen
  is a copy written again after a crash, and is skipped; so is one whose input lies
  further back than :data:`kueuestream.agents.seen_origins.HORIZON` inputs behind the
  newest of its stream.
- ``BROADCAST`` records go to every shard of the partition; a shard seen for
  the first time first gets the cluster-wide objects broadcast so far.
- Handovers (see :mod:`kueuestream.agents.ingest_routing`): on ``Out`` a shard removes the moving
  objects without deciding anything about them (no Deleted decision: they still
  exist) and sends their Workloads, with their current status, in ``In``
  records; on ``Expect`` a shard holds every later record until all ``In``
  parts have arrived, adopts the Workloads, then goes on with what it held.
- Job controller (``job_controller=True``, what the runtimes do; an audit
  replay reads these records from the log instead): an evicted Workload's job
  stops at once, so every Evicted decision asks for a STOPPED record for its
  shard, and the input that evicted asks for one TICK after them, appended to
  the log like any other record: the engine pauses after a cycle that evicted,
  and goes on once every victim has stopped. Preemptions can go
  round for ever (Kueue's scheduler lets a Workload that fits take the quota a
  preemptor is waiting for, and the preemptor evicts it again); with jobs that
  stop at once nothing else would ever happen, so once a Workload is evicted
  :data:`EVICTIONS_IN_A_ROW` times at the same moment its job is left stopping
  (the Workload keeps its quota and stays Evicted until it is deleted) and the
  loop is reported on the errors topic.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kueuestream.admission.api.config import Configuration
from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action, Decision, Event, EventType, ObjectRef
from kueuestream.agents.log_entries import (
    SHARD_HANDOVER,
    AdmissionEntry,
    Origin,
    admission_stream,
    control_kind,
    decode_entry,
    handover_manifest,
)
from kueuestream.agents.seen_origins import SeenOrigins
from kueuestream.streams.codec import DecodeError
from kueuestream.streams.schemas import Cause, DecisionRecord
from kueuestream.streams.topics import BROADCAST

# Workloads per In record: an In carries manifests with status, and Kafka's
# default message limit is 1 MiB.
WORKLOADS_PER_IN = 100

# Evictions of one Workload at one moment after which its job is left stopping.
EVICTIONS_IN_A_ROW = 10

ObjKey = tuple[str, str, str]  # kind, namespace, name


@dataclass(slots=True)
class Emitted:
    decisions: list[DecisionRecord] = field(default_factory=list)
    # Records for the runtime to append to kueue.admission (never BROADCAST).
    followups: list[AdmissionEntry] = field(default_factory=list)
    # (offset, why) of records that could not be read at all.
    unreadable: list[tuple[int, str]] = field(default_factory=list)
    # (offset, what) of problems found while applying a record, for the errors topic.
    problems: list[tuple[int, str]] = field(default_factory=list)
    # Shards whose state changed (for the runtimes' table views).
    touched: set[str] = field(default_factory=set)


@dataclass(slots=True)
class ShardState:
    engine: Engine
    waiting: str | None = None  # the handover whose In parts are awaited
    held: deque[tuple[int, AdmissionEntry]] = field(default_factory=deque)
    # Handover id -> In parts received (they may arrive before their Expect).
    arrived: dict[str, dict[int, AdmissionEntry]] = field(default_factory=dict)


class PartitionState:
    def __init__(
        self,
        partition: int,
        *,
        config: Configuration | None = None,
        job_controller: bool = True,
        overrides: Mapping[ObjKey, dict[str, Any]] | None = None,
    ) -> None:
        self.partition = partition
        self.config = config
        self.job_controller = job_controller
        self.overrides = dict(overrides or {})
        self.shards: dict[str, ShardState] = {}
        # Latest UPSERT of each cluster-wide object, in first-seen order, to seed new shards.
        self.broadcast: dict[ObjKey, AdmissionEntry] = {}
        # Per origin stream, the origins applied, to recognise copies.
        self.seen: dict[str, SeenOrigins] = {}
        self.next_offset = 0  # the offset after the last record fed
        self.records = 0  # records applied (duplicates excluded)
        # Per feed: the offset being fed, decision indexes per cause, follow-up count.
        self._offset = 0
        self._indexes: dict[tuple[str, int], int] = {}
        self._followups = 0
        # Per shard, the time of its last eviction and how often each Workload was evicted then.
        self._evictions: dict[str, tuple[int, dict[tuple[str, str], int]]] = {}

    # --- input ---------------------------------------------------------------------

    def feed(self, offset: int, raw: bytes, entry: AdmissionEntry | None = None) -> Emitted:
        """Apply the record ``raw`` at ``offset``; ``entry``, when given, is what ``raw`` decodes to."""
        out = Emitted()
        self.next_offset = offset + 1
        if entry is None:
            try:
                entry = decode_entry(raw)
            except DecodeError as exc:
                out.unreadable.append((offset, str(exc)))
                return out
        origin = entry.origin
        seen = self.seen.get(origin.stream)
        if seen is None:
            seen = self.seen[origin.stream] = SeenOrigins()
        if not seen.first_time(origin.offset, origin.index):
            return out
        self.records += 1
        self._offset, self._indexes, self._followups = offset, {}, 0
        if entry.shard == BROADCAST:
            self._remember_broadcast(entry)
            for shard in sorted(self.shards):
                self._deliver(shard, offset, entry, out)
        else:
            self._deliver(entry.shard, offset, entry, out)
        return out

    def _remember_broadcast(self, entry: AdmissionEntry) -> None:
        if entry.type == EventType.TICK:
            return
        key = (entry.kind, entry.namespace, entry.name)
        if entry.type == EventType.DELETE:
            self.broadcast.pop(key, None)
        elif entry.type == EventType.UPSERT:
            self.broadcast[key] = entry

    def _shard(self, shard: str, out: Emitted) -> ShardState:
        state = self.shards.get(shard)
        if state is None:
            state = ShardState(Engine(self.config))
            self.shards[shard] = state
            # What every shard has seen so far; as a batch, so nothing is decided yet.
            for key, manifest in sorted(self.overrides.items()):
                if key not in self.broadcast and key[0] in _SEEDED_OVERRIDES:
                    state.engine.apply(Event(EventType.UPSERT, 0, manifest=manifest, batch=True))
            for entry in self.broadcast.values():
                self._emit(shard, self._offset, state.engine.apply(self._event(entry)), out)
        return state

    def _deliver(self, shard: str, offset: int, entry: AdmissionEntry, out: Emitted) -> None:
        state = self._shard(shard, out)
        out.touched.add(shard)
        if control_kind(entry.object) == SHARD_HANDOVER and _spec(entry).get("phase") == "In":
            self._arrive(shard, state, entry, out)
        elif state.waiting is not None:
            state.held.append((offset, entry))
        else:
            self._apply(shard, state, offset, entry, out)

    def _apply(self, shard: str, state: ShardState, offset: int, entry: AdmissionEntry, out: Emitted) -> None:
        if control_kind(entry.object) == SHARD_HANDOVER:
            spec = _spec(entry)
            if spec.get("phase") == "Out":
                self._hand_out(shard, state, offset, entry, spec, out)
            elif spec.get("phase") == "Expect":
                state.waiting = entry.name
                self._try_take_in(shard, state, out)
            return
        self._emit(shard, offset, state.engine.apply(self._event(entry)), out)

    def _event(self, entry: AdmissionEntry) -> Event:
        event = entry.to_event()
        manifest = event.manifest
        if self.overrides and manifest is not None:
            key = (entry.kind, entry.namespace, entry.name)
            manifest = self.overrides.get(key, manifest)
        return Event(
            type=event.type,
            time_ms=event.time_ms,
            ref=event.ref,
            manifest=manifest,
            batch=event.type != EventType.TICK,
            # The runtime's own job controller appends its STOPPED records with an
            # origin on kueue.admission; a cluster's stops come from ingest.
            stopped_at_once=event.type == EventType.STOPPED and entry.origin.stream.startswith("admission/"),
        )

    # --- handovers -----------------------------------------------------------------

    def _hand_out(
        self,
        shard: str,
        state: ShardState,
        offset: int,
        entry: AdmissionEntry,
        spec: dict[str, Any],
        out: Emitted,
    ) -> None:
        engine = state.engine
        cqs = set(_strings(spec.get("clusterQueues")))
        lqs = set(_strings(spec.get("localQueues")))
        lqs |= {
            f"{ns}/{name}" for (ns, name), lq in engine.local_queues.items() if lq.spec.cluster_queue in cqs
        }
        named = set(_strings(spec.get("workloads")))
        moving = []
        for key in sorted(engine.workloads):
            rec = engine.workloads[key]
            ns, name = key
            if (
                f"{ns}/{rec.obj.spec.queue_name}" in lqs
                or (rec.cluster_queue and rec.cluster_queue in cqs)
                or f"Workload/{ns}/{name}" in named
                or any(
                    name.startswith(f"job-{j.split('/', 2)[2]}-") for j in named if j.startswith(f"Job/{ns}/")
                )
            ):
                moving.append(key)
        manifests = [
            {**engine.workloads[key].manifest, "status": engine.status_of(engine.workloads[key])}
            for key in moving
        ]
        time_ms = entry.time_ms
        refs = [ObjectRef("Workload", ns, name) for ns, name in moving]
        refs += [ObjectRef("LocalQueue", *lq.split("/", 1)) for lq in sorted(lqs)]
        refs += [ObjectRef("ClusterQueue", "", cq) for cq in sorted(cqs)]
        refs += [ObjectRef("Cohort", "", c) for c in _strings(spec.get("cohorts"))]
        gone = set(moving)
        for ref in refs:
            decisions = engine.apply(Event(EventType.DELETE, time_ms, ref=ref, batch=True))
            # They moved, they were not deleted: nothing to tell the applier.
            kept = [
                d
                for d in decisions
                if not (d.action == Action.DELETED and (d.ref.namespace, d.ref.name) in gone)
            ]
            self._emit(shard, offset, kept, out)
        target = str(spec.get("to", ""))
        chunks = [
            manifests[i : i + WORKLOADS_PER_IN] for i in range(0, len(manifests), WORKLOADS_PER_IN)
        ] or [[]]
        for part, chunk in enumerate(chunks):
            body = {
                "phase": "In",
                "from": shard,
                "to": target,
                "part": part,
                "parts": len(chunks),
                "workloads": chunk,
            }
            self._follow_up(
                out,
                shard=target,
                time_ms=time_ms,
                type_=EventType.UPSERT,
                kind=SHARD_HANDOVER,
                name=entry.name,
                manifest=handover_manifest(entry.name, body),
            )

    def _arrive(self, shard: str, state: ShardState, entry: AdmissionEntry, out: Emitted) -> None:
        spec = _spec(entry)
        part = spec.get("part")
        state.arrived.setdefault(entry.name, {})[part if isinstance(part, int) else 0] = entry
        self._try_take_in(shard, state, out)

    def _try_take_in(self, shard: str, state: ShardState, out: Emitted) -> None:
        handover = state.waiting
        if handover is None:
            return
        parts = state.arrived.get(handover, {})
        expected = _spec(next(iter(parts.values()))).get("parts") if parts else None
        if not isinstance(expected, int) or len(parts) < expected:
            return
        del state.arrived[handover]
        state.waiting = None
        # The moved Workloads come before the ClusterQueues and LocalQueues that follow
        # the Expect: placing them now would give pending ones a passing "LocalQueue
        # doesn't exist" status. A dirty structure defers placing to the next rebuild.
        state.engine.structure_dirty = True
        adopted: list[tuple[str, str]] = []
        for index in sorted(parts):
            entry = parts[index]
            for manifest in _spec(entry).get("workloads") or []:
                event = Event(EventType.UPSERT, entry.time_ms, manifest=manifest, batch=True)
                self._emit(shard, self._offset, state.engine.apply(event), out)
                meta = manifest.get("metadata") or {}
                adopted.append((str(meta.get("namespace", "")), str(meta.get("name", ""))))
        if self.job_controller:
            # An evicted Workload's job had not stopped yet when it moved; it stops here.
            stopped = False
            for key in adopted:
                rec = state.engine.workloads.get(key)
                if rec is not None and rec.evicting:
                    self._stop(out, shard, ObjectRef("Workload", *key), parts[0].time_ms)
                    stopped = True
            if stopped:
                self._follow_up(out, shard=shard, time_ms=parts[0].time_ms, type_=EventType.TICK)
        while state.held and state.waiting is None:
            offset, entry = state.held.popleft()
            self._apply(shard, state, offset, entry, out)

    # --- output --------------------------------------------------------------------

    def _emit(self, shard: str, offset: int, decisions: list[Decision], out: Emitted) -> None:
        if not decisions:
            return
        cause = Cause(shard=shard, offset=offset)
        index = self._indexes.get((shard, offset), 0)
        evicted = False
        for decision in decisions:
            out.decisions.append(DecisionRecord.from_decision(decision, cause, index))
            index += 1
            if self.job_controller and decision.action == Action.EVICTED and decision.ref.kind == "Workload":
                self._evicted(out, shard, decision.ref, offset)
                evicted = True
        if evicted:
            self._follow_up(out, shard=shard, time_ms=self._time_of(shard), type_=EventType.TICK)
        self._indexes[(shard, offset)] = index

    def _evicted(self, out: Emitted, shard: str, ref: ObjectRef, offset: int) -> None:
        """Stop the evicted Workload's job, unless its evictions go round in a loop."""
        now = self._time_of(shard)
        at, counts = self._evictions.get(shard, (now, {}))
        if at != now:
            counts = {}
        count = counts[ref.namespace, ref.name] = counts.get((ref.namespace, ref.name), 0) + 1
        self._evictions[shard] = (now, counts)
        if count < EVICTIONS_IN_A_ROW:
            self._stop(out, shard, ref, now)
        elif count == EVICTIONS_IN_A_ROW:
            out.problems.append(
                (
                    offset,
                    f"Workload {ref.namespace}/{ref.name}: evicted {count} times at the same moment, "
                    "each time admitted again before the Workload that preempted it: the job "
                    "controller leaves its job stopping, so it keeps its quota and stays Evicted "
                    "until it is deleted",
                )
            )

    def _time_of(self, shard: str) -> int:
        return self.shards[shard].engine.now_ms

    def _stop(self, out: Emitted, shard: str, ref: ObjectRef, time_ms: int) -> None:
        self._follow_up(
            out,
            shard=shard,
            time_ms=time_ms,
            type_=EventType.STOPPED,
            kind=ref.kind,
            namespace=ref.namespace,
            name=ref.name,
        )

    def _follow_up(
        self,
        out: Emitted,
        *,
        shard: str,
        time_ms: int,
        type_: EventType,
        kind: str = "",
        namespace: str = "",
        name: str = "",
        manifest: dict[str, Any] | None = None,
    ) -> None:
        origin = Origin(stream=admission_stream(self.partition), offset=self._offset, index=self._followups)
        self._followups += 1
        out.followups.append(
            AdmissionEntry(
                shard=shard,
                time_ms=time_ms,
                type=type_,
                kind=kind,
                namespace=namespace,
                name=name,
                object=manifest,
                origin=origin,
            )
        )

    # --- reading the state ---------------------------------------------------------

    def workload_objects(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for shard in sorted(self.shards):
            out += self.shards[shard].engine.workload_objects()
        return out

    def cluster_queue_objects(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for shard in sorted(self.shards):
            out += self.shards[shard].engine.cluster_queue_objects()
        return out


# Overrides given for a what-if that seed every new shard even if the log never names them.
_SEEDED_OVERRIDES = frozenset({"Configuration", "ResourceFlavor", "WorkloadPriorityClass", "PriorityClass"})


def _spec(entry: AdmissionEntry) -> dict[str, Any]:
    spec = (entry.object or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []
