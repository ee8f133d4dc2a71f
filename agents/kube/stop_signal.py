"""How a Workload in a cluster says that the job behind it stopped after an eviction.

Kueue's job integration, once an evicted Workload's job is suspended and has
no active pods, clears the Workload's quota reservation: ``QuotaReserved``
becomes False with reason ``PendingEvaluation`` (Kueue 0.19, with its
UnadmittedWorkloadsObservability gate on by default), ``status.admission`` is
removed and ``Evicted`` stays True (``JobReconciler.ReconcileGenericJob``,
step "handle eviction", and ``workload.UnsetQuotaReservationWithCondition``).
Seeing that status is what releases the quota.

With a cluster behind it the engine never writes that reason while Evicted is
True (only the runtime's own job controller, with no cluster, has it do so), so
a status it decided earlier and that comes back through the watch late (say,
the one after a previous eviction) cannot be mistaken for it.
"""

from __future__ import annotations

from kueuestream.admission.api.kueue import Workload
from kueuestream.admission.status import EVICTED, QUOTA_RESERVED

REASON_PENDING_EVALUATION = "PendingEvaluation"


def job_stopped(workload: Workload) -> bool:
    """Whether the Workload's status shows its reservation cleared by the job integration."""
    status = workload.status
    if status.admission is not None:
        return False
    evicted = next((c for c in status.conditions if c.type == EVICTED), None)
    reserved = next((c for c in status.conditions if c.type == QUOTA_RESERVED), None)
    return (
        evicted is not None
        and evicted.status == "True"
        and reserved is not None
        and reserved.status == "False"
        and reserved.reason == REASON_PENDING_EVALUATION
    )
