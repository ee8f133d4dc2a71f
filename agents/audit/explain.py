"""``kueuestream explain NAMESPACE/NAME LOG``: one Workload's history, read from the log.

The timeline is read, not recomputed: the Workload's creation and LocalQueue
from its input in ``kueue.admission`` and its decisions from
``kueue.decisions``, each carrying the status Kueue would write and, where a
scheduling cycle made it, the decision trace (``admission/trace.py``). A
decision is written only when the Workload's status changes, so a stretch of
waiting for one reason is one entry; its cycle range runs from the cycle
that set the reason to the cycle before the next entry's (for the last
entry, to the last cycle the shard recorded).

``wouldAdmit`` comes from the last trace of a Workload still waiting: for
each flavor whose only problem is quota, how much more nominal quota its
ClusterQueue needs per resource for the first pod set that does not fit, and
the running Workloads whose finishing would let it in.

A log that lost records in ``kueue.admission`` or ``kueue.decisions`` (a
damaged embedded log), or a record of this Workload that cannot be read, is
an error: the timeline would have a hole.
"""

from __future__ import annotations

import asyncio
import difflib
import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kueuestream.admission.events import Action, EventType
from kueuestream.admission.timefmt import rfc3339
from kueuestream.agents.audit.replay import open_log
from kueuestream.agents.log_entries import decode_entry
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.codec import DecodeError
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.kafka_settings import KafkaSettings
from kueuestream.streams.log import Log, Record
from kueuestream.streams.schemas import DecisionRecord
from kueuestream.streams.topics import decision_key, partition_for_shard


class ExplainError(Exception):
    """``explain`` cannot answer; the message says why."""


class UnknownWorkload(ExplainError):
    """The log has no Workload of that name; ``closest`` holds the nearest names it has."""

    def __init__(self, namespace: str, name: str, closest: Sequence[str]) -> None:
        self.closest = list(closest)
        hint = f"; closest: {', '.join(self.closest)}" if self.closest else ""
        super().__init__(f"Workload {namespace}/{name}: not in the log{hint}")


class DamagedLog(ExplainError):
    """The log lost records, or holds one that cannot be read, so the timeline would be wrong."""


@dataclass(slots=True)
class _Found:
    inputs: list[tuple[int, str, dict[str, Any] | None]] = field(default_factory=list)
    decisions: list[DecisionRecord] = field(default_factory=list)
    # The last cycle each shard recorded in a trace.
    last_cycle: dict[str, int] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)


def explain_json(
    log: str, namespace: str, name: str, *, prefix: str = "", kafka: KafkaSettings | None = None
) -> dict[str, object]:
    """The Workload's ``{"workload", "timeline", "wouldAdmit"}`` from LOG (a folder or ``kafka://``).

    Raises :class:`UnknownWorkload` for a name the log does not have and
    :class:`DamagedLog` for a log with lost or unreadable records; a log that
    cannot be opened raises ``LogError`` or ``OSError``.
    """
    found = asyncio.run(_read(log, TopicNames(prefix), namespace, name, kafka))
    if not found.inputs and not found.decisions:
        wanted = f"{namespace}/{name}"
        raise UnknownWorkload(namespace, name, closest(wanted, found.names))
    timeline = _timeline(found)
    return {
        "workload": {"namespace": namespace, "name": name},
        "timeline": timeline,
        "wouldAdmit": would_admit(timeline),
    }


def closest(wanted: str, names: Iterable[str], n: int = 3) -> list[str]:
    """The ``n`` names most like ``wanted`` (difflib's ratio), however unlike they are.

    The ratio is computed for a short list only: the names sharing the longest
    prefix with ``wanted`` and those sharing the most pairs of adjacent
    characters with it, so that a log of many names answers fast.
    """
    pool = sorted(set(names))
    grams = _pairs(wanted)
    by_prefix = heapq.nlargest(50, pool, key=lambda x: _prefix_length(wanted, x))
    by_pairs = heapq.nlargest(50, pool, key=lambda x: len(grams & _pairs(x)))
    return difflib.get_close_matches(wanted, sorted(set(by_prefix + by_pairs)), n=n, cutoff=0.0)


def _pairs(text: str) -> set[str]:
    return {text[i : i + 2] for i in range(len(text) - 1)}


def _prefix_length(a: str, b: str) -> int:
    length = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        length += 1
    return length


async def _read(
    spec: str, names: TopicNames, namespace: str, name: str, kafka: KafkaSettings | None
) -> _Found:
    found = _Found()
    async with open_log(spec, kafka) as log:
        if isinstance(log, FileLog):
            lost = [gap for gap in log.lost_sync() if gap.topic in (names.admission, names.decisions)]
            if lost:
                raise DamagedLog(f"the log lost records, so the timeline would be incomplete: {lost[0]}")
        topics = await log.topics()
        if names.decisions in topics:
            await _read_decisions(log, names.decisions, namespace, name, found)
        if names.admission in topics:
            if found.decisions:
                await _read_input_before(log, names.admission, found.decisions[0], found)
            else:
                await _read_inputs(log, names.admission, namespace, name, found)
    return found


async def _records(
    log: Log, topic: str, partition: int, low: int = 0, high: int | None = None
) -> list[Record]:
    """Records ``[low, high)`` of a partition; an embedded log's read at once, with nothing to yield to."""
    if isinstance(log, FileLog):
        return list(log.read_sync(topic, partition, low, until=high))
    return [r async for r in log.read(topic, partition, low, until=high)]


async def _read_input_before(log: Log, topic: str, first: DecisionRecord, found: _Found) -> None:
    """The Workload's last input at or before the cause of its first decision.

    It is in the partition of that decision's shard; windows of growing size
    are read backwards from the cause, so a long log is not read from its start.
    """
    partition = partition_for_shard(first.cause.shard, await log.partitions(topic))
    ref = first.ref
    needle = f'"name":"{ref.name}"'.encode()
    high, width = first.cause.offset + 1, 64
    while high > 0:
        low = max(0, high - width)
        window = await _records(log, topic, partition, low, high)
        for record in reversed(window):
            if needle not in record.value:
                continue
            try:
                entry = decode_entry(record.value)
            except DecodeError as exc:
                raise DamagedLog(f"{topic} partition {partition} offset {record.offset}: {exc}") from exc
            if (entry.kind, entry.namespace, entry.name) == ("Workload", ref.namespace, ref.name) and (
                entry.type is EventType.UPSERT and not entry.origin.stream.startswith("admission/")
            ):
                found.inputs.append((entry.time_ms, entry.type.value, entry.object))
                return
        high, width = low, width * 4


async def _read_inputs(log: Log, topic: str, namespace: str, name: str, found: _Found) -> None:
    needle = f'"name":"{name}"'.encode()
    for p in range(await log.partitions(topic)):
        for record in await _records(log, topic, p):
            if needle not in record.value:
                continue
            try:
                entry = decode_entry(record.value)
            except DecodeError as exc:
                raise DamagedLog(f"{topic} partition {p} offset {record.offset}: {exc}") from exc
            if entry.kind != "Workload":
                continue
            found.names.add(f"{entry.namespace}/{entry.name}")
            if (entry.namespace, entry.name) == (namespace, name) and entry.type is EventType.UPSERT:
                found.inputs.append((entry.time_ms, entry.type.value, entry.object))
                return


async def _read_decisions(log: Log, topic: str, namespace: str, name: str, found: _Found) -> None:
    key = decision_key(namespace, name)
    for p in range(await log.partitions(topic)):
        records = await _records(log, topic, p)
        shards: set[str] = set()
        for record in records:
            if record.key and not record.key.startswith(b"/"):
                found.names.add(record.key.decode(errors="replace"))
            if record.key != key:
                continue
            try:
                decision = codec.decode(record.value, DecisionRecord)
            except DecodeError as exc:
                raise DamagedLog(f"{topic} partition {p} offset {record.offset}: {exc}") from exc
            if decision.ref.kind != "Workload":
                continue
            found.decisions.append(decision)
            shards.add(decision.cause.shard)
        # The shard's last recorded cycle: the newest trace of the partition from that shard.
        for record in reversed(records):
            if not shards:
                break
            if b'"trace":{' not in record.value:
                continue
            try:
                decision = codec.decode(record.value, DecisionRecord)
            except DecodeError:
                continue
            if decision.cause.shard in shards and decision.trace is not None:
                found.last_cycle[decision.cause.shard] = int(decision.trace.get("cycle", 0))
                shards.discard(decision.cause.shard)


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    for cond in status.get("conditions", []):
        if cond.get("type") == kind:
            return dict(cond)
    return {}


_EVENTS = {
    Action.PENDING: ("Waiting", "QuotaReserved"),
    Action.QUOTA_RESERVED: ("QuotaReserved", "QuotaReserved"),
    Action.ADMITTED: ("Admitted", "Admitted"),
    Action.EVICTED: ("Evicted", "Evicted"),
    Action.REQUEUED: ("Requeued", "Requeued"),
    Action.FINISHED: ("Finished", "Finished"),
    Action.DELETED: ("Deleted", ""),
    Action.REJECTED: ("Rejected", ""),
}


def _decision_entry(decision: DecisionRecord) -> dict[str, Any]:
    event, condition = _EVENTS.get(decision.action, (decision.action.value, ""))
    cond = _condition(decision.status, condition) if condition else {}
    if decision.action == Action.REQUEUED and not cond:
        cond = _condition(decision.status, "QuotaReserved")
    entry: dict[str, Any] = {
        "event": event,
        "reason": cond.get("reason", ""),
        "message": cond.get("message", decision.message),
        "time": cond.get("lastTransitionTime", ""),
    }
    trace = decision.trace or {}
    if decision.action == Action.EVICTED and trace.get("outcome") == "Preempted":
        entry["event"] = "Preempted"
        entry["preemptor"] = trace["preemptor"]
        entry["policy"] = trace["policy"]
    admission = decision.status.get("admission")
    if admission and decision.action in (Action.ADMITTED, Action.QUOTA_RESERVED):
        entry["clusterQueue"] = admission.get("clusterQueue", "")
        entry["podSets"] = [
            {
                "name": ps.get("name", ""),
                "flavors": ps.get("flavors", {}),
                "resourceUsage": ps.get("resourceUsage", {}),
            }
            for ps in admission.get("podSetAssignments", [])
        ]
        entry["borrowing"] = int(trace.get("borrowing", 0))
        if trace.get("resumedAfter"):
            entry["resumedAfter"] = trace["resumedAfter"]
    if trace.get("victims"):
        entry["victims"] = trace["victims"]
    if "cycle" in trace:
        entry["cycles"] = {"from": int(trace["cycle"]), "to": int(trace["cycle"])}
    if trace:
        entry["trace"] = trace
        short = shortages(trace)
        if short:
            entry["short"] = short
    entry["shard"] = decision.cause.shard
    return entry


def shortages(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """Every flavor and resource the trace found short of quota, with the numbers and the level."""
    out: list[dict[str, Any]] = []
    for ps in trace.get("podSets", []):
        for short in ps.get("short", []):
            flavor = ps.get("flavors", {}).get(short["resource"], "")
            out.append({"podSet": ps["name"], "flavor": flavor, **short})
        for group in ps.get("resourceGroups", []):
            for tried in group["flavors"]:
                for res in tried.get("resources", []):
                    if not res.get("fits", True):
                        out.append({"podSet": ps["name"], "flavor": tried["flavor"], **res})
    return out


def _timeline(found: _Found) -> list[dict[str, Any]]:
    timeline: list[dict[str, Any]] = []
    queue = ""
    for time_ms, type_, obj in found.inputs:
        if type_ == EventType.UPSERT.value and obj is not None and not timeline:
            meta = obj.get("metadata", {})
            spec = obj.get("spec", {})
            queue = str(spec.get("queueName", ""))
            timeline.append(
                {
                    "event": "Created",
                    "reason": "",
                    "message": f"Workload {meta.get('namespace', '')}/{meta.get('name', '')} created",
                    "time": str(meta.get("creationTimestamp") or rfc3339(time_ms)),
                }
            )
    decisions = [_decision_entry(d) for d in found.decisions]
    cluster_queue = next(
        (
            str(e.get("clusterQueue") or e.get("trace", {}).get("clusterQueue", ""))
            for e in decisions
            if e.get("trace")
        ),
        "",
    )
    if timeline:
        timeline.append(
            {
                "event": "Queued",
                "reason": "",
                "message": f"queued in LocalQueue {queue}"
                + (f", ClusterQueue {cluster_queue}" if cluster_queue else ""),
                "time": timeline[0]["time"],
                "localQueue": queue,
                "clusterQueue": cluster_queue,
            }
        )
    # Each stretch runs until the next entry of the same shard starts.
    for i, entry in enumerate(decisions):
        cycles = entry.get("cycles")
        if cycles is None:
            continue
        nxt = next((d["cycles"]["from"] for d in decisions[i + 1 :] if "cycles" in d), None)
        if nxt is not None:
            cycles["to"] = max(cycles["from"], nxt - 1) if entry["event"] == "Waiting" else cycles["from"]
        elif entry["event"] == "Waiting":
            cycles["to"] = max(cycles["from"], found.last_cycle.get(entry["shard"], cycles["from"]))
    for i, entry in enumerate(decisions):
        later = next((d["time"] for d in decisions[i + 1 :] if d["time"]), None)
        if entry["event"] == "Waiting":
            entry["until"] = later
    return timeline + decisions


def would_admit(timeline: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """What would let a waiting Workload in now, from its last trace; None unless it waits."""
    if not timeline or timeline[-1]["event"] not in ("Waiting", "Queued", "Created", "Requeued"):
        return None
    last = timeline[-1]
    trace: dict[str, Any] = last.get("trace", {})
    out: dict[str, Any] = {"reason": last.get("reason", ""), "quotaIncrease": [], "finishing": []}
    if "sameAs" in trace:
        out["note"] = f"waits behind the equivalent Workload {trace['sameAs']}: explain that one"
        return out
    cq = str(trace.get("clusterQueue", ""))
    for ps in trace.get("podSets", []):
        if ps.get("short"):
            flavors = ps.get("flavors", {})
            for short in ps["short"]:
                _add(out["quotaIncrease"], cq, flavors.get(short["resource"], ""), short)
        for group in ps.get("resourceGroups", []):
            for tried in group["flavors"]:
                if tried.get("problem"):
                    continue
                for res in tried.get("resources", []):
                    if not res.get("fits", True):
                        _add(out["quotaIncrease"], cq, tried["flavor"], res)
        if ps.get("notCovered"):
            out["note"] = (
                f"pod set {ps['name']} requests {', '.join(ps['notCovered'])}, which ClusterQueue {cq} "
                "covers in no resource group: no quota increase helps"
            )
    out["finishing"] = list(trace.get("finishing", []))
    if not out["quotaIncrease"] and not out["finishing"] and "note" not in out:
        if last["event"] in ("Created", "Queued"):
            out["note"] = "the scheduler has not tried it yet"
        else:
            out["note"] = f"not a matter of quota: {last.get('message') or last.get('reason')}"
    return out


def _add(options: list[dict[str, Any]], cq: str, flavor: str, short: dict[str, Any]) -> None:
    for option in options:
        if option["flavor"] == flavor:
            option["resources"][short["resource"]] = short["short"]
            return
    options.append(
        {
            "clusterQueue": cq,
            "flavor": flavor,
            "resources": {short["resource"]: short["short"]},
            "level": short.get("level", ""),
            "levelName": short.get("levelName", ""),
        }
    )
