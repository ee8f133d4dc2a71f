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
    """One condition; never changed once made, so Workloads may share it and its rendering."""

    type: str
    status: str
    reason: str
    message: str
    time_ms: int
    rendered: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The condition as the API shows it; the same dict each time, to be read, not changed."""
        if self.rendered is None:
            self.rendered = {
                "type": self.type,
                "status": self.status,
                "reason": self.reason,
                "message": self.message,
                "lastTransitionTime": rfc3339(self.time_ms),
            }
        return self.rendered


class ConditionPool:
    """One :class:`Condition` for each distinct value recently made, for Workloads to share.

    A backlog of equivalent Workloads takes the same condition at the same
    moment; sharing it saves the object and its rendering for each. Only
    recent values are kept: the pool starts afresh once it holds ``limit``.
    """

    def __init__(self, limit: int = 256) -> None:
        self._limit = limit
        self._made: dict[tuple[str, str, str, str, int], Condition] = {}

    def get(self, type_: str, status: str, reason: str, message: str, time_ms: int) -> Condition:
        key = (type_, status, reason, message, time_ms)
        cond = self._made.get(key)
        if cond is None:
            if len(self._made) >= self._limit:
                self._made.clear()
            cond = self._made[key] = Condition(type_, status, reason, message, time_ms)
        return cond


@dataclass(slots=True)
class Conditions:
    """Conditions in the order they first appeared, as the API server keeps them."""

    items: dict[str, Condition] = field(default_factory=dict)

    def set(
        self,
        type_: str,
        status: bool,
        reason: str,
        message: str,
        time_ms: int,
        pool: ConditionPool | None = None,
    ) -> bool:
        """Set a condition; False when it already was so."""
        value = "True" if status else "False"
        current = self.items.get(type_)
        if current is not None and current.status == value:
            if current.reason == reason and current.message == message:
                return False
            # The transition time only moves when the status flips.
            time_ms = current.time_ms
        if pool is None:
            self.items[type_] = Condition(type_, value, reason, message, time_ms)
        else:
            self.items[type_] = pool.get(type_, value, reason, message, time_ms)
        return True

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
