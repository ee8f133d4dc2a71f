"""A scheduling cycle's reservations end with the cycle.

Kueue's scheduler works on a throwaway copy of its cache (``Cache.Snapshot``):
``processEntry`` adds a preemptor's usage to the snapshot (``cq.AddUsage``) and
``fits`` counts the cycle's victims as gone (``SimulateWorkloadUsageRemoval``),
and none of it reaches the cache. Kueuestream's snapshot shares the cache's
quota tree and rolls those changes back instead, so these properties check:

1. rolling the journal back to a mark restores every node's usage exactly as it
   was at the mark, whatever was reserved and released since, lending limits
   and nested cohorts included;
2. after every event, each ClusterQueue's usage in the tree is exactly the sum
   of its admitted Workloads' usage: nothing a cycle reserved for a preemptor
   or released for its victims is left behind, which would admit too much or
   too little later.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kueuestream.admission.cache import Cache
from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action, Event, EventType, ObjectRef
from kueuestream.admission.quota import FR, QuotaNode
from kueuestream.admission.snapshot import Snapshot
from kueuestream.admission.state import Phase
from tests.helpers import T0, docs_of

CPU: FR = ("default", "cpu")


@dataclass(frozen=True)
class Queue:
    name: str
    cohort: str
    nominal: int
    lending: int | None
    borrowing: int | None
    strict: bool


@dataclass(frozen=True)
class Tree:
    cohorts: dict[str, str]  # cohort -> parent ("" for a root)
    queues: tuple[Queue, ...]
    fair_sharing: bool


@st.composite
def trees(draw: st.DrawFn) -> Tree:
    cohorts = {"root": ""}
    for c in range(draw(st.integers(0, 2))):
        cohorts[f"c{c}"] = "root"
    queues = []
    for i in range(draw(st.integers(2, 4))):
        nominal = draw(st.integers(0, 4))
        queues.append(
            Queue(
                name=f"cq{i}",
                cohort=draw(st.sampled_from(sorted(cohorts))),
                nominal=nominal,
                lending=draw(st.one_of(st.none(), st.integers(0, nominal))),
                borrowing=draw(st.one_of(st.none(), st.integers(0, 3))),
                strict=draw(st.booleans()),
            )
        )
    return Tree(cohorts, tuple(queues), draw(st.booleans()))


def manifests(tree: Tree) -> list[dict[str, object]]:
    text = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: default}\n---\n"
    if tree.fair_sharing:
        text += "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing: {}\n---\n"
    for cohort, parent in sorted(tree.cohorts.items()):
        spec = f"{{parentName: {parent}}}" if parent else "{}"
        text += f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {{name: {cohort}}}\n"
        text += f"spec: {spec}\n---\n"
    for q in tree.queues:
        limits = f", lendingLimit: {q.lending}" if q.lending is not None else ""
        limits += f", borrowingLimit: {q.borrowing}" if q.borrowing is not None else ""
        text += f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {q.name}}}
spec:
  cohortName: {q.cohort}
  namespaceSelector: {{}}
  queueingStrategy: {"StrictFIFO" if q.strict else "BestEffortFIFO"}
  preemption: {{withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{{name: cpu, nominalQuota: {q.nominal}{limits}}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: {q.name}-lq, namespace: default}}
spec: {{clusterQueue: {q.name}}}
---
"""
    return docs_of(text)


def workload(name: str, queue: str, cpu: int, priority: int, created_s: int) -> dict[str, object]:
    created = f"2024-01-01T00:{created_s // 60 % 60:02d}:{created_s % 60:02d}Z"
    (doc,) = docs_of(f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {{name: {name}, namespace: default, creationTimestamp: "{created}"}}
spec:
  queueName: {queue}-lq
  priority: {priority}
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          resources: {{requests: {{cpu: "{cpu}"}}}}
""")
    return doc


def built(tree: Tree) -> Cache:
    """The cache with the tree's quota tree built and nothing admitted."""
    engine = Engine()
    docs = manifests(tree)
    for i, doc in enumerate(docs):
        engine.apply(Event(EventType.UPSERT, T0, manifest=doc, batch=i < len(docs) - 1))
    return engine.cache


def usage(nodes: list[QuotaNode]) -> dict[str, dict[FR, int]]:
    return {n.name: {fr: a for fr, a in sorted(n.usage.items()) if a} for n in nodes}


# (queue index, amount in whole cpus, reserve or release, take a mark first, roll back to a mark)
operation = st.tuples(st.integers(0, 3), st.integers(1, 3), st.booleans(), st.booleans(), st.integers(-1, 5))


@settings(max_examples=200, deadline=None)
@given(tree=trees(), admitted=st.lists(st.integers(0, 6), min_size=4, max_size=4), ops=st.lists(operation))
def test_rollback_to_a_mark_restores_every_node(
    tree: Tree, admitted: list[int], ops: list[tuple[int, int, bool, bool, int]]
) -> None:
    cache = built(tree)
    nodes = [node for root in sorted(cache.cohorts) for node in cache.cohorts[root].walk()]
    nodes += [cache.cq_nodes[name] for name in cache.cq_names if cache.cq_nodes[name].parent is None]
    queues = [cache.cq_nodes[q.name] for q in tree.queues]
    for node, cpus in zip(queues, admitted, strict=False):
        node.add_usage(CPU, cpus * 1000)  # what admitted workloads hold
    before = usage(nodes)
    snapshot = Snapshot(cache)
    marks: list[tuple[int, dict[str, dict[FR, int]]]] = []
    for index, cpus, reserve, take_mark, back_to in ops:
        if take_mark:
            marks.append((snapshot.mark(), usage(nodes)))
        node = queues[index % len(queues)]
        if reserve:
            snapshot.reserve(node, {CPU: cpus * 1000})
        elif node.usage.get(CPU, 0) >= cpus * 1000:
            snapshot.release(node, {CPU: cpus * 1000})  # a victim's usage, never more than is there
        if 0 <= back_to < len(marks):
            mark, expected = marks[back_to]
            del marks[back_to:]
            snapshot.rollback(mark)
            assert usage(nodes) == expected
    snapshot.rollback()
    assert usage(nodes) == before


arrival = st.tuples(st.integers(0, 3), st.integers(1, 3), st.integers(0, 3))  # queue index, cpu, priority
steps = st.one_of(
    st.tuples(st.just("arrive"), st.lists(arrival, min_size=1, max_size=4)),
    st.tuples(st.just("stop"), st.integers(0, 100)),
    st.tuples(st.just("finish"), st.integers(0, 100)),
    st.tuples(st.just("tick")),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=trees(), world=st.lists(steps, min_size=1, max_size=30))
def test_after_every_event_the_tree_holds_exactly_the_admitted_usage(
    tree: Tree, world: list[tuple[object, ...]]
) -> None:
    engine = Engine()
    time_ms = T0
    evicting: set[str] = set()

    def apply(event: Event) -> None:
        for d in engine.apply(event):
            if d.action == Action.EVICTED:
                evicting.add(d.ref.name)
            elif d.ref.kind == "Workload":
                evicting.discard(d.ref.name)
        held: dict[str, dict[FR, int]] = {}
        for rec in engine.workloads.values():
            if rec.phase == Phase.ADMITTED:
                mine = held.setdefault(rec.cluster_queue, {})
                for fr, amount in rec.usage.items():
                    mine[fr] = mine.get(fr, 0) + amount
        for name, cq in sorted(engine.cqs.items()):
            in_tree = {fr: a for fr, a in cq.node.usage.items() if a}
            assert in_tree == {fr: a for fr, a in held.get(name, {}).items() if a}, name

    setup = manifests(tree)
    for i, doc in enumerate(setup):
        apply(Event(EventType.UPSERT, time_ms, manifest=doc, batch=i < len(setup) - 1))
    arrivals = 0
    for step in world:
        time_ms += 100
        if step[0] == "arrive":
            burst: list[tuple[int, int, int]] = step[1]  # type: ignore[assignment]
            for n, (q, cpu, priority) in enumerate(burst):
                arrivals += 1
                doc = workload(
                    f"w{arrivals}", tree.queues[q % len(tree.queues)].name, cpu, priority, arrivals
                )
                apply(Event(EventType.UPSERT, time_ms, manifest=doc, batch=n < len(burst) - 1))
        elif step[0] == "stop" and evicting:
            victim = sorted(evicting)[int(step[1]) % len(evicting)]  # type: ignore[call-overload]
            apply(Event(EventType.STOPPED, time_ms, ref=ObjectRef("Workload", "default", victim)))
        elif step[0] == "finish":
            running = sorted(key[1] for key, rec in engine.workloads.items() if rec.phase == Phase.ADMITTED)
            if running:
                done = running[int(step[1]) % len(running)]  # type: ignore[call-overload]
                apply(Event(EventType.FINISHED, time_ms, ref=ObjectRef("Workload", "default", done)))
        else:
            time_ms = max(time_ms, engine.next_wakeup_ms() or time_ms)
            apply(Event(EventType.TICK, time_ms))
