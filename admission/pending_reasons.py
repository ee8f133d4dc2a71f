"""Why a Workload has no quota reservation: the reasons of its ``QuotaReserved=False`` condition.

With the ``UnadmittedWorkloadsObservability`` feature gate (Kueue 0.19, beta,
on by default) Kueue writes a granular reason; with the gate off, the legacy
``Pending`` (the scheduler's verdicts) and ``Inadmissible`` (a queue that is
missing or stopped). Kueue picks between the two with
``workload.UnadmittedWorkloadReasonWithFallback``; :func:`choose` does the same.

A pod set that gets no flavor carries the reason of each flavor it tried;
``Assignment.resolveNoFitReason`` (pkg/scheduler/flavorassigner) takes the
least severe reason among a resource group's flavors, since any one of them
could take the pod set, and the most severe among groups and pod sets, since
every one of them must fit: :func:`least_severe` and :func:`most_severe`.
"""

from __future__ import annotations

from collections.abc import Iterable

GATE = "UnadmittedWorkloadsObservability"
# Stamp PendingEvaluation on a Workload as soon as it is queued (Kueue 0.19: beta, off).
EXPLICIT_STATUS_GATE = "UnadmittedWorkloadsExplicitStatus"

# Granular reasons (apis/kueue/v1beta2/workload_types.go).
NO_MATCHING_FLAVOR = "NoMatchingFlavor"
WAITING_FOR_QUOTA = "WaitingForQuota"
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
WAITING_FOR_PREEMPTED_WORKLOADS = "WaitingForPreemptedWorkloads"
MISCONFIGURED = "Misconfigured"
SUSPENDED = "Suspended"
PENDING_EVALUATION = "PendingEvaluation"
DEACTIVATED = "Deactivated"

# Legacy reasons, written with the gate off.
PENDING = "Pending"
INADMISSIBLE = "Inadmissible"

# Reasons the scheduler writes and the workload controller keeps until the next
# cycle (``schedulerSetReasons``); any other reason on a queued Workload is
# replaced by PendingEvaluation once nothing blocks it any more.
SCHEDULER_SET = frozenset(
    {
        WAITING_FOR_QUOTA,
        NO_MATCHING_FLAVOR,
        EXCEEDS_MAX_QUOTA,
        WAITING_FOR_PREEMPTED_WORKLOADS,
        PENDING_EVALUATION,
    }
)

MSG_PENDING_EVALUATION = "Workload is pending evaluation in the scheduling queue"
# Kueue's ``workload.ErrNamespaceMismatch``.
MSG_NAMESPACE_MISMATCH = "workload namespace doesn't match ClusterQueue selector"

# ``reasonSeverity``: a flavor that can never match is worse than quota that
# can never suffice, which is worse than quota that is in use.
_SEVERITY = {WAITING_FOR_QUOTA: 1, EXCEEDS_MAX_QUOTA: 2, NO_MATCHING_FLAVOR: 3}


def severity(reason: str) -> int:
    return _SEVERITY.get(reason, 0)


def most_severe(reasons: Iterable[str]) -> str:
    """The most severe of ``reasons`` (the first of equals); "" when there are none."""
    out = ""
    for reason in reasons:
        if not out or severity(reason) > severity(out):
            out = reason
    return out


def least_severe(reasons: Iterable[str]) -> str:
    """The least severe of ``reasons`` (the first of equals); "" when there are none."""
    out: str | None = None
    for reason in reasons:
        if out is None or severity(reason) < severity(out):
            out = reason
    return out or ""


def choose(granular: bool, reason: str, fallback: str) -> str:
    """``reason`` with the gate on, ``fallback`` with it off (``UnadmittedWorkloadReasonWithFallback``)."""
    return reason if granular else fallback
