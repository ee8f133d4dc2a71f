"""Never over-admit, with preemption: random cohort trees, priorities, arrivals and slow victims.

Kueue's scheduler (``scheduler.schedule`` -> ``processEntry``; ``preemption.fits``
simulating the removal of the cycle's victims) lets an entry later in the same
cycle use quota its victims still hold, and a preemptor waits until its own
victims have released theirs. So while victims are being evicted, reserved
usage may exceed a limit by at most what those victims hold. These properties
check, after every decision of an engine driven by random input:

1. usage minus the quota of Workloads already being evicted (``Evicted=True``
   while still holding quota) fits every ClusterQueue's nominal quota plus
   borrowing limit and every cohort tree's quota;
2. whenever no Workload is being evicted, usage itself fits every limit.

Victims stop only when the test says so (a job controller that takes its time),
so the window in which both kinds of usage coexist is wide. At the end every
victim stops; a world where a stopped victim is admitted and preempted again
round after round (as Kueue 0.19 does too, see the catch-up loop) ends after
a bounded number of rounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, event, given, settings, target
from hypothesis import strategies as st

from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action, Decision, Event, EventType, ObjectRef
from tests.helpers import (
    T0,
    cluster_queue_manifest,
    cohort_manifest,
    flavor_manifest,
    local_queue_manifest,
    workload_manifest,
)
from tests.pipeline.checks import FR, Limits, usage_of

# Rounds of the job controller catching up before a world is taken to be in a preemption cycle.
CATCH_UP_ROUNDS = 100

# Preempting policies come first: hypothesis shrinks towards them, and most trees should preempt.
POLICIES_WITHIN = ("LowerPriority", "LowerOrNewerEqualPriority", "Never")
POLICIES_RECLAIM = ("Any", "LowerPriority", "Never")


@dataclass(frozen=True)
class Queue:
    name: str
    cohort: str
    nominal: int
    borrowing: int | None
    within: str
    reclaim: str
    borrow_within: bool


@dataclass(frozen=True)
class Tree:
    cohorts: dict[str, str]  # cohort -> parent ("" for a root)
    queues: tuple[Queue, ...]


@st.composite
def trees(draw: st.DrawFn) -> Tree:
    roots = draw(st.integers(1, 2))
    cohorts: dict[str, str] = {f"root{r}": "" for r in range(roots)}
    for r in range(roots):
        for c in range(draw(st.integers(0, 2))):
            cohorts[f"c{r}{c}"] = f"root{r}"
    names = sorted(cohorts)
    queues = []
    for i in range(draw(st.integers(2, 5))):
        queues.append(
            Queue(
                name=f"cq{i}",
                cohort=draw(st.sampled_from(names)),
                nominal=draw(st.integers(0, 4)),
                borrowing=draw(st.one_of(st.none(), st.integers(0, 4))),
                within=draw(st.sampled_from(POLICIES_WITHIN)),
                reclaim=draw(st.sampled_from(POLICIES_RECLAIM)),
                borrow_within=draw(st.booleans()),
            )
        )
    return Tree(cohorts, tuple(queues))


def manifests(tree: Tree) -> list[dict[str, object]]:
    docs: list[dict[str, object]] = [flavor_manifest("default")]
    docs += [cohort_manifest(cohort, parent) for cohort, parent in sorted(tree.cohorts.items())]
    for q in tree.queues:
        preemption: dict[str, object] = {"withinClusterQueue": q.within, "reclaimWithinCohort": q.reclaim}
        if q.borrow_within and q.reclaim != "Never":
            preemption["borrowWithinCohort"] = {"policy": "LowerPriority"}
        groups = [(["cpu"], [("default", {"cpu": q.nominal})])]
        docs.append(
            cluster_queue_manifest(
                q.name, groups, cohort=q.cohort, preemption=preemption, borrowing=q.borrowing
            )
        )
        docs.append(local_queue_manifest(f"{q.name}-lq", q.name))
    return docs


def workload(name: str, queue: str, cpu: int, priority: int, created_s: int) -> dict[str, object]:
    created = f"2024-01-01T00:{created_s // 60:02d}:{created_s % 60:02d}Z"
    return workload_manifest(name, f"{queue}-lq", {"cpu": str(cpu)}, priority=priority, created=created)


# One step of the world around the engine. A burst is several Workloads in one
# batch, so that one scheduling cycle sees several heads.
arrival = st.tuples(st.integers(0, 4), st.integers(1, 3), st.integers(0, 3))  # queue index, cpu, priority
arrive = st.tuples(st.just("arrive"), st.lists(arrival, min_size=1, max_size=4))
steps = st.one_of(
    arrive,
    arrive,
    st.tuples(st.just("stop"), st.integers(0, 1_000)),  # one of the victims stops
    st.tuples(st.just("stop"), st.integers(0, 1_000)),
    st.tuples(st.just("finish"), st.integers(0, 1_000)),  # one admitted Workload completes
    st.tuples(st.just("tick")),
)


@dataclass
class Audit:
    """The usage an auditor reads off the decisions, checked after each one."""

    limits: Limits
    held: dict[str, tuple[str, dict[FR, int]]] = field(default_factory=dict)
    evicting: set[str] = field(default_factory=set)

    def record(self, d: Decision) -> None:
        key = d.ref.name
        if d.ref.kind != "Workload" or d.action == Action.STATUS:
            return
        cq, usage = usage_of(d.status) if d.action not in (Action.DELETED, Action.REJECTED) else ("", {})
        if usage:
            self.held[key] = (cq, usage)
        else:
            self.held.pop(key, None)
        conditions = {c["type"]: c["status"] for c in d.status.get("conditions", [])}
        if usage and conditions.get("Evicted") == "True":
            self.evicting.add(key)
        else:
            self.evicting.discard(key)
        self.check(exclude=self.evicting, when=f"after {d.action.value} {key}")
        if not self.evicting:
            self.check(exclude=set(), when=f"after {d.action.value} {key}, with no victim left")

    def check(self, *, exclude: set[str], when: str) -> None:
        per_cq: dict[str, int] = {}
        for name, (cq, usage) in self.held.items():
            if name not in exclude:
                per_cq[cq] = per_cq.get(cq, 0) + sum(usage.values())
        per_root: dict[str, int] = {}
        for cq, used in sorted(per_cq.items()):
            nominal = sum(self.limits.nominal[cq].values())
            borrowing = self.limits.borrowing[cq]
            if borrowing:
                limit = nominal + sum(borrowing.values())
                assert used <= limit, f"{cq} uses {used}m cpu, nominal+borrowingLimit {limit}m, {when}"
            root = self.limits.root(cq)
            per_root[root] = per_root.get(root, 0) + used
        for root, used in sorted(per_root.items()):
            nominal = self.limits.nominal
            quota = sum(sum(n.values()) for q, n in nominal.items() if self.limits.root(q) == root)
            assert used <= quota, f"{root} uses {used}m cpu of a tree quota of {quota}m, {when}"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=trees(), world=st.lists(steps, min_size=1, max_size=50))
def test_usage_net_of_victims_fits_and_fits_outright_once_they_stop(
    tree: Tree, world: list[tuple[object, ...]]
) -> None:
    engine = Engine()
    setup = manifests(tree)
    audit = Audit(Limits.of(setup))
    time_ms = T0

    def apply(event: Event) -> list[Decision]:
        decisions = engine.apply(event)
        for d in decisions:
            audit.record(d)
            if d.action == Action.EVICTED:
                evictions.append(d.ref.name)
        return decisions

    evictions: list[str] = []

    for i, doc in enumerate(setup):
        apply(Event(EventType.UPSERT, time_ms, manifest=doc, batch=i < len(setup) - 1))
    arrivals = 0
    for step in world:
        time_ms += 100
        kind = step[0]
        if kind == "arrive":
            burst: list[tuple[int, int, int]] = step[1]  # type: ignore[assignment]
            for n, (q, cpu, priority) in enumerate(burst):
                arrivals += 1
                queue = tree.queues[q % len(tree.queues)].name
                doc = workload(f"w{arrivals}", queue, cpu, priority, arrivals)
                apply(Event(EventType.UPSERT, time_ms, manifest=doc, batch=n < len(burst) - 1))
        elif kind == "stop" and audit.evicting:
            victims = sorted(audit.evicting)
            victim = victims[int(step[1]) % len(victims)]  # type: ignore[call-overload]
            apply(Event(EventType.STOPPED, time_ms, ref=ObjectRef("Workload", "default", victim)))
        elif kind == "finish":
            running = sorted(set(audit.held) - audit.evicting)
            if running:
                done = running[int(step[1]) % len(running)]  # type: ignore[call-overload]
                apply(Event(EventType.FINISHED, time_ms, ref=ObjectRef("Workload", "default", done)))
        else:
            wakeup = engine.next_wakeup_ms()
            time_ms = max(time_ms, wakeup or time_ms)
            apply(Event(EventType.TICK, time_ms))

    # The job controller catches up: every victim stops, and time runs out the retries.
    # A victim that stops may be admitted again at once and preempted again by the same
    # preemptor, for ever: a borrowing preemptor whose lowest subtree that fits is higher
    # than the victim's comes after it in the cycle order (``makeClassicalIterator`` sorts
    # by ``Assignment.Borrows()`` before priority), as in Kueue 0.19 (kubernetes-sigs/kueue
    # PR 13797 puts preemptors first behind the gate PrioritizePreemptorWorkloads, alpha
    # and off in 0.20). Such a world ends after a bounded number of rounds; every victim
    # stopped must still have left the evicting set or been evicted again since.
    cycling = False
    for _ in range(CATCH_UP_ROUNDS):
        if not audit.evicting and engine.next_wakeup_ms() is None:
            break
        for victim in sorted(audit.evicting):
            stopped_at = len(evictions)
            apply(Event(EventType.STOPPED, time_ms, ref=ObjectRef("Workload", "default", victim)))
            assert victim not in audit.evicting or victim in evictions[stopped_at:], victim
        wakeup = engine.next_wakeup_ms()
        if wakeup is not None:
            time_ms = max(time_ms, wakeup)
            apply(Event(EventType.TICK, time_ms))
    else:
        cycling = True
    if not cycling:
        assert not audit.evicting
        audit.check(exclude=set(), when="once every victim has stopped")
    event("preemption cycle" if cycling else "settled")
    target(float(len(evictions)), label="evictions")  # steer the search towards preemption
    event(f"evictions: {min(len(evictions), 3)}{'+' if len(evictions) >= 3 else ''}")
