"""Whatever the flavor search picks and however far pod sets shrink, quota is never exceeded.

Random cohort trees of ClusterQueues with two flavors, random flavorFungibility
(both spellings, with and without a preference) and preemption policies, and
Workloads with and without minCount: once the engine settles, and after
every event on the way,

1. no tree holds more of a flavor than the nominal quota of its ClusterQueues;
2. no ClusterQueue holds more of a flavor than its nominal quota plus its
   borrowingLimit;
3. every admitted pod set runs between its minCount and its count, with the
   usage of the count it runs.

Kueue's ``fits`` and ``PodSetReducer`` promise the same (never over-admit).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action, Event, EventType, ObjectRef
from tests.helpers import (
    T0,
    Manifest,
    cluster_queue_manifest,
    cohort_manifest,
    flavor_manifest,
    local_queue_manifest,
    workload_manifest,
)

FLAVORS = ("f1", "f2")
# Each ClusterQueue's (nominal, borrowingLimit) per flavor.
Limits = dict[str, dict[str, tuple[int, int | None]]]
FUNGIBILITY = st.sampled_from(
    [
        {},
        {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"},
        {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
        {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch"},
        {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"},
        {
            "whenCanBorrow": "TryNextFlavor",
            "whenCanPreempt": "TryNextFlavor",
            "preference": "PreemptionOverBorrowing",
        },
        {
            "whenCanBorrow": "TryNextFlavor",
            "whenCanPreempt": "TryNextFlavor",
            "preference": "BorrowingOverPreemption",
        },
    ]
)
PREEMPTION = st.sampled_from(
    [
        {},
        {"withinClusterQueue": "LowerPriority"},
        {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
        {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority"},
        },
    ]
)


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Manifest], Limits]:
    """The objects, and each queue's (nominal, borrowingLimit) per flavor; one cohort tree."""
    docs: list[Manifest] = [flavor_manifest(f) for f in FLAVORS]
    parents = {"root": ""}
    docs.append(cohort_manifest("root"))
    for c in range(draw(st.integers(0, 2))):
        parents[f"c{c}"] = "root"
        docs.append(cohort_manifest(f"c{c}", parent="root"))
    limits: Limits = {}
    for i in range(draw(st.integers(1, 3))):
        name = f"cq{i}"
        cohort = draw(st.sampled_from(sorted(parents)))
        quotas = {f: draw(st.integers(0, 4)) for f in FLAVORS}
        borrowing = draw(st.one_of(st.none(), st.integers(0, 4)))
        cq = cluster_queue_manifest(
            name,
            [(["cpu"], [(f, {"cpu": quotas[f]}) for f in FLAVORS])],
            cohort=cohort,
            preemption=draw(PREEMPTION),
            borrowing=borrowing,
            spec={"flavorFungibility": draw(FUNGIBILITY)},
        )
        docs += [cq, local_queue_manifest(name, name)]
        limits[name] = {f: (quotas[f], borrowing) for f in FLAVORS}
    return docs, limits


workloads = st.lists(
    st.tuples(
        st.integers(0, 2),  # queue
        st.integers(1, 6),  # count
        st.one_of(st.none(), st.integers(1, 6)),  # minCount, kept at most count
        st.integers(1, 2),  # cpus per pod
        st.integers(0, 3),  # priority
    ),
    min_size=1,
    max_size=8,
)


def holding(engine: Engine) -> list[dict[str, Any]]:
    """The Workloads holding quota: reserved and not finished."""
    out = []
    for wl in engine.workload_objects():
        conditions = {c["type"]: c["status"] for c in wl.get("status", {}).get("conditions", [])}
        if conditions.get("QuotaReserved") == "True" and conditions.get("Finished") != "True":
            out.append(wl)
    return out


def check(engine: Engine, limits: Limits) -> None:
    per_tree: dict[str, int] = defaultdict(int)
    for wl in holding(engine):
        status = wl["status"]
        cq = status["admission"]["clusterQueue"]
        pod_sets = {ps["name"]: ps for ps in wl["spec"]["podSets"]}
        used: dict[str, int] = defaultdict(int)
        for psa in status["admission"]["podSetAssignments"]:
            ps = pod_sets[psa["name"]]
            minimum = ps.get("minCount", ps["count"])
            assert minimum <= psa["count"] <= ps["count"]
            per_pod = int(ps["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"])
            assert psa["resourceUsage"] == {"cpu": str(per_pod * psa["count"])}
            used[psa["flavors"]["cpu"]] += per_pod * psa["count"]
        for flavor, amount in used.items():
            per_tree[flavor] += amount
            nominal, borrowing = limits[cq][flavor]
            key = f"{cq}/{flavor}"
            per_tree[key] += amount
            if borrowing is not None:
                assert per_tree[key] <= nominal + borrowing, key
    for flavor in FLAVORS:
        assert per_tree[flavor] <= sum(limits[cq][flavor][0] for cq in limits), flavor


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), arrivals=workloads, stops=st.lists(st.integers(0, 20), max_size=4))
def test_the_flavor_search_and_partial_admission_never_over_admit(
    cluster: tuple[list[Manifest], Limits],
    arrivals: list[tuple[int, int, int | None, int, int]],
    stops: list[int],
) -> None:
    docs, limits = cluster
    queues = sorted(limits)
    for i, (q, count, minimum, cpu, priority) in enumerate(arrivals):
        wl = workload_manifest(
            f"w{i}",
            queues[q % len(queues)],
            {"cpu": str(cpu)},
            count=count,
            priority=priority,
            created=f"2026-01-01T00:00:{i:02d}Z",
        )
        if minimum is not None:
            wl["spec"]["podSets"][0]["minCount"] = min(minimum, count)
        docs.append(wl)
    engine = Engine()
    time_ms = T0
    evicted: list[ObjectRef] = []
    for i, doc in enumerate(docs):
        for d in engine.apply(Event(EventType.UPSERT, time_ms, manifest=doc, batch=i < len(docs) - 1)):
            if d.action == Action.EVICTED:
                evicted.append(d.ref)
        check(engine, limits)
    # Evicted jobs stop, and now and then an admitted one finishes; check after each.
    for n in [*range(len(evicted)), *stops]:
        time_ms += 1000
        if evicted:
            ref = evicted.pop(0)
            event = Event(EventType.STOPPED, time_ms, ref=ref)
        else:
            admitted = sorted(w["metadata"]["name"] for w in holding(engine))
            if not admitted:
                break
            event = Event(
                EventType.FINISHED, time_ms, ref=ObjectRef("Workload", "default", admitted[n % len(admitted)])
            )
        for d in engine.apply(event):
            if d.action == Action.EVICTED:
                evicted.append(d.ref)
        check(engine, limits)
