"""The workload lifecycle: every change of a Workload's state, and the conditions that show it.

A Workload arrives (new, already admitted, or already finished), waits in a
queue or says why it cannot, is admitted, may be evicted (preempted,
deactivated, its queue stopped), is requeued once its job stopped, and
finishes or is deleted. Kueue spreads this over its workload controller
(``WorkloadReconciler``) and the condition helpers of pkg/workload
(``SetQuotaReservation``, ``UnsetQuotaReservationWithCondition``,
``SetEvictedCondition``, ``SetPreemptedCondition``, ``SetRequeuedCondition``,
``Finish``); here they are one class over the cache and the queue manager.
Every change notes the Workload in the outbox, which renders its status when
the event is done.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kueuestream.admission import admission_checks as ac
from kueuestream.admission import trace
from kueuestream.admission.api.config import Configuration
from kueuestream.admission.api.kueue import Workload
from kueuestream.admission.assignment import Assignment, PodSetAssignment
from kueuestream.admission.cache import Cache
from kueuestream.admission.events import Action, Decision, ObjectRef
from kueuestream.admission.execution_time import ExecutionDeadlines, admitted_seconds
from kueuestream.admission.jobs import JOB_UID_LABEL
from kueuestream.admission.pending_reasons import (
    DEACTIVATED,
    EXPLICIT_STATUS_GATE,
    GATE,
    INADMISSIBLE,
    MISCONFIGURED,
    MSG_NAMESPACE_MISMATCH,
    MSG_PENDING_EVALUATION,
    PENDING,
    PENDING_EVALUATION,
    SCHEDULER_SET,
    SUSPENDED,
    choose,
)
from kueuestream.admission.preemption import (
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    Target,
    cq_path,
    preemption_message,
)
from kueuestream.admission.quantity import resource_value
from kueuestream.admission.queue_manager import QueueManager
from kueuestream.admission.queues import GroupKey, WorkloadKey
from kueuestream.admission.quota import FR
from kueuestream.admission.requests import pod_requests, scale
from kueuestream.admission.state import ClusterQueueRecord, Phase, WorkloadRecord
from kueuestream.admission.status import (
    ADMITTED,
    EVICTED,
    FINISHED,
    MSG_ADMITTED,
    MSG_CHECKS_NOT_READY,
    MSG_NO_RESERVATION,
    PREEMPTED,
    QUOTA_RESERVED,
    REASON_NO_RESERVATION,
    REQUEUED,
    Condition,
    ConditionPool,
    Conditions,
)
from kueuestream.admission.status_render import DecisionOutbox, workload_status
from kueuestream.admission.timefmt import parse_rfc3339
from kueuestream.admission.workload_info import ensure_requests, resolve_priority

MSG_DEACTIVATED = "The workload is deactivated"
# SyncAdmittedCondition without UnadmittedWorkloadsObservability, for a workload that lost
# its reservation with checks not all Ready.
LEGACY_NO_RESERVATION_CHECKS = "NoReservationUnsatisfiedChecks"
MSG_NO_RESERVATION_CHECKS = "The workload has no reservation and not all checks ready"
# Kueue's Evicted reasons for admission checks: a Retry, and a Rejected (which deactivates).
EVICTED_BY_CHECK = "AdmissionCheck"
DEACTIVATED_BY_CHECK = "DeactivatedDueToAdmissionCheck"
# Deactivated by Kueue itself ("Deactivated" with the underlying cause, ReasonWithCause).
DEACTIVATED_DUE_TO = "DeactivatedDueTo"
DEACTIVATED_BY_MAX_EXEC = "DeactivatedDueToMaximumExecutionTimeExceeded"
MSG_MAX_EXEC = f"{MSG_DEACTIVATED} due to exceeding the maximum execution time"
REACTIVATED = "Reactivated"


def deactivated_by_kueue(conditions: Conditions) -> str:
    """The Evicted reason when Kueue itself deactivated the workload (a Rejected check, its
    maximum execution time: ``IsEvictedDueToDeactivationByKueue``) and it was not
    reactivated since, else ""."""
    evicted = conditions.get(EVICTED)
    requeued = conditions.get(REQUEUED)
    reactivated = requeued is not None and requeued.status == "True" and requeued.reason == REACTIVATED
    if evicted is None or reactivated or not evicted.reason.startswith(DEACTIVATED_DUE_TO):
        return ""
    return evicted.reason


class Lifecycle:
    """Workload state changes over the cache and queues; ``now_ms`` is the current event's time."""

    def __init__(self, cache: Cache, queues: QueueManager, outbox: DecisionOutbox) -> None:
        self.cache = cache
        self.queues = queues
        self.outbox = outbox
        self.now_ms = 0
        # The observability gates of the Configuration they were read from, read once per Configuration.
        self._gates_of: Configuration | None = None
        self._granular_gate = self._explicit_gate = False
        # Conditions given to many Workloads at once (a backlog's, an admission's) are shared.
        self.pool = ConditionPool()
        # Admitted workloads with a maximum execution time, by when it runs out.
        self.deadlines = ExecutionDeadlines()

    # ------------------------------------------------------------ arrivals

    def upsert(self, wl: Workload, manifest: dict[str, Any]) -> None:
        """A Workload was created or changed."""
        key = (wl.metadata.namespace, wl.metadata.name)
        rec = self.cache.workloads.get(key)
        finished = any(c.type == FINISHED and c.status == "True" for c in wl.status.conditions)
        if rec is not None:
            self._update(rec, wl, manifest, finished)
            self.deadlines.track(rec)
            return
        created = parse_rfc3339(wl.metadata.creation_timestamp or "")
        conditions = Conditions.from_list(wl.status.conditions, parse_rfc3339, self.now_ms)
        rec = WorkloadRecord(
            key=key,
            obj=wl,
            manifest=manifest,
            created_ms=self.now_ms if created is None else created,
            priority=resolve_priority(wl, self.cache.workload_classes, self.cache.pod_classes),
            conditions=conditions,
        )
        self.cache.workloads[key] = rec
        rec.checks = ac.from_status(wl.status.admission_checks, parse_rfc3339, self.now_ms)
        # Deactivated by Kueue before (a restart, a shard handover): it stays deactivated.
        rec.deactivated_by = deactivated_by_kueue(conditions)
        rec.accumulated_s = wl.status.accumulated_past_execution_time_seconds
        requeue_at = wl.status.requeue_state.requeue_at if wl.status.requeue_state else None
        rec.requeue_at_ms = parse_rfc3339(requeue_at) if requeue_at else None
        admission = wl.status.admission
        if finished:
            rec.phase = Phase.FINISHED
            rec.last_action = Action.FINISHED
            if admission is not None:
                # Shown as it came; a finished job holds no quota, so its usage is not kept.
                _read_admission(rec, admission.cluster_queue, admission.pod_set_assignments)
        elif admission is not None and conditions.is_true(QUOTA_RESERVED):
            self._adopt_admitted(rec, admission.cluster_queue, admission.pod_set_assignments)
            if not conditions.is_true(ADMITTED):
                rec.last_action = Action.QUOTA_RESERVED
            self._check_outcome(rec)
        else:
            self.place(rec)
        # What it arrived with is what the cluster already shows; only changes are decisions.
        rec.last_status = workload_status(rec) if wl.status.conditions else {}
        self.outbox.touch(key)
        self.deadlines.track(rec)

    def _update(self, rec: WorkloadRecord, wl: Workload, manifest: dict[str, Any], finished: bool) -> None:
        if not rec.obj.spec.active and wl.spec.active:
            requeued = rec.conditions.get(REQUEUED)
            requeued_as_deactivated = (
                requeued is not None and requeued.status == "False" and requeued.reason == DEACTIVATED
            )
            if rec.deactivated_by or requeued_as_deactivated:
                # Set active again after its deactivation was written: a fresh start (Kueue's
                # Reactivated). A workload that never held quota was never requeued, so it has
                # no Requeued condition to change.
                rec.deactivated_by = ""
                rec.conditions.set(REQUEUED, True, REACTIVATED, "The workload was reactivated", self.now_ms)
        was_active = rec.active
        rec.obj, rec.manifest = wl, manifest
        if rec.phase == Phase.FINISHED:
            return
        if finished:
            fin = next(c for c in wl.status.conditions if c.type == FINISHED)
            self.finish(rec, fin.reason or "Succeeded", fin.message)
            return
        checks_changed = ac.take_reported(rec.checks, wl.status.admission_checks, parse_rfc3339, self.now_ms)
        if rec.phase == Phase.ADMITTED:
            # An admitted workload's pod sets are immutable; only deactivation and its checks matter.
            if was_active and not wl.spec.active and not rec.evicting:
                self.evict(rec, "Deactivated", MSG_DEACTIVATED, None)
            elif checks_changed:
                self._check_outcome(rec)
                self.outbox.touch(rec.key)
            return
        # Counted again when placed, which also drops the last flavor search's progress,
        # as Kueue builds a new workload.Info for any update.
        rec.requests_generation = -1
        if wl.spec.priority is not None:
            rec.priority = wl.spec.priority
        self.queues.delete(rec)
        self.place(rec)
        self.outbox.touch(rec.key)

    def _adopt_admitted(self, rec: WorkloadRecord, cq_name: str, assignments: Iterable[Any]) -> None:
        """A workload admitted before we started: its usage is a fact, not a decision."""
        rec.phase = Phase.ADMITTED
        rec.last_action = Action.ADMITTED
        reserved = rec.conditions.get(QUOTA_RESERVED)
        rec.reserved_ms = reserved.time_ms if reserved else self.now_ms
        rec.evicting = rec.conditions.is_true(EVICTED)
        rec.usage = _read_admission(rec, cq_name, assignments)
        self.cache.add_admitted(rec)

    # ------------------------------------------------------------ departures

    def delete(self, key: WorkloadKey) -> None:
        """A Workload was deleted: its quota is free and it leaves its queue."""
        rec = self.cache.workloads.pop(key, None)
        if rec is None:
            return
        self.deadlines.forget(key)
        if rec.phase == Phase.ADMITTED:
            self._release(rec)
            self.queues.delete(rec)
        else:
            self._leave_queue(rec)
        self.outbox.forget(key)
        self.outbox.emit(Decision(ObjectRef("Workload", key[0], key[1]), Action.DELETED, {}, "deleted"))

    def delete_job(self, namespace: str, name: str) -> None:
        """A Job was deleted: so is the Workload made for it, and no other."""
        # The Workload is named job-<name>-<5 hex>; the suffix tells same-named owners apart.
        prefix = f"job-{name}-"
        for key in sorted(self.cache.workloads):
            wl_name = key[1]
            if key[0] == namespace and wl_name.startswith(prefix) and len(wl_name) == len(prefix) + 5:
                self.delete(key)

    def finish(self, rec: WorkloadRecord, reason: str, message: str) -> None:
        """The workload's job completed (Kueue's ``Finish``).

        Its quota is free, but its ``status.admission`` stays, as Kueue leaves it:
        where the finished job ran.
        """
        if rec.phase == Phase.ADMITTED:
            self._release(rec)
        else:
            self._leave_queue(rec)
        rec.phase = Phase.FINISHED
        rec.evicting = False
        rec.conditions.set(FINISHED, True, reason, message, self.now_ms)
        self._mark(rec, Action.FINISHED)

    def _leave_queue(self, rec: WorkloadRecord) -> None:
        """A workload holding no quota leaves for good (deleted, finished).

        Kueue's workload controller requeues the parked workloads of its
        ClusterQueue's tree all the same (``QueueAssociatedInadmissibleWorkloadsAfter``
        in ``Delete`` and ``Update``): they are evaluated again, and say so.
        """
        self.queues.delete(rec)
        cq = self.cache.cqs.get(rec.cluster_queue) if rec.phase == Phase.PENDING else None
        if cq is not None and not self.cache.structure_dirty:
            self.queues.requeue_later(cq.node.root.name, self.now_ms)

    def _release(self, rec: WorkloadRecord) -> None:
        """Its quota is free; its assignment stays for the caller to keep (finished) or drop."""
        root = self.cache.remove_admitted(rec)
        if root is not None:
            self.queues.requeue_later(root.name, self.now_ms)
        rec.usage = {}

    # --------------------------------------------------------------- queueing

    def place(self, rec: WorkloadRecord, parked_in: tuple[str, GroupKey] | None = None) -> None:
        """Put a pending workload in its ClusterQueue's queue, or say why it cannot be.

        ``parked_in``: the ClusterQueue and group it was parked with before the quota
        tree was rebuilt; queued there again, it is parked again, its status as it was.

        Kueue makes these checks in its workload controller
        (``reconcileOnLocalQueueActiveState``, ``reconcileOnClusterQueueActiveState``)
        and queue manager (``Manager.AddOrUpdateWorkload``).
        """
        cache = self.cache
        # Counted on arrival, as Kueue's queue manager builds a workload.Info when a
        # workload reaches it, so a rebuild of the quota tree does not count it again.
        ensure_requests(rec, cache)
        if cache.structure_dirty:
            return  # the rebuild places every pending workload
        rec.queued_ms = self._queue_order_ms(rec)
        if not rec.active:
            self._evict_inactive(rec)
            if self._granular():
                self._inadmissible(rec, DEACTIVATED, MSG_DEACTIVATED)
                return
            # Without the gate Kueue tells an inactive workload only what blocks its queue
            # (resolveLegacyUnadmittedQuotaReservedCondition) and leaves it as it was otherwise.
            rec.cluster_queue = ""
            blocked = self._queue_blocker(rec)
            if isinstance(blocked, tuple):
                self._inadmissible(rec, *blocked)
            return
        if rec.pod_sets is None:
            self._inadmissible(rec, MISCONFIGURED, rec.requests_problem)
            return
        blocked = self._queue_blocker(rec)
        if isinstance(blocked, tuple):
            self._inadmissible(rec, *blocked)
            return
        cq = blocked
        rec.cluster_queue = cq.name
        # The group it goes back to, parked, when it was parked in this very ClusterQueue.
        parked_group = parked_in[1] if parked_in is not None and parked_in[0] == cq.name else None
        if parked_group is None:
            self._mark_pending_evaluation(rec, cq)
        if cq.checks or rec.checks:
            self._sync_checks(rec, cq, None)
        if rec.requeue_at_ms is not None and rec.requeue_at_ms > self.now_ms:
            # A retried check's backoff: it waits outside the queue until then.
            self.queues.hold(rec.key, rec.requeue_at_ms)
            return
        self.queues.push(rec, cq.name, stated=rec.conditions.get(QUOTA_RESERVED) is not None)
        if parked_group is not None:
            self.queues.set_aside(rec.key, cq.name, parked_group)

    def _queue_order_ms(self, rec: WorkloadRecord) -> int:
        """When the workload queued, as Kueue orders its queues, cycles and
        ``LowerOrNewerEqualPriority`` by it (``Ordering.GetQueueOrderTimestamp``): since
        its admission checks evicted it, while it is still marked so; without
        PrioritySortingWithinCohort, just after a preemption that reclaimed quota it
        borrowed; otherwise since its creation."""
        evicted = rec.conditions.get(EVICTED)
        if evicted is not None and evicted.status == "True" and evicted.reason == EVICTED_BY_CHECK:
            return evicted.time_ms
        if not self.cache.config.gate("PrioritySortingWithinCohort"):
            preempted = rec.conditions.get(PREEMPTED)
            reclaimed = ("True", IN_COHORT_RECLAIM_WHILE_BORROWING)
            if preempted is not None and (preempted.status, preempted.reason) == reclaimed:
                # Kueue adds a millisecond, so it sorts after its preemptor.
                return preempted.time_ms + 1
        return rec.created_ms

    def _queue_blocker(self, rec: WorkloadRecord) -> ClusterQueueRecord | tuple[str, str]:
        """The active ClusterQueue the workload's LocalQueue points to, or the granular
        reason and message of what blocks it (Kueue's ``getQueueBlocker``)."""
        cache = self.cache
        lq_name = rec.obj.spec.queue_name
        lq = cache.local_queues.get((rec.key[0], lq_name))
        if lq is None:
            return MISCONFIGURED, f"LocalQueue {lq_name} doesn't exist"
        if lq.spec.stop_policy != "None":
            return SUSPENDED, f"LocalQueue {lq_name} is inactive"
        cq = cache.cqs.get(lq.spec.cluster_queue)
        if cq is None:
            return MISCONFIGURED, f"ClusterQueue {lq.spec.cluster_queue} doesn't exist"
        if cq.inactive_reason:
            return SUSPENDED, f"ClusterQueue {cq.name} is inactive"
        return cq

    def _evict_inactive(self, rec: WorkloadRecord) -> None:
        """An inactive workload without quota is evicted all the same, once, as Kueue's does.

        Kueue's workload controller (``WorkloadReconciler.Reconcile``, the branch
        for a Workload that is not active) calls ``workloadevict.Evict`` whenever
        the Workload is not already Evicted, whether or not it ever held quota:
        ``Evicted=True``, reason ``Deactivated``, its checks reset to Pending
        (``resetChecksOnEviction``), and its ``requeueState`` cleared, which it
        clears even when the Workload was already evicted. The condition stays
        until quota is reserved again (``SetQuotaReservation``).
        """
        if rec.requeue_at_ms is not None:
            rec.requeue_at_ms = None
            self.outbox.touch(rec.key)
        if rec.conditions.is_true(EVICTED):
            return
        rec.conditions.set(EVICTED, True, DEACTIVATED, MSG_DEACTIVATED, self.now_ms)
        ac.reset_on_eviction(rec.checks, self.now_ms)
        self._mark(rec, Action.PENDING)

    def place_pending(self, parked: Mapping[WorkloadKey, tuple[str, GroupKey]]) -> None:
        """Queue every pending workload again, by key (after the quota tree was rebuilt).

        One that was ``parked`` and is queued in the same ClusterQueue again goes
        back among the parked, with the same group: a change of the tree does
        not try it at once, but only when the retry asked for falls due, as in
        Kueue, whose queues the change leaves as they are.
        A workload holding quota has its checks synced with its ClusterQueue's,
        which may have changed, and is admitted if every remaining one is Ready.
        """
        workloads = self.cache.workloads
        cqs = self.cache.cqs
        for key in sorted(workloads):
            rec = workloads[key]
            if rec.phase == Phase.PENDING:
                self.place(rec, parked.get(key))
            elif rec.phase == Phase.ADMITTED and not rec.evicting:
                cq = cqs.get(rec.cluster_queue)
                if cq is not None and (cq.checks or rec.checks):
                    assigned = frozenset(f for psa in rec.assignment for f in psa.flavors.values())
                    self._sync_checks(rec, cq, assigned)
                    self._check_outcome(rec)

    def _read_gates(self) -> None:
        config = self.cache.config
        if config is not self._gates_of:
            self._gates_of = config
            self._granular_gate = config.gate(GATE)
            self._explicit_gate = config.gate(EXPLICIT_STATUS_GATE)

    def _granular(self) -> bool:
        self._read_gates()
        return self._granular_gate

    def _inadmissible(self, rec: WorkloadRecord, granular_reason: str, message: str) -> None:
        """It cannot be queued: the granular reason with the gate on, ``Inadmissible`` with it off
        (Kueue's ``getQueueBlocker`` and ``resolveLegacyUnadmittedQuotaReservedCondition``)."""
        rec.cluster_queue = ""
        self.set_pending(rec, choose(self._granular(), granular_reason, INADMISSIBLE), message)

    def _mark_pending_evaluation(self, rec: WorkloadRecord, cq: ClusterQueueRecord) -> None:
        """A queued workload that nothing blocks waits for the scheduler: ``PendingEvaluation``.

        Kueue's ``resolveGranularUnadmittedQuotaReservedCondition``: a namespace
        the ClusterQueue does not select, or requests its pods could not run with
        (read as written: the controller does not adjust them as the scheduler
        does), are ``Misconfigured`` at once (``ValidateAdmissibility``, before
        anything else is looked at); a reason
        the scheduler wrote stays until the next cycle; any other (a queue that
        was missing or stopped, a deactivation) becomes PendingEvaluation
        (``Pending`` while the workload is still marked Evicted: see
        :meth:`_evaluation_reason`); a workload without the condition gets it
        only with UnadmittedWorkloadsExplicitStatus.
        """
        if self._granular() and not self.cache.selects_namespace(cq, rec.key[0]):
            self.set_pending(rec, MISCONFIGURED, MSG_NAMESPACE_MISMATCH)
            return
        if self._granular() and rec.written_resources_problem:
            self.set_pending(rec, MISCONFIGURED, rec.written_resources_problem)
            return
        cond = rec.conditions.get(QUOTA_RESERVED)
        if cond is None:
            self._read_gates()
            if not self._explicit_gate:
                return
        elif cond.status != "False" or cond.reason in SCHEDULER_SET:
            return
        if not self._granular():
            return
        if cond is not None and cond.reason == PENDING and rec.conditions.is_true(EVICTED):
            # Requeued after an eviction: the eviction's message stays until the scheduler's.
            return
        self.set_pending(rec, self._evaluation_reason(rec), MSG_PENDING_EVALUATION)

    def _evaluation_reason(self, rec: WorkloadRecord) -> str:
        """PendingEvaluation, or the legacy ``Pending`` (gate off, or still marked Evicted).

        With a cluster, QuotaReserved=False/PendingEvaluation beside Evicted=True is
        how Kueue's job integration says an evicted workload's job stopped
        (``agents/kube/stop_signal.py``); the engine writes that pair itself only
        after a stop it made with no cluster behind it, so its own status coming
        back late through a watch cannot release quota.
        """
        if self._granular() and not rec.conditions.is_true(EVICTED):
            return PENDING_EVALUATION
        return PENDING

    def set_pending(self, rec: WorkloadRecord, reason: str, message: str) -> None:
        """QuotaReserved False with why (Kueue's ``UnsetQuotaReservationWithCondition``).

        With ``UnadmittedWorkloadsObservability`` that also writes
        ``Admitted=False/NoReservation`` (its ``SyncAdmittedCondition``: once
        QuotaReserved is set, Admitted is set beside it), so a pending Workload
        carries both conditions; without the gate Admitted is left absent.
        """
        self.set_pending_all((rec,), reason, message)

    def set_pending_all(self, recs: Iterable[WorkloadRecord], reason: str, message: str) -> None:
        """:meth:`set_pending` for each of ``recs``, as many as a backlog holds."""
        now, pool = self.now_ms, self.pool
        granular = self._granular()
        # Equivalent Workloads mostly hold the very same (pooled) conditions: what setting
        # these makes of each pair is worked out once, keyed by the pair's identity. A
        # Workload not visited yet holds conditions made before this loop and still alive,
        # so an id it shows is never one reused by a condition made or freed here.
        outcome: dict[tuple[int, int], tuple[Condition | None, Condition | None]] = {}
        for rec in recs:
            items = rec.conditions.items
            key = (id(items.get(QUOTA_RESERVED)), id(items.get(ADMITTED)))
            # Only a Workload the input shows Admitted without a reservation has any.
            seconds = admitted_seconds(rec, now)
            found = outcome.get(key)
            if found is None:
                conditions = rec.conditions
                reserved = conditions.set(QUOTA_RESERVED, False, reason, message, now, pool)
                admitted = granular and conditions.set(
                    ADMITTED, False, REASON_NO_RESERVATION, MSG_NO_RESERVATION, now, pool
                )
                found = outcome[key] = (
                    items[QUOTA_RESERVED] if reserved else None,
                    items[ADMITTED] if admitted else None,
                )
            else:
                if found[0] is not None:
                    items[QUOTA_RESERVED] = found[0]
                if found[1] is not None:
                    items[ADMITTED] = found[1]
            if found[1] is not None and seconds is not None:
                rec.accumulated_s = (rec.accumulated_s or 0) + seconds
            if found[0] is not None or found[1] is not None:
                self._mark(rec, Action.PENDING)

    # -------------------------------------------------------------- admission

    def admit(self, rec: WorkloadRecord, cq: ClusterQueueRecord, assignment: Assignment) -> None:
        """Reserve quota and admit (Kueue's ``SetQuotaReservation`` then the Admitted condition)."""
        rec.phase = Phase.ADMITTED
        rec.cluster_queue = cq.name
        rec.assignment = assignment.pod_sets
        rec.usage = dict(assignment.usage)
        rec.reserved_ms = self.now_ms
        rec.sticky = False
        rec.evicting = False
        rec.requests_shown = False
        self.cache.add_admitted(rec)
        now = self.now_ms
        rec.conditions.set(
            QUOTA_RESERVED, True, "QuotaReserved", f"Quota reserved in ClusterQueue {cq.name}", now, self.pool
        )
        for kind in (EVICTED, PREEMPTED):
            cond = rec.conditions.get(kind)
            if cond is not None and cond.status == "True":
                rec.conditions.set(kind, False, "QuotaReserved", f"Previously: {cond.message}", now)
        if cq.checks or rec.checks:
            assigned = frozenset(f for psa in rec.assignment for f in psa.flavors.values())
            self._sync_checks(rec, cq, assigned)
        self._sync_admitted(rec)
        if rec.checks:
            # Without checks it is admitted now, and nothing is left for them to decide.
            self._check_outcome(rec)

    # ------------------------------------------------------- admission checks

    def _sync_checks(
        self, rec: WorkloadRecord, cq: ClusterQueueRecord, assigned: frozenset[str] | None
    ) -> None:
        """List the checks the workload needs (Kueue's ``reconcileSyncAdmissionChecks``)."""
        required = ac.required_checks(cq.checks, cq.flavors, assigned)
        synced = ac.sync_checks(rec.checks, required, self.now_ms)
        if synced is not None:
            rec.checks = synced
            self.outbox.touch(rec.key)

    def _sync_admitted(self, rec: WorkloadRecord) -> None:
        """Admitted once quota is reserved and every check is Ready (Kueue's ``SyncAdmittedCondition``)."""
        if ac.all_ready(rec.checks):
            rec.conditions.set(ADMITTED, True, "Admitted", MSG_ADMITTED, self.now_ms, self.pool)
            self._mark(rec, Action.ADMITTED)
            return
        observability = self._granular()
        # Without the gate, SyncAdmittedCondition changes nothing while the workload is
        # as admitted as it was: a workload never admitted gets no Admitted condition.
        if observability or rec.conditions.is_true(ADMITTED):
            reason = "UnsatisfiedAdmissionChecks" if observability else "UnsatisfiedChecks"
            self._unset_admitted(rec, reason, MSG_CHECKS_NOT_READY)
        self._mark(rec, Action.QUOTA_RESERVED)

    def _check_outcome(self, rec: WorkloadRecord) -> None:
        """Act on the checks of a workload holding quota (Kueue's ``reconcileCheckBasedEviction``).

        A Rejected check deactivates and evicts it; a Retry evicts it, to be
        queued again once the checks' requeue delay has passed. Otherwise it is
        admitted once every check is Ready.
        """
        if rec.phase != Phase.ADMITTED or rec.evicting:
            return
        rejected = ac.in_state(rec.checks, ac.REJECTED)
        if rejected:
            rec.deactivated_by = DEACTIVATED_BY_CHECK
            message = f"{MSG_DEACTIVATED} due to {ac.checks_message(rejected, ac.REJECTED)}"
            self.evict(rec, DEACTIVATED_BY_CHECK, message, None)
            return
        retry = ac.in_state(rec.checks, ac.RETRY)
        if retry:
            due = ac.retry_time_ms(rec.checks)
            rec.requeue_at_ms = due if due is not None and due > self.now_ms else None
            self.evict(rec, EVICTED_BY_CHECK, f"Evicted due to {ac.checks_message(retry, ac.RETRY)}", None)
            return
        # Once admitted it stays so, whatever its checks say next, short of a Retry or Rejected.
        if not rec.conditions.is_true(ADMITTED):
            self._sync_admitted(rec)

    def backoff_finished(self, rec: WorkloadRecord) -> None:
        """A retried check's requeue time has come: the workload queues again."""
        if rec.phase != Phase.PENDING or rec.requeue_at_ms is None or rec.requeue_at_ms > self.now_ms:
            return
        self._end_backoff(rec)
        self.place(rec)

    def _end_backoff(self, rec: WorkloadRecord) -> None:
        rec.requeue_at_ms = None
        rec.conditions.set(
            REQUEUED, True, "BackoffFinished", "The workload backoff was finished", self.now_ms
        )
        self.outbox.touch(rec.key)

    def issue_preemptions(self, preemptor: WorkloadRecord, targets: list[Target], cycle: int = 0) -> int:
        """Evict the targets not already being evicted, by key; returns how many.

        ``cycle`` is the scheduling cycle that preempts, for the victims' traces.
        """
        uid = preemptor.obj.metadata.uid or "UNKNOWN"
        job_uid = preemptor.obj.metadata.labels.get(JOB_UID_LABEL) or "UNKNOWN"
        cqs = self.cache.cqs
        preemptor_cq = cqs.get(preemptor.cluster_queue)
        preemptor_path = cq_path(preemptor_cq.node if preemptor_cq else None)
        issued = 0
        for target in sorted(targets, key=lambda t: t.candidate.key):
            victim = self.cache.workloads[target.candidate.key]
            if victim.evicting:
                continue
            victim_cq = cqs.get(target.candidate.cluster_queue)
            victim_path = cq_path(victim_cq.node if victim_cq else None)
            message = preemption_message(target.reason, uid, job_uid, preemptor_path, victim_path)
            victim.trace = trace.preempted(cycle, preemptor.key, preemptor.cluster_queue, target.reason)
            self.evict(victim, "Preempted", message, target.reason)
            issued += 1
        return issued

    def evict(self, rec: WorkloadRecord, reason: str, message: str, preempted_reason: str | None) -> None:
        """Mark an admitted workload Evicted (and Preempted); it keeps its quota until its job stops."""
        rec.evicting = True
        self.cache.candidates_changed(rec.cluster_queue)
        rec.conditions.set(EVICTED, True, reason, message, self.now_ms)
        ac.reset_on_eviction(rec.checks, self.now_ms)
        if preempted_reason is not None:
            rec.conditions.set(PREEMPTED, True, preempted_reason, message, self.now_ms)
        self._mark(rec, Action.EVICTED)

    def stopped(self, rec: WorkloadRecord, *, at_once: bool = False) -> None:
        """The evicted workload's job stopped: its quota is free and it queues again.

        QuotaReserved becomes False with the eviction's message, as Kueue's job
        integration leaves it (``UnsetQuotaReservationWithCondition``): reason
        PendingEvaluation when the runtime stopped the job itself (``at_once``,
        no cluster behind it), otherwise as :meth:`_evaluation_reason` says.
        """
        if rec.phase != Phase.ADMITTED or not rec.evicting:
            return
        evicted = rec.conditions.get(EVICTED)
        reason = evicted.reason if evicted else "Preempted"
        message = evicted.message if evicted else ""
        self._release(rec)
        rec.assignment = []
        rec.phase = Phase.PENDING
        rec.evicting = False
        rec.conditions.set(REQUEUED, reason in ("Preempted", "NodeFailures"), reason, message, self.now_ms)
        pending = PENDING_EVALUATION if at_once and self._granular() else self._evaluation_reason(rec)
        rec.conditions.set(QUOTA_RESERVED, False, pending, message, self.now_ms)
        self._sync_unreserved(rec)
        if reason == EVICTED_BY_CHECK and (rec.requeue_at_ms is None or rec.requeue_at_ms <= self.now_ms):
            self._end_backoff(rec)
        self._mark(rec, Action.REQUEUED)
        self.place(rec)

    def _sync_unreserved(self, rec: WorkloadRecord) -> None:
        """Admitted=False once the quota is released (Kueue's ``SyncAdmittedCondition``).

        With the gate: NoReservation. Without it, only a workload that was admitted
        changes, and it says whether its checks, reset to Pending by the eviction, are
        not all Ready too.
        """
        if self._granular():
            self._unset_admitted(rec, REASON_NO_RESERVATION, MSG_NO_RESERVATION)
        elif rec.conditions.is_true(ADMITTED):
            if ac.all_ready(rec.checks):
                reason, message = REASON_NO_RESERVATION, MSG_NO_RESERVATION
            else:
                reason, message = LEGACY_NO_RESERVATION_CHECKS, MSG_NO_RESERVATION_CHECKS
            self._unset_admitted(rec, reason, message)

    def _unset_admitted(self, rec: WorkloadRecord, reason: str, message: str) -> None:
        """Admitted=False; leaving Admitted=True adds the seconds since to the workload's
        ``accumulatedPastExecutionTimeSeconds`` (``SyncAdmittedCondition``)."""
        seconds = admitted_seconds(rec, self.now_ms)
        if seconds is not None:
            rec.accumulated_s = (rec.accumulated_s or 0) + seconds
        rec.conditions.set(ADMITTED, False, reason, message, self.now_ms)

    def exceed_execution_times(self) -> None:
        """Deactivate and evict each workload admitted for its maximum execution time by now,
        earliest first (Kueue's ``reconcileMaxExecutionTime``, then its eviction of a
        deactivated workload); the accumulated time starts again."""
        for key in self.deadlines.take_due(self.now_ms):
            rec = self.cache.workloads[key]
            rec.deactivated_by = DEACTIVATED_BY_MAX_EXEC
            rec.accumulated_s = None
            self.evict(rec, DEACTIVATED_BY_MAX_EXEC, MSG_MAX_EXEC, None)

    def drain_stopped_queues(self) -> None:
        """Evict, by key, the admitted workloads of queues stopped with ``HoldAndDrain``."""
        cache = self.cache
        workloads = cache.workloads
        running = sorted(k for k, r in workloads.items() if r.phase == Phase.ADMITTED and not r.evicting)
        for key in running:
            rec = workloads[key]
            cq_obj = cache.cq_objs.get(rec.cluster_queue)
            lq = cache.local_queues.get((key[0], rec.obj.spec.queue_name))
            if cq_obj is not None and cq_obj.spec.stop_policy == "HoldAndDrain":
                self.evict(rec, "ClusterQueueStopped", "The ClusterQueue is stopped", None)
            elif lq is not None and lq.spec.stop_policy == "HoldAndDrain":
                self.evict(rec, "LocalQueueStopped", "The LocalQueue is stopped", None)

    def _mark(self, rec: WorkloadRecord, action: Action) -> None:
        rec.last_action = action
        self.outbox.touch(rec.key)
        self.deadlines.track(rec)


def _read_admission(rec: WorkloadRecord, cq_name: str, assignments: Iterable[Any]) -> dict[FR, int]:
    """``rec``'s ClusterQueue and pod set assignments as a ``status.admission`` gives them;
    returns the usage they add up to."""
    rec.cluster_queue = cq_name
    rec.assignment = []
    usage: dict[FR, int] = {}
    pod_sets = {ps.name: ps for ps in rec.obj.spec.pod_sets}
    for psa in assignments:
        ps = pod_sets.get(psa.name)
        count = psa.count if psa.count is not None else (ps.count if ps else 0)
        out = PodSetAssignment(name=psa.name, count=count)
        for resource, flavor in sorted(psa.flavors.items()):
            if resource in psa.resource_usage:
                amount = resource_value(resource, psa.resource_usage[resource])
            elif ps is not None:
                amount = scale(pod_requests(ps.template.spec), out.count).get(resource, 0)
            else:
                amount = 0
            out.flavors[resource] = flavor
            out.usage[resource] = amount
            usage[(flavor, resource)] = usage.get((flavor, resource), 0) + amount
        rec.assignment.append(out)
    return usage
