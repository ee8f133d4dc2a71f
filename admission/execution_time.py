"""How long Workloads have been admitted, against their ``maximumExecutionTimeSeconds``.

Kueue's workload controller (``reconcileMaxExecutionTime``) deactivates a
Workload once it has been admitted, over all its admissions, for
``spec.maximumExecutionTimeSeconds`` (a Job's
``kueue.x-k8s.io/max-exec-time-seconds`` label): the time since its
``Admitted`` condition turned True plus
``status.accumulatedPastExecutionTimeSeconds``, the seconds of the admissions
before (``SyncAdmittedCondition`` adds each when ``Admitted`` turns False).
Times are read as the API server keeps a condition's: to the second.
"""

from __future__ import annotations

import heapq

from kueuestream.admission.queues import WorkloadKey
from kueuestream.admission.state import Phase, WorkloadRecord
from kueuestream.admission.status import ADMITTED


def _seconds(ms: int) -> int:
    """Whole seconds, as Go's ``int32(d.Seconds())`` truncates a duration toward zero."""
    return ms // 1000 if ms >= 0 else -(-ms // 1000)


def _admitted_since_ms(rec: WorkloadRecord) -> int | None:
    """When its ``Admitted`` condition turned True, to the second, or None while not admitted."""
    admitted = rec.conditions.get(ADMITTED)
    if admitted is None or admitted.status != "True":
        return None
    return admitted.time_ms // 1000 * 1000


def admitted_seconds(rec: WorkloadRecord, now_ms: int) -> int | None:
    """Seconds since its ``Admitted`` condition turned True, or None while not admitted."""
    since = _admitted_since_ms(rec)
    return None if since is None else _seconds(now_ms - since)


def deadline_ms(rec: WorkloadRecord) -> int | None:
    """When an admitted, running ``rec`` exceeds its maximum execution time, or None when it
    has no limit, is not admitted, or is being evicted already."""
    limit = rec.obj.spec.maximum_execution_time_seconds
    if limit is None or rec.phase != Phase.ADMITTED or rec.evicting:
        return None
    since = _admitted_since_ms(rec)
    return None if since is None else since + (limit - (rec.accumulated_s or 0)) * 1000


class ExecutionDeadlines:
    """The deadline of each Workload that has one, the earliest found at once."""

    def __init__(self) -> None:
        self._by_key: dict[WorkloadKey, int] = {}
        # (deadline, key), with entries left behind by changes skipped when met.
        self._heap: list[tuple[int, WorkloadKey]] = []

    def track(self, rec: WorkloadRecord) -> None:
        """Note ``rec``'s deadline as it stands now (none, or a new one)."""
        deadline = deadline_ms(rec)
        if deadline is None:
            self._by_key.pop(rec.key, None)
        elif self._by_key.get(rec.key) != deadline:
            self._by_key[rec.key] = deadline
            heapq.heappush(self._heap, (deadline, rec.key))

    def forget(self, key: WorkloadKey) -> None:
        self._by_key.pop(key, None)

    def next_ms(self) -> int | None:
        """The earliest deadline, or None."""
        heap = self._heap
        while heap and self._by_key.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def take_due(self, now_ms: int) -> list[WorkloadKey]:
        """The Workloads whose deadline has come, earliest first (then by key), no longer tracked."""
        due: list[WorkloadKey] = []
        while (first := self.next_ms()) is not None and first <= now_ms:
            _, key = heapq.heappop(self._heap)
            del self._by_key[key]
            due.append(key)
        return due
