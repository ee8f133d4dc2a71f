"""What the engine remembers about each ClusterQueue and Workload."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kueuestream.admission.admission_checks import CheckState
from kueuestream.admission.api.kueue import ClusterQueue, Workload
from kueuestream.admission.assignment import PodSetAssignment, PodSetRequest, QueueView
from kueuestream.admission.events import Action, ObjectRef
from kueuestream.admission.queues import OrderKey, WorkloadKey
from kueuestream.admission.quota import FR, QuotaNode
from kueuestream.admission.status import Conditions


class Phase(StrEnum):
    PENDING = "Pending"
    ADMITTED = "Admitted"
    FINISHED = "Finished"


@dataclass(slots=True)
class ClusterQueueRecord:
    obj: ClusterQueue
    node: QuotaNode
    view: QueueView
    # Why no workload can be admitted here at all, or "" when active.
    inactive_reason: str = ""
    # The AdmissionChecks it requires, each with the flavors it applies to, and all its flavors.
    checks: dict[str, frozenset[str]] = field(default_factory=dict)
    flavors: frozenset[str] = frozenset()
    # The ClusterQueue's name, read for every workload queued or tried.
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.obj.metadata.name


@dataclass(frozen=True, slots=True)
class LastAssignment:
    """Where a cycle's flavor search for a Workload stopped (Kueue's ``AssignmentClusterQueueState``).

    The next cycle's search resumes after it, unless the ClusterQueue's
    allocatable generation has moved on since (see ``Cache.generations``).
    """

    cluster_queue: str
    generation: int
    # Per pod set, each assigned resource's flavor index, or -1 past the last flavor.
    tried: tuple[dict[str, int], ...]
    # How many searches in a row before this one resumed from a progress with flavors left.
    run: int = 0


@dataclass(slots=True)
class WorkloadRecord:
    key: WorkloadKey
    obj: Workload
    manifest: dict[str, Any]
    created_ms: int
    priority: int
    conditions: Conditions
    phase: Phase = Phase.PENDING
    # Requests per pod set, or the reason they cannot be counted.
    pod_sets: list[PodSetRequest] | None = None
    requests_problem: str = ""
    # Why Kueue's scheduler would refuse these requests (limits, LimitRanges), or "";
    # and why its workload controller would, reading the pod sets as written.
    resources_problem: str = ""
    written_resources_problem: str = ""
    requests_generation: int = -1
    # Workloads with equal keys are interchangeable for scheduling (see queues.py).
    equivalence: Hashable = ()
    # Where it waits or runs.
    cluster_queue: str = ""
    # Admission.
    assignment: list[PodSetAssignment] = field(default_factory=list)
    usage: dict[FR, int] = field(default_factory=dict)
    reserved_ms: int = 0
    evicting: bool = False
    # Sorted first in its queue while its preemptions complete.
    sticky: bool = False
    # The scheduler tried it and did not admit it: its status shows what it requests.
    requests_shown: bool = False
    # What the last decision about it said, to emit only changes.
    last_status: dict[str, Any] | None = None
    last_action: Action = Action.PENDING
    # status.admissionChecks, by name.
    checks: list[CheckState] = field(default_factory=list)
    # Kueue deactivated it itself (a Rejected check, its maximum execution time), setting
    # spec.active false: the Evicted reason it gave, or "".
    deactivated_by: str = ""
    # status.accumulatedPastExecutionTimeSeconds: seconds admitted before its last eviction.
    accumulated_s: int | None = None
    # status.requeueState.requeueAt: not queued before this time (a retried check's backoff).
    requeue_at_ms: int | None = None
    # Where its last flavor search stopped, while that still counts (Kueue's LastAssignment).
    last_assignment: LastAssignment | None = None
    # What the scheduler found for it in the cycle that last changed its status
    # (admission/trace.py); handed to the next decision about it, then dropped.
    trace: dict[str, Any] | None = None
    # What every decision about it names; made once, as a backlog's statuses are emitted by the thousand.
    ref: ObjectRef = field(init=False)
    # When it queued, as queues and cycles order it (see Lifecycle.place); its creation
    # until it is placed.
    queued_ms: int = field(init=False)

    def __post_init__(self) -> None:
        self.ref = ObjectRef("Workload", self.key[0], self.key[1])
        self.queued_ms = self.created_ms

    @property
    def active(self) -> bool:
        return self.obj.spec.active and not self.deactivated_by

    def order_key(self) -> OrderKey:
        return (not self.sticky, -self.priority, self.queued_ms, self.key[0], self.key[1])
