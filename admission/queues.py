"""Per-ClusterQueue pending queues: an ordered active heap and an inadmissible set.

BestEffortFIFO parks a head that does not fit among the inadmissible ones so
the next can be tried; StrictFIFO puts it straight back at the head, blocking
the queue. Inadmissible workloads return to the heap when something in their
cohort tree changes.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

WorkloadKey = tuple[str, str]
# (sticky last, priority descending, queue-order time, namespace, name)
OrderKey = tuple[bool, int, int, str, str]


@dataclass(slots=True)
class PendingQueue:
    strict_fifo: bool
    heap: list[OrderKey] = field(default_factory=list)
    active: dict[WorkloadKey, OrderKey] = field(default_factory=dict)
    inadmissible: dict[WorkloadKey, OrderKey] = field(default_factory=dict)

    def push(self, key: WorkloadKey, order: OrderKey) -> None:
        self.inadmissible.pop(key, None)
        if self.active.get(key) == order:
            return
        self.active[key] = order
        heapq.heappush(self.heap, order)

    def park(self, key: WorkloadKey, order: OrderKey) -> None:
        self.active.pop(key, None)
        self.inadmissible[key] = order

    def remove(self, key: WorkloadKey) -> None:
        self.active.pop(key, None)
        self.inadmissible.pop(key, None)

    def pop(self) -> WorkloadKey | None:
        while self.heap:
            order = heapq.heappop(self.heap)
            key = (order[3], order[4])
            if self.active.get(key) == order:
                del self.active[key]
                return key
        return None

    def requeue_inadmissible(self) -> bool:
        if not self.inadmissible:
            return False
        moved = sorted(self.inadmissible.items(), key=lambda kv: kv[1])
        self.inadmissible.clear()
        for key, order in moved:
            self.push(key, order)
        return True

    def __contains__(self, key: WorkloadKey) -> bool:
        return key in self.active or key in self.inadmissible

    def __len__(self) -> int:
        return len(self.active) + len(self.inadmissible)
