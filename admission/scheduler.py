"""The scheduler: one scheduling cycle in Kueue's phases.

:meth:`Scheduler.schedule` follows Kueue's ``Scheduler.schedule``
(pkg/scheduler/scheduler.go) phase by phase:

1. **heads** — the head of every active ClusterQueue with work
   (``Manager.Heads``);
2. **snapshot** — the cycle's view of the cache (``Cache.Snapshot``);
3. **nominate** — flavors and, where quota is short, preemption targets for
   each head (``nominate``, ``getAssignments``);
4. **order** — the order heads are tried in (``makeIterator``: the classical
   iterator, or the fair-sharing tournament);
5. **process** — admit what still fits, or issue its preemptions
   (``processEntry``, ``admit``, ``issuePreemptions``);
6. **requeue** — put back what was not admitted (``requeueAndUpdate``).

Kueue requeues after the whole process loop; here each head is requeued as
soon as it is processed. Processing never reads the queues, so the outcome is
the same, and the decisions come out in the order the heads were processed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from kueuestream.admission import podset_reducer, trace
from kueuestream.admission.assignment import (
    Assignment,
    Granular,
    Mode,
    Oracle,
    PodSetRequest,
    assign_flavors,
    no_candidates,
    pending_flavors,
)
from kueuestream.admission.cache import Cache
from kueuestream.admission.fair_sharing import FairSharing
from kueuestream.admission.lifecycle import Lifecycle
from kueuestream.admission.pending_reasons import (
    GATE,
    MISCONFIGURED,
    MSG_NAMESPACE_MISMATCH,
    PENDING,
    WAITING_FOR_PREEMPTED_WORKLOADS,
    WAITING_FOR_QUOTA,
    choose,
)
from kueuestream.admission.preemption import (
    Preemptor,
    Target,
    classical_targets,
    fits,
    remove,
    restore,
)
from kueuestream.admission.queue_manager import QueueManager, RequeueReason
from kueuestream.admission.quota import FR
from kueuestream.admission.snapshot import Snapshot
from kueuestream.admission.state import ClusterQueueRecord, LastAssignment, WorkloadRecord
from kueuestream.admission.status import QUOTA_RESERVED

MSG_NO_LONGER_FITS = "Workload no longer fits after processing another workload"
MSG_OVERLAPPING = "Workload has overlapping preemption targets with another workload"
MSG_BYPASSED = "Bypassed scheduling evaluation because an equivalent workload recently failed"


class EntryKind(Enum):
    """What nomination found for a head."""

    NOT_NOMINATED = 0
    FIT = 1
    PREEMPT = 2


@dataclass(slots=True)
class Entry:
    """A head in the cycle (Kueue's scheduler ``entry``)."""

    rec: WorkloadRecord
    cq: ClusterQueueRecord
    kind: EntryKind
    assignment: Assignment | None = None
    targets: list[Target] = field(default_factory=list)
    message: str = ""
    # The QuotaReserved=False reason it gets if not admitted (Kueue's ``quotaReservedReason``).
    reason: str = PENDING
    # Where the head goes after processing; None once it is admitted.
    requeue_reason: RequeueReason | None = RequeueReason.GENERIC


class Scheduler:
    """Runs scheduling cycles over the cache and the queues."""

    # Whether the last cycle issued preemptions; a class default for states pickled before it.
    evicted_in_cycle = False

    def __init__(
        self, cache: Cache, queues: QueueManager, lifecycle: Lifecycle, fair_sharing: FairSharing
    ) -> None:
        self.cache = cache
        self.queues = queues
        self.lifecycle = lifecycle
        self.fair_sharing = fair_sharing
        self.cycles = 0
        # The UnadmittedWorkloadsObservability gate and the quota check, read at the start of each cycle.
        self.granular = True
        self.only_declared = False

    def _reason(self, granular: str) -> str:
        """``granular`` with the gate on, the legacy ``Pending`` with it off."""
        return choose(self.granular, granular, PENDING)

    def schedule(self) -> bool:
        """One cycle; True when it admitted a workload, issued a preemption or parked a head."""
        # 1. Heads: pop every active ClusterQueue's head (Manager.Heads).
        heads = self.queues.heads(self.cache.cqs)
        if not heads:
            return False
        self.cycles += 1
        self.evicted_in_cycle = False
        # 2. Snapshot: what the cycle reserves or releases is undone when it ends (Cache.Snapshot).
        snapshot = Snapshot(self.cache)
        self.granular = snapshot.config.gate(GATE)
        self.only_declared = snapshot.config.quota_check == "OnlyDeclared"
        try:
            # 3. Nominate: flavors and preemption targets per head (nominate).
            workloads = self.cache.workloads
            entries = [self._nominate(workloads[key], cq, snapshot) for key, cq in heads]
            progress = False
            # 4. Order (makeIterator), 5. process (processEntry), 6. requeue (requeueAndUpdate).
            for entry in self._ordered(entries, snapshot):
                progress |= self._process(entry, snapshot)
                if entry.requeue_reason is not None:
                    progress |= self._requeue(entry)
        finally:
            snapshot.rollback()
        return progress

    # -------------------------------------------------------------- 3. nominate

    def _nominate(self, rec: WorkloadRecord, cq: ClusterQueueRecord, snapshot: Snapshot) -> Entry:
        """Flavors for the head and, when it needs them, preemption targets (Kueue's ``nominate``)."""
        if not self.cache.selects_namespace(cq, rec.key[0]):
            return self._misconfigured(rec, cq, MSG_NAMESPACE_MISMATCH, RequeueReason.NAMESPACE_MISMATCH)
        if rec.resources_problem:
            # The rest of Kueue's ValidateAdmissibility: requests above limits, LimitRanges.
            return self._misconfigured(rec, cq, rec.resources_problem, RequeueReason.INVALID_RESOURCES)
        pod_sets = rec.pod_sets
        assert pod_sets is not None
        only_declared = self.only_declared
        oracle = self._oracle(rec, cq, snapshot) if cq.view.can_preempt else no_candidates
        last = self._still_current(rec, cq)
        resume = last.tried if last is not None else ()
        entry, full = self._attempt(rec, cq, pod_sets, snapshot, only_declared, oracle, resume)
        if entry is not None:
            return self._nominated(entry)
        if snapshot.config.gate("PartialAdmission"):
            # Kueue's getInitialAssignments: fewer pods, down to each minCount, as the reducer finds.
            partial = podset_reducer.search(
                [ps.count for ps in pod_sets],
                [ps.min_count for ps in pod_sets],
                lambda counts: self._attempt(
                    rec,
                    cq,
                    [ps.scaled_to(n) for ps, n in zip(pod_sets, counts, strict=True)],
                    snapshot,
                    only_declared,
                    oracle,
                    resume,
                )[0],
            )
            if partial is not None:
                return self._nominated(partial)
        # No flavor fits, or preemption could make room but nothing can be preempted now.
        reason = self._reason((full.no_fit_reason if full.mode == Mode.NO_FIT else "") or WAITING_FOR_QUOTA)
        if _changes(rec, reason, full.message):
            # Built only when the status changes: a Workload waiting for the same reason costs nothing.
            rec.trace = trace.not_admitted(
                self.cycles,
                reason,
                full.message,
                cq.view,
                pod_sets,
                full,
                snapshot.flavors,
                only_declared,
                cq.view.can_preempt,
                snapshot.nodes,
                snapshot.admitted,
                cq.obj.spec.preemption,
                rec.priority,
            )
        # Kueue keeps the search's progress only for a head that found no flavor or no
        # candidates; any other outcome clears it.
        generation = self.cache.generations.get(cq.name, 0)
        run = last.run + 1 if last is not None and pending_flavors(last.tried) else 0
        rec.last_assignment = LastAssignment(cq.name, generation, tuple(full.tried), run)
        return Entry(rec, cq, EntryKind.NOT_NOMINATED, full, message=full.message, reason=reason)

    def _misconfigured(
        self, rec: WorkloadRecord, cq: ClusterQueueRecord, message: str, requeue: RequeueReason
    ) -> Entry:
        """A head ``workload.ValidateAdmissibility`` refuses, before any flavor search (in ``nominate``)."""
        reason = self._reason(MISCONFIGURED)
        if _changes(rec, reason, message):
            rec.trace = trace.skipped(self.cycles, reason, message, cq.name)
        return Entry(rec, cq, EntryKind.NOT_NOMINATED, message=message, reason=reason, requeue_reason=requeue)

    def _still_current(self, rec: WorkloadRecord, cq: ClusterQueueRecord) -> LastAssignment | None:
        """Where the head's last flavor search stopped, which this one resumes after (Kueue's
        ``getAssignments``, with FlavorFungibilityPreserveScanProgress off as in 0.19),
        unless quota may have freed in the ClusterQueue since (``lastAssignmentOutdated``)."""
        last = rec.last_assignment
        if last is not None and (
            last.cluster_queue != cq.name or self.cache.generations.get(cq.name, 0) > last.generation
        ):
            rec.last_assignment = last = None
        return last

    @staticmethod
    def _nominated(entry: Entry) -> Entry:
        # Skipped, preempting or admitted: the next search starts from the first flavor.
        entry.rec.last_assignment = None
        return entry

    def _attempt(
        self,
        rec: WorkloadRecord,
        cq: ClusterQueueRecord,
        pod_sets: Sequence[PodSetRequest],
        snapshot: Snapshot,
        only_declared: bool,
        oracle: Oracle,
        resume: Sequence[dict[str, int]],
    ) -> tuple[Entry | None, Assignment]:
        """Flavors for these pod counts, and the entry when they fit or preemption makes room."""
        assignment = assign_flavors(cq.view, pod_sets, snapshot.flavors, only_declared, oracle, resume)
        if assignment.mode == Mode.FIT:
            return Entry(rec, cq, EntryKind.FIT, assignment), assignment
        if assignment.mode == Mode.PREEMPT:
            targets = self._targets(rec, cq, assignment, snapshot)
            if targets:
                return Entry(rec, cq, EntryKind.PREEMPT, assignment, targets, assignment.message), assignment
        return None, assignment

    def _targets(
        self, rec: WorkloadRecord, cq: ClusterQueueRecord, assignment: Assignment, snapshot: Snapshot
    ) -> list[Target]:
        """The workloads to preempt so the head fits (Kueue's ``Preemptor.GetTargets``)."""
        pre = Preemptor(
            cluster_queue=cq.name,
            priority=rec.priority,
            created_ms=rec.queued_ms,
            # Kueue's Assignment.TotalRequestsFor leaves zero requests out: a request of 0
            # would otherwise count as borrowing where the queue is over its nominal quota.
            usage={fr: value for fr, value in assignment.usage.items() if value},
            preempt_frs=frozenset(assignment.preempt_frs),
        )
        return self._preemption_targets(pre, cq, snapshot)

    def _oracle(self, rec: WorkloadRecord, cq: ClusterQueueRecord, snapshot: Snapshot) -> Oracle:
        """What preemption could do for one pair of a flavor (Kueue's ``SimulatePreemption``)."""

        def simulate(fr: FR, value: int) -> tuple[Granular, int]:
            pre = Preemptor(cq.name, rec.priority, rec.queued_ms, {fr: value}, frozenset((fr,)))
            targets = self._preemption_targets(pre, cq, snapshot)
            if not targets:
                return Granular.NO_CANDIDATES, 0
            for target in targets:
                remove(snapshot.nodes, target.candidate)
            borrowing, _ = cq.node.borrowing_height(fr, value)
            for target in reversed(targets):
                restore(snapshot.nodes, target.candidate)
            if any(t.candidate.cluster_queue == cq.name for t in targets):
                return Granular.PREEMPT, borrowing
            return Granular.RECLAIM, borrowing

        return simulate

    def _preemption_targets(self, pre: Preemptor, cq: ClusterQueueRecord, snapshot: Snapshot) -> list[Target]:
        if snapshot.config.fair_sharing_enabled:
            return self.fair_sharing.targets(pre, cq, snapshot.nodes, snapshot.admitted)
        return classical_targets(pre, cq.obj.spec.preemption, cq.node, snapshot.nodes, snapshot.admitted)

    # ----------------------------------------------------------------- 4. order

    def _ordered(self, entries: list[Entry], snapshot: Snapshot) -> Iterable[Entry]:
        """The heads in the order to try them (Kueue's ``makeIterator``)."""
        if snapshot.config.fair_sharing_enabled:
            return self.fair_sharing.order(entries)
        return classical_order(entries, snapshot.config.gate("PrioritySortingWithinCohort"))

    # --------------------------------------------------------------- 5. process

    def _process(self, entry: Entry, snapshot: Snapshot) -> bool:
        """Admit the head if it still fits, or issue its preemptions (Kueue's ``processEntry``).

        Returns True when it admitted the head or evicted a workload for it.
        """
        rec, cq, lifecycle = entry.rec, entry.cq, self.lifecycle
        if entry.kind == EntryKind.NOT_NOMINATED:
            rec.sticky = False
            waiting = entry.assignment
            if waiting is not None and waiting.mode == Mode.PREEMPT and not _can_always_reclaim(cq):
                # Kueue's reserveCapacityForUnreclaimablePreempt: what it would preempt for
                # stays out of reach of the heads after it this cycle, since its ClusterQueue
                # might not get lent quota back.
                snapshot.reserve(cq.node, _unreclaimable(cq, waiting))
            lifecycle.set_pending(rec, entry.reason, entry.message)
            return False
        assignment = entry.assignment
        assert assignment is not None
        if entry.kind == EntryKind.FIT:
            if fits(cq.node, assignment.usage, allow_borrowing=True):
                rec.trace = trace.admitted(self.cycles, cq.name, assignment)
                lifecycle.admit(rec, cq, assignment)
                entry.requeue_reason = None
                return True
            return self._skip(entry, MSG_NO_LONGER_FITS)
        if any(t.candidate.key in snapshot.preempted for t in entry.targets):
            return self._skip(entry, MSG_OVERLAPPING)
        # The victims' quota counts as released for the rest of the cycle, as
        # Kueue's fits() simulates their removal; taken back if the head still does not fit.
        mark = snapshot.mark()
        for target in entry.targets:
            snapshot.release(snapshot.nodes[target.candidate.cluster_queue], target.candidate.usage)
        if not fits(cq.node, assignment.usage, allow_borrowing=True):
            snapshot.rollback(mark)
            return self._skip(entry, MSG_NO_LONGER_FITS)
        snapshot.reserve(cq.node, assignment.usage)
        snapshot.preempted.update(t.candidate.key for t in entry.targets)
        issued = lifecycle.issue_preemptions(rec, entry.targets, self.cycles)
        rec.sticky = True
        entry.reason = self._reason(WAITING_FOR_PREEMPTED_WORKLOADS)
        message = f"{entry.message}. Pending the preemption of {len(entry.targets)} workload(s)"
        if _changes(rec, entry.reason, message):
            # The trace belongs to the cycle that changed the status, not to a later one that repeats it.
            rec.trace = trace.preempting(self.cycles, cq.name, entry.reason, entry.targets)
        lifecycle.set_pending(rec, entry.reason, message)
        entry.requeue_reason = RequeueReason.PENDING_PREEMPTION
        self.evicted_in_cycle |= issued > 0
        return issued > 0

    def _skip(self, entry: Entry, message: str) -> bool:
        """The head was nominated but cannot go ahead this cycle; it goes back to the head."""
        entry.reason, entry.message = self._reason(WAITING_FOR_QUOTA), message
        if _changes(entry.rec, entry.reason, message):
            entry.rec.trace = trace.skipped(self.cycles, entry.reason, message, entry.cq.name)
        self.lifecycle.set_pending(entry.rec, entry.reason, message)
        entry.requeue_reason = RequeueReason.FAILED_AFTER_NOMINATION
        return False

    # --------------------------------------------------------------- 6. requeue

    def _requeue(self, entry: Entry) -> bool:
        """Put the head back in its queue (Kueue's ``requeueAndUpdate``); True when parked."""
        assert entry.requeue_reason is not None
        rec = entry.rec
        if not rec.requests_shown:
            rec.requests_shown = True
            self.lifecycle.outbox.touch(rec.key)
        last = rec.last_assignment
        resume = last is not None and pending_flavors(last.tried)
        parked = self.queues.requeue(rec, entry.cq.name, entry.requeue_reason, resume)
        if parked is None:
            if last is None or not resume:
                return False
            # Kueue's loop pops it again at once to search the flavors left. Its searches
            # could go on alternating between pod sets; here a run of them ends after as
            # many cycles as the ClusterQueue's flavors (over its resource groups) times
            # the Workload's pod sets, and the head waits for the next event.
            limit = sum(len(g.flavors) for g in entry.cq.view.groups) * len(rec.pod_sets or ())
            return last.run < limit
        # Equivalent workloads wait with it and take its reason, in the words of Kueue's
        # workload controller for a workload bulk-moved behind an equivalent one
        # (SchedulingEquivalenceHashing). Without the gate that controller has no words
        # for them (resolveLegacyUnadmittedQuotaReservedCondition): they stay as they are.
        if not self.granular:
            return True
        workloads = self.cache.workloads
        reason = entry.reason
        # One trace for them all: a decision's trace is read, never changed.
        same_as = trace.equivalent(self.cycles, reason, rec.key)
        others = [workloads[key] for key in parked]
        others = [other for other in others if _changes(other, reason, MSG_BYPASSED)]
        for other in others:
            other.trace = same_as
        self.lifecycle.set_pending_all(others, reason, MSG_BYPASSED)
        return True


def _can_always_reclaim(cq: ClusterQueueRecord) -> bool:
    """Whether the ClusterQueue can always take back what it lends (Kueue's ``CanAlwaysReclaim``)."""
    return cq.obj.spec.preemption.reclaim_within_cohort == "Any"


def _unreclaimable(cq: ClusterQueueRecord, assignment: Assignment) -> dict[FR, int]:
    """What a head waiting for preemption without candidates holds (Kueue's
    ``quotaResourcesToReserve``): its usage, capped at what is left of the ClusterQueue's
    nominal quota, or, when it borrows, of nominal quota plus borrowing limit."""
    node = cq.node
    held: dict[FR, int] = {}
    for fr, amount in sorted(assignment.usage.items()):
        quota = node.quotas.get(fr)
        nominal = quota.nominal if quota else 0
        used = node.usage.get(fr, 0)
        if assignment.borrowing > 0:
            limit = quota.borrowing_limit if quota else 0
            hold = amount if limit is None else min(amount, nominal + limit - used)
        else:
            hold = min(amount, nominal - used)
        if hold > 0:
            held[fr] = hold
    return held


def _changes(rec: WorkloadRecord, reason: str, message: str) -> bool:
    """Whether setting this pending reason and message changes the Workload's status."""
    cond = rec.conditions.get(QUOTA_RESERVED)
    return cond is None or cond.status != "False" or (cond.reason, cond.message) != (reason, message)


def classical_order(entries: list[Entry], by_priority: bool) -> list[Entry]:
    """Kueue's ``makeClassicalIterator``: heads that borrow less high in the cohort tree
    first (0: not at all), then by priority (with PrioritySortingWithinCohort), then the
    earlier queue time; keys break ties."""

    def key(e: Entry) -> tuple[object, ...]:
        borrows = e.assignment.borrowing if e.assignment else 0
        prio = -e.rec.priority if by_priority else 0
        return (borrows, prio, e.rec.queued_ms, e.rec.key)

    return sorted(entries, key=key)
