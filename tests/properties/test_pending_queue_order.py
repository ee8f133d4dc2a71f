"""A ClusterQueue's pending queue hands out its workloads in Kueue's order, whatever happened before.

Kueue's ``ClusterQueue`` queue (pkg/cache/queue, ``Pop`` over its heap ordered by
``queueOrderingFunc``) always hands out the first pending workload in queue
order; BestEffortFIFO moves a head that does not fit to the inadmissible ones
(``requeueIfNotPresent``) until ``QueueInadmissibleWorkloads`` moves them back.
Kueuestream's queue keeps equivalent workloads in groups with one heap entry
per group; this checks it against a plain list of every queued workload, over
any sequence of the queue manager's operations (queueing a workload to be
tried, parking a head, again with another order, removing one, requeueing the
inadmissible, popping): each pop returns the first workload in order among
those not parked, or nothing when all are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import example, given, settings
from hypothesis import strategies as st

from kueuestream.admission.queues import GroupKey, OrderKey, PendingQueue, WorkloadKey

NAMES = [f"wl-{i}" for i in range(6)]


@dataclass
class Model:
    """Every queued workload with its order and group, and the parked groups."""

    queued: dict[WorkloadKey, tuple[OrderKey, GroupKey]] = field(default_factory=dict)
    parked: set[GroupKey] = field(default_factory=set)

    def drop_empty_groups(self) -> None:
        self.parked &= {g for _, g in self.queued.values()}

    def push(self, key: WorkloadKey, order: OrderKey, gkey: GroupKey) -> None:
        self.queued[key] = (order, gkey)

    def pop(self) -> WorkloadKey | None:
        ready = [(order, key) for key, (order, g) in self.queued.items() if g not in self.parked]
        if not ready:
            return None
        _, key = min(ready)
        del self.queued[key]
        self.drop_empty_groups()
        return key


operation = st.tuples(
    st.sampled_from(["activate", "park", "remove", "pop", "requeue"]),
    st.sampled_from(NAMES),
    # sticky, priority, queue-order time
    st.tuples(st.booleans(), st.integers(-1, 1), st.integers(0, 3)),
    st.integers(0, 2),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(operation, max_size=60))
# A workload moved to a parked group with its order unchanged: the entry it left in its old
# group must not hand it out.
@example(
    [
        ("activate", "wl-0", (False, 0, 0), 1),
        ("activate", "wl-1", (False, 0, 0), 1),
        ("activate", "wl-2", (False, 0, 0), 1),
        ("park", "wl-1", (False, 0, 0), 0),
    ]
)
def test_every_pop_is_the_first_queued_workload_not_parked(
    ops: list[tuple[str, str, tuple[bool, int, int], int]],
) -> None:
    queue, model = PendingQueue(strict_fifo=False), Model()
    for op, name, (sticky, priority, created), group in ops:
        key: WorkloadKey = ("ns", name)
        order: OrderKey = (sticky, priority, created, "ns", name)
        gkey: GroupKey = ("group", group)
        if op in ("activate", "park") and key in model.queued and model.queued[key][1] != gkey:
            # A workload's group follows from what it asks for; it changes only through an update,
            # which takes it out of its queue first.
            queue.remove(key)
            del model.queued[key]
            model.drop_empty_groups()
        if op == "activate":
            queue.activate(key, order, gkey)
            model.push(key, order, gkey)
            model.parked.discard(gkey)
        elif op == "park":
            queue.park(key, order, gkey)
            model.push(key, order, gkey)
            model.parked.add(gkey)
        elif op == "remove":
            queue.remove(key)
            model.queued.pop(key, None)
            model.drop_empty_groups()
        elif op == "pop":
            assert queue.pop() == model.pop()
        else:
            queue.requeue_inadmissible()
            model.parked.clear()
        assert len(queue) == len(model.queued)
        assert queue.has_active() or all(g in model.parked for _, g in model.queued.values())
    # Everything not parked comes out in order, then nothing.
    while (expected := model.pop()) is not None:
        assert queue.pop() == expected
    assert queue.pop() is None
