"""Status as Kueue writes it, and the decisions that carry it out of the engine.

A Workload's status is rendered from its record (``status.admission`` and the
conditions); ClusterQueue and Cohort ``status.fairSharing`` from the quota
tree. Between two events the engine only notes which Workloads changed; when
the event is done, :meth:`DecisionOutbox.collect` renders each once and
emits a decision only where the status differs from the last one emitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kueuestream.admission.events import Action, Decision, ObjectRef
from kueuestream.admission.fair_sharing import FairSharing
from kueuestream.admission.quantity import resource_quantity
from kueuestream.admission.queues import WorkloadKey
from kueuestream.admission.state import Phase, WorkloadRecord
from kueuestream.admission.status import QUOTA_RESERVED
from kueuestream.admission.timefmt import rfc3339


def workload_status(rec: WorkloadRecord) -> dict[str, Any]:
    """The Workload's ``status``: its admission while it holds quota, and its conditions."""
    status: dict[str, Any] = {}
    if rec.phase != Phase.PENDING and rec.assignment:
        status["admission"] = {
            "clusterQueue": rec.cluster_queue,
            "podSetAssignments": [
                {
                    "name": psa.name,
                    "flavors": dict(sorted(psa.flavors.items())),
                    "resourceUsage": {r: resource_quantity(r, v) for r, v in sorted(psa.usage.items())},
                    "count": psa.count,
                }
                for psa in rec.assignment
            ],
        }
    conditions = rec.conditions.to_list()
    if conditions:
        status["conditions"] = conditions
    if rec.requeue_at_ms is not None:
        status["requeueState"] = {"requeueAt": rfc3339(rec.requeue_at_ms)}
    if rec.checks:
        status["admissionChecks"] = [c.to_dict() for c in rec.checks]
    if rec.accumulated_s is not None:
        status["accumulatedPastExecutionTimeSeconds"] = rec.accumulated_s
    if rec.requests_shown and rec.phase == Phase.PENDING and rec.pod_sets:
        # What Kueue's scheduler writes when it requeues a workload it could not admit
        # (``PropagateResourceRequests``); the admission's resource usage replaces it.
        status["resourceRequests"] = [
            {
                "name": ps.name,
                "resources": {r: resource_quantity(r, v) for r, v in sorted(ps.requests.items())},
            }
            for ps in rec.pod_sets
        ]
    return status


class DecisionOutbox:
    """What the current event changed, turned into decisions when it is done."""

    def __init__(self) -> None:
        # Workloads whose status may have changed, in the order they first changed.
        self.changed: dict[WorkloadKey, None] = {}
        # Decisions made outright (rejections, deletions), in order.
        self.direct: list[Decision] = []
        # The last ``status`` emitted per (kind, name) of ClusterQueues and Cohorts.
        self.node_status: dict[tuple[str, str], dict[str, Any]] = {}

    def touch(self, key: WorkloadKey) -> None:
        self.changed[key] = None

    def forget(self, key: WorkloadKey) -> None:
        self.changed.pop(key, None)

    def emit(self, decision: Decision) -> None:
        self.direct.append(decision)

    def collect(
        self, workloads: Mapping[WorkloadKey, WorkloadRecord], fair_sharing: FairSharing | None
    ) -> list[Decision]:
        """The direct decisions, then one per changed Workload whose status differs.

        With ``fair_sharing`` given, then one per ClusterQueue or Cohort whose
        ``status.fairSharing`` changed.
        """
        out = self.direct
        self.direct = []
        for key in self.changed:
            rec = workloads.get(key)
            if rec is None:
                continue
            status = workload_status(rec)
            # A trace goes out with the status change it explains, or not at all.
            trace, rec.trace = rec.trace, None
            if status == rec.last_status:
                continue
            rec.last_status = status
            cond = rec.conditions.get(QUOTA_RESERVED)
            message = cond.message if cond else ""
            out.append(Decision(rec.ref, rec.last_action, status, message, trace))
        self.changed.clear()
        if fair_sharing is not None:
            out += self._node_status_changes(fair_sharing)
        return out

    def _node_status_changes(self, fair_sharing: FairSharing) -> list[Decision]:
        """ClusterQueue and Cohort ``status.fairSharing``, when it changed."""
        out: list[Decision] = []
        for (kind, name), fair in fair_sharing.statuses().items():
            status = {"fairSharing": fair}
            if self.node_status.get((kind, name)) != status:
                self.node_status[(kind, name)] = status
                out.append(Decision(ObjectRef(kind, "", name), Action.STATUS, status, ""))
        return out
