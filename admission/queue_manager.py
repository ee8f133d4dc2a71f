"""The queue manager: pending workloads, queued by ClusterQueue.

Kueue's queue ``Manager`` (pkg/cache/queue) keeps one queue per ClusterQueue,
hands the scheduler every queue's head each cycle (``Manager.Heads``), takes
back the heads the cycle did not admit (``RequeueWorkload``), and moves a
cohort tree's inadmissible workloads back into their queues a second after
capacity frees there (``requeueWorkloadsCohort``, called by the inadmissible
workload requeuer after its batch period). This is the same, in event time.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from kueuestream.admission.queues import GroupKey, PendingQueue, WorkloadKey
from kueuestream.admission.state import ClusterQueueRecord, WorkloadRecord

# Kueue moves a cohort tree's inadmissible workloads back to their queues a second
# after capacity frees there, in one batch for everything freed meanwhile.
REQUEUE_BATCH_MS = 1000


class RequeueReason(Enum):
    """Why a head goes back to its queue (Kueue's ``RequeueReason``); decides where it goes."""

    GENERIC = "Generic"
    NAMESPACE_MISMATCH = "NamespaceMismatch"
    # Kueue's Generic reason for a head its ValidateAdmissibility refused for its resources:
    # unlike a head that found no flavor, it sets no equivalent workload aside.
    INVALID_RESOURCES = "InvalidResources"
    FAILED_AFTER_NOMINATION = "FailedAfterNomination"
    PENDING_PREEMPTION = "PendingPreemption"


class QueueManager:
    """One pending queue per ClusterQueue, the queues with work, and the requeue timers."""

    def __init__(self) -> None:
        self.queues: dict[str, PendingQueue] = {}
        # ClusterQueues whose queue may have a workload to try.
        self.ready: set[str] = set()
        # Cohort trees with freed capacity, and when their parked workloads get another try.
        self.requeue_due: dict[str, int] = {}
        # Workloads kept out of their queue until a time (a retried admission check's backoff).
        self.held: dict[WorkloadKey, int] = {}

    def reset(self, cqs: Mapping[str, ClusterQueueRecord], fresh: bool) -> None:
        """Empty queues for a freshly built quota tree; the caller queues every pending workload again.

        ``fresh``: every pending workload will be tried, so the retries asked for are moot.
        """
        self.queues = {
            name: PendingQueue(strict_fifo=cq.obj.spec.queueing_strategy == "StrictFIFO")
            for name, cq in cqs.items()
        }
        if fresh:
            # Kueue's requeuer would make one retry of all the requests of a batch period, not two.
            self.requeue_due.clear()

    def parked(self) -> dict[WorkloadKey, tuple[str, GroupKey]]:
        """Every parked workload, with its ClusterQueue and group."""
        return {key: (name, gkey) for name in sorted(self.queues) for key, gkey in self.queues[name].parked()}

    def set_aside(self, key: WorkloadKey, cq_name: str, gkey: GroupKey) -> None:
        """Park a queued workload again, in the group it was parked with (see ``PendingQueue.set_aside``)."""
        self.queues[cq_name].set_aside(key, gkey)

    def push(self, rec: WorkloadRecord, cq_name: str, stated: bool) -> None:
        """Queue a pending workload to be tried (Kueue's ``AddOrUpdateWorkload``).

        ``stated`` says whether it already carries a pending reason; one that does
        not is given its group's reason if the group is parked.
        """
        self.queues[cq_name].activate(rec.key, rec.order_key(), rec.equivalence, stated)
        self.ready.add(cq_name)

    def delete(self, rec: WorkloadRecord) -> None:
        """Take a workload out of its queue, if it is in one (Kueue's ``DeleteWorkload``)."""
        self.held.pop(rec.key, None)
        queue = self.queues.get(rec.cluster_queue)
        if queue is not None:
            queue.remove(rec.key)

    def heads(self, cqs: Mapping[str, ClusterQueueRecord]) -> list[tuple[WorkloadKey, ClusterQueueRecord]]:
        """Pop the head of every active ClusterQueue with work, by name (Kueue's ``Manager.heads``)."""
        heads: list[tuple[WorkloadKey, ClusterQueueRecord]] = []
        for name in sorted(self.ready):
            cq = cqs.get(name)
            key = self.queues[name].pop() if cq is not None and not cq.inactive_reason else None
            if cq is None or key is None:
                self.ready.discard(name)
            else:
                heads.append((key, cq))
        return heads

    def requeue(
        self, rec: WorkloadRecord, cq_name: str, reason: RequeueReason, resume: bool = False
    ) -> list[WorkloadKey] | None:
        """Put back a head the cycle did not admit (Kueue's ``RequeueIfNotPresent``).

        StrictFIFO puts it straight back at the head unless its namespace no longer
        matches; BestEffortFIFO does so only after a failure past nomination, while
        its preemptions complete, or when its flavor search has flavors left to try
        (``resume``, Kueue's ``PendingFlavors``), and otherwise parks it, with its
        equivalent workloads, among the inadmissible ones. Returns None when it went
        back to the head, else the parked members that had no pending reason yet.
        """
        queue = self.queues[cq_name]
        if resume:
            immediate = True
        elif queue.strict_fifo:
            immediate = reason != RequeueReason.NAMESPACE_MISMATCH
        else:
            immediate = reason in (RequeueReason.FAILED_AFTER_NOMINATION, RequeueReason.PENDING_PREEMPTION)
        if immediate:
            queue.activate(rec.key, rec.order_key(), rec.equivalence)
            self.ready.add(cq_name)
            return None
        if reason in (RequeueReason.NAMESPACE_MISMATCH, RequeueReason.INVALID_RESOURCES):
            # Kueue sets equivalent Workloads aside only after NoFit or PreemptionNoCandidates
            # (requeueIfNotPresent): this one is parked alone, its equivalents stay queued.
            return queue.park(rec.key, rec.order_key(), (reason.value, rec.key))
        return queue.park(rec.key, rec.order_key(), rec.equivalence)

    def requeue_later(self, root: str, now_ms: int) -> None:
        """Capacity freed in the tree ``root``: retry its parked workloads a batch period from now."""
        # Like Kueue's delaying work queue: due a batch period after the first request,
        # and later requests until then ride along.
        self.requeue_due.setdefault(root, now_ms + REQUEUE_BATCH_MS)

    def due_roots(self, now_ms: int) -> list[str]:
        """Take the trees whose parked workloads are due another try, by name."""
        due = [root for root in sorted(self.requeue_due) if self.requeue_due[root] <= now_ms]
        for root in due:
            del self.requeue_due[root]
        return due

    def requeue_inadmissible(self, cq_name: str) -> None:
        """Move a ClusterQueue's parked workloads back into its queue (``queueInadmissibleWorkloads``)."""
        if self.queues[cq_name].requeue_inadmissible():
            self.ready.add(cq_name)

    def hold(self, key: WorkloadKey, until_ms: int) -> None:
        """Keep a workload out of its queue until ``until_ms`` (Kueue's ``requeueState.requeueAt``)."""
        self.held[key] = until_ms

    def due_held(self, now_ms: int) -> list[WorkloadKey]:
        """Take the held workloads whose time has come, by key."""
        due = sorted(key for key, until in self.held.items() if until <= now_ms)
        for key in due:
            del self.held[key]
        return due

    def next_wakeup_ms(self) -> int | None:
        """When parked or held workloads get their next try, or None when nothing waits."""
        times = list(self.requeue_due.values()) + list(self.held.values())
        return min(times) if times else None
