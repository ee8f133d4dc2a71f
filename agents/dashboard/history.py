"""Admissions and preemptions over time, counted from the decisions as they are made.

Each Workload decision that reserves quota counts as an admission at its
``QuotaReserved`` time; each eviction counts at its ``Evicted`` time, as a
preemption when the reason is ``Preempted`` and as an eviction otherwise. The
last :data:`KEPT` of them are kept, so memory stays bounded on a long log;
:meth:`History.chart` groups them in equal stretches of event time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kueuestream.admission.events import Action
from kueuestream.admission.status import EVICTED, PREEMPTED, QUOTA_RESERVED
from kueuestream.admission.timefmt import parse_rfc3339
from kueuestream.streams.schemas import DecisionRecord

KEPT = 10_000
BUCKETS = 40
RECENT = 20
KINDS = ("admitted", "preempted", "evicted")


@dataclass(frozen=True, slots=True)
class Happening:
    time_ms: int
    kind: str  # one of KINDS
    namespace: str
    name: str
    cluster_queue: str
    reason: str


def _condition(status: Mapping[str, Any], type_: str) -> Mapping[str, Any]:
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return {}


def _time(cond: Mapping[str, Any]) -> int | None:
    when = cond.get("lastTransitionTime")
    return parse_rfc3339(when) if isinstance(when, str) else None


def happening(decision: DecisionRecord) -> Happening | None:
    """The admission or eviction ``decision`` records, or None for any other decision."""
    if decision.ref.kind != "Workload":
        return None
    status = decision.status
    admission = status.get("admission")
    cq = str(admission.get("clusterQueue") or "") if isinstance(admission, dict) else ""
    if decision.action in (Action.QUOTA_RESERVED, Action.ADMITTED):
        cond, kind, reason = _condition(status, QUOTA_RESERVED), "admitted", ""
    elif decision.action == Action.EVICTED:
        cond = _condition(status, EVICTED)
        reason = str(cond.get("reason") or "")
        kind = "preempted" if reason == PREEMPTED else "evicted"
        preempted = _condition(status, PREEMPTED)
        if kind == "preempted" and preempted:
            reason = str(preempted.get("reason") or reason)
    else:
        return None
    when = _time(cond)
    if when is None:
        return None
    return Happening(when, kind, decision.ref.namespace, decision.ref.name, cq, reason)


class History:
    def __init__(self) -> None:
        self.kept: deque[Happening] = deque(maxlen=KEPT)
        # Admitted Workloads a quota reservation was already counted for (an Admitted
        # decision following a QuotaReserved one is the same admission).
        self._holding: set[tuple[str, str]] = set()
        self.totals = dict.fromkeys(KINDS, 0)

    def add(self, decisions: Iterable[DecisionRecord]) -> None:
        for decision in decisions:
            if decision.ref.kind != "Workload":
                continue
            key = (decision.ref.namespace, decision.ref.name)
            seen = happening(decision)
            if decision.action in (Action.QUOTA_RESERVED, Action.ADMITTED):
                if key in self._holding:
                    continue
                self._holding.add(key)
            elif decision.action != Action.STATUS:
                self._holding.discard(key)
            if seen is not None:
                self.kept.append(seen)
                self.totals[seen.kind] += 1

    def chart(self) -> dict[str, Any]:
        """Counts per kind in :data:`BUCKETS` equal stretches from the first to the last kept event."""
        if not self.kept:
            return {"fromMs": 0, "toMs": 0, "buckets": []}
        start = min(h.time_ms for h in self.kept)
        end = max(h.time_ms for h in self.kept)
        width = max(1, (end - start) // BUCKETS + 1)
        buckets = [dict.fromkeys(KINDS, 0) for _ in range(BUCKETS)]
        for h in self.kept:
            buckets[min(BUCKETS - 1, (h.time_ms - start) // width)][h.kind] += 1
        return {"fromMs": start, "toMs": start + width * BUCKETS, "buckets": buckets}

    def recent(self) -> list[dict[str, Any]]:
        """The latest :data:`RECENT` admissions and evictions, newest first (by event time, then as read)."""
        return [
            {
                "timeMs": h.time_ms,
                "kind": h.kind,
                "namespace": h.namespace,
                "name": h.name,
                "clusterQueue": h.cluster_queue,
                "reason": h.reason,
            }
            for h in reversed(sorted(self.kept, key=lambda h: h.time_ms)[-RECENT:])
        ]
