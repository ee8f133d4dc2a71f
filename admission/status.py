"""Workload status as Kueue writes it: conditions and status.admission."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kueuestream.admission.timefmt import rfc3339

QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
REQUEUED = "Requeued"
FINISHED = "Finished"

REASON_PENDING = "Pending"
REASON_INADMISSIBLE = "Inadmissible"
REASON_NO_RESERVATION = "NoReservation"
MSG_NO_RESERVATION = "The workload has no reservation"
MSG_ADMITTED = "The workload is admitted"
MSG_CHECKS_NOT_READY = "The workload has not all checks ready"


@dataclass(slots=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str
    time_ms: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": rfc3339(self.time_ms),
        }


@dataclass(slots=True)
class Conditions:
    """Conditions in the order they first appeared, as the API server keeps them."""

    items: dict[str, Condition] = field(default_factory=dict)

    def set(self, type_: str, status: bool, reason: str, message: str, time_ms: int) -> None:
        value = "True" if status else "False"
        current = self.items.get(type_)
        if current is not None and current.status == value:
            # The transition time only moves when the status flips.
            current.reason, current.message = reason, message
            return
        self.items[type_] = Condition(type_, value, reason, message, time_ms)

    def is_true(self, type_: str) -> bool:
        cond = self.items.get(type_)
        return cond is not None and cond.status == "True"

    def get(self, type_: str) -> Condition | None:
        return self.items.get(type_)

    def to_list(self) -> list[dict[str, Any]]:
        return [c.to_dict() for c in self.items.values()]

    @classmethod
    def from_list(cls, conds: list[Any], parse_time: Any, default_ms: int) -> Conditions:
        out = cls()
        for c in conds:
            when = parse_time(c.last_transition_time) if c.last_transition_time else None
            out.items[c.type] = Condition(
                c.type, c.status, c.reason, c.message, default_ms if when is None else when
            )
        return out
