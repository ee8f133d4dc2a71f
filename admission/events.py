"""What goes into the engine and what comes out of it.

The engine is a state machine: every input is an :class:`Event` and every
output a :class:`Decision`. Both carry only data, so a recorded sequence of
events can be replayed into a fresh engine to reproduce the decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class EventType(StrEnum):
    UPSERT = "Upsert"
    DELETE = "Delete"
    # Time passes with nothing else happening; lets timers (none yet) fire.
    TICK = "Tick"
    # The job behind an evicted workload has stopped, so its quota can be released.
    # A real cluster reports this through the Workload's watch events; the embedded
    # runtime writes it itself right after an eviction.
    STOPPED = "Stopped"
    # The job behind an admitted workload completed.
    FINISHED = "Finished"


@dataclass(frozen=True, slots=True, order=True)
class ObjectRef:
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.kind} {self.namespace}/{self.name}"
        return f"{self.kind} {self.name}"


@dataclass(frozen=True, slots=True)
class Event:
    """One input to the engine.

    ``manifest`` is the raw Kubernetes object (as decoded from YAML or JSON) for
    UPSERT; the engine validates it itself so that an invalid object turns into
    a decision instead of an exception.
    """

    type: EventType
    time_ms: int
    ref: ObjectRef | None = None
    manifest: dict[str, Any] | None = None
    # More events of the same batch follow (an initial list, a loaded folder):
    # scheduling waits for the batch's end so that its order does not decide who wins.
    batch: bool = False
    # A STOPPED the runtime made itself, standing in for the job controller with no
    # cluster behind it (no status of the Workload comes back through a watch).
    stopped_at_once: bool = False


class Action(StrEnum):
    ADMITTED = "Admitted"  # quota reserved and admitted
    QUOTA_RESERVED = "QuotaReserved"  # quota reserved, waiting for its admission checks
    PENDING = "Pending"  # waiting, with the reason in the status
    EVICTED = "Evicted"  # quota still held until the job stops
    REQUEUED = "Requeued"  # stopped after an eviction, back in the queue
    FINISHED = "Finished"
    DELETED = "Deleted"
    REJECTED = "Rejected"  # the object is invalid and was not taken in
    STATUS = "Status"  # a ClusterQueue or Cohort status changed


@dataclass(slots=True)
class Decision:
    """One change the engine made, with the object status it implies.

    ``status`` is the object's whole ``status`` stanza as Kueue writes it, so an
    applier can write it without knowing the engine. A decision is read, never
    changed, and parts of its ``status`` and ``trace`` may be shared with other
    decisions. It is not a frozen dataclass only because a frozen one costs
    four times as much to make, and the engine makes one per changed Workload.
    """

    ref: ObjectRef
    action: Action
    status: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    # What the scheduling cycle behind a Workload decision found (admission/trace.py), or None.
    trace: dict[str, Any] | None = None
