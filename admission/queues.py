"""Per-ClusterQueue pending queues, with equivalent workloads kept together.

BestEffortFIFO parks a head that does not fit among the inadmissible ones so
the next can be tried; StrictFIFO puts it straight back at the head, blocking
the queue. Inadmissible workloads return to the heap when something in their
cohort tree changes.

Workloads asking for the same thing in the same way (same priority, pod sets
and scheduling constraints, whatever their namespace) are equivalent: when one
does not fit, none does, so the whole group is parked at once and returns at
once. This is Kueue's scheduling-equivalence hashing; it turns a wall of
identical pending jobs into one entry per group.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from dataclasses import dataclass, field

WorkloadKey = tuple[str, str]
# (sticky last, priority descending, queue-order time, namespace, name)
OrderKey = tuple[bool, int, int, str, str]
GroupKey = Hashable


@dataclass(slots=True)
class _Group:
    members: list[OrderKey] = field(default_factory=list)
    parked: bool = False
    # Members that never had a pending reason, to be given the group's when it parks.
    unstated: list[WorkloadKey] = field(default_factory=list)
    # The group's entry in the queue's heap, if it has one there: one entry per
    # group, however many members join it.
    advertised: OrderKey | None = None


@dataclass(slots=True)
class PendingQueue:
    strict_fifo: bool
    # Current order key of every queued workload; entries elsewhere are checked against it.
    order: dict[WorkloadKey, OrderKey] = field(default_factory=dict)
    group_of: dict[WorkloadKey, GroupKey] = field(default_factory=dict)
    groups: dict[GroupKey, _Group] = field(default_factory=dict)
    # (order, push count, group): a workload's entry left behind in one group can tie
    # with its entry in another on the order key; the count decides, so group keys,
    # which need not be comparable with one another, are never compared.
    heap: list[tuple[OrderKey, int, GroupKey]] = field(default_factory=list)
    pushes: int = 0

    def _best(self, gkey: GroupKey, group: _Group) -> OrderKey | None:
        """The group's first member still queued in it; entries of members gone are dropped on the way.

        A member counts only while it is queued in this group: a workload moved
        to another group keeps its order key, and its entry left behind here
        must not stand for it.
        """
        order, group_of = self.order, self.group_of
        while group.members:
            top = group.members[0]
            key = (top[3], top[4])
            if order.get(key) == top and group_of.get(key) == gkey:
                return top
            heapq.heappop(group.members)
        return None

    def _advertise(self, gkey: GroupKey, group: _Group) -> None:
        """Give an unparked group an entry in the heap at its best member, unless it has one."""
        best = self._best(gkey, group)
        if best is not None and not group.parked and best != group.advertised:
            self.pushes += 1
            heapq.heappush(self.heap, (best, self.pushes, gkey))
            group.advertised = best

    def push(self, key: WorkloadKey, order: OrderKey, gkey: GroupKey, stated: bool = True) -> None:
        """Queue a workload; it joins its group, parked or not."""
        if key in self.order:
            if self.order[key] == order and self.group_of[key] == gkey:
                return
            self.remove(key)
        self.order[key] = order
        self.group_of[key] = gkey
        group = self.groups.get(gkey)
        if group is None:
            group = self.groups[gkey] = _Group()
        heapq.heappush(group.members, order)
        if not stated:
            group.unstated.append(key)
        advertised = group.advertised
        # Behind the best member of a group with its entry in the heap: nothing to move.
        if advertised is None or order < advertised or group.parked:
            self._advertise(gkey, group)

    def activate(self, key: WorkloadKey, order: OrderKey, gkey: GroupKey, stated: bool = True) -> None:
        """Queue a workload to be tried at once, and its group with it."""
        self.push(key, order, gkey, stated)
        group = self.groups[gkey]
        if group.parked:
            group.parked = False
            self._advertise(gkey, group)

    def park(self, key: WorkloadKey, order: OrderKey, gkey: GroupKey) -> list[WorkloadKey]:
        """Back into its group, and the group set aside; returns members that had no reason yet."""
        self.push(key, order, gkey)
        group = self.groups[gkey]
        group.parked = True
        unstated = [k for k in group.unstated if k in self.order and k != key]
        group.unstated.clear()
        return unstated

    def remove(self, key: WorkloadKey) -> None:
        order = self.order.pop(key, None)
        if order is None:
            return
        gkey = self.group_of.pop(key)
        group = self.groups[gkey]
        if self._best(gkey, group) is None:
            del self.groups[gkey]
        elif order == group.advertised:
            self._advertise(gkey, group)

    def pop(self) -> WorkloadKey | None:
        while self.heap:
            order, _, gkey = heapq.heappop(self.heap)
            group = self.groups.get(gkey)
            if group is None or group.advertised != order:
                continue  # the group is gone, or has its entry elsewhere in the heap
            group.advertised = None
            if group.parked:
                continue  # it gets a new entry when it is unparked
            if self._best(gkey, group) != order:
                self._advertise(gkey, group)
                continue
            heapq.heappop(group.members)
            key = (order[3], order[4])
            del self.order[key]
            del self.group_of[key]
            if self._best(gkey, group) is None:
                del self.groups[gkey]
            else:
                self._advertise(gkey, group)
            return key
        return None

    def parked(self) -> list[tuple[WorkloadKey, GroupKey]]:
        """Every parked workload with its group, in queue order."""
        found: dict[WorkloadKey, GroupKey] = {}
        order, group_of = self.order, self.group_of
        for gkey, group in self.groups.items():
            if group.parked:
                # The members' heap may still hold entries of workloads gone or moved.
                for entry in group.members:
                    key = (entry[3], entry[4])
                    if order.get(key) == entry and group_of.get(key) == gkey:
                        found[key] = gkey
        return sorted(found.items(), key=lambda kg: order[kg[0]])

    def set_aside(self, key: WorkloadKey, gkey: GroupKey) -> None:
        """A queued workload back among the parked members of ``gkey``, its reason kept."""
        self.push(key, self.order[key], gkey)
        self.groups[gkey].parked = True

    def requeue_inadmissible(self) -> bool:
        moved = False
        for gkey, group in self.groups.items():
            if group.parked:
                group.parked = False
                self._advertise(gkey, group)
                moved = True
        return moved

    def has_active(self) -> bool:
        return bool(self.heap)

    def __contains__(self, key: WorkloadKey) -> bool:
        return key in self.order

    def __len__(self) -> int:
        return len(self.order)
