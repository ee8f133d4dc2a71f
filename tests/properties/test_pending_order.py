"""`pending` lists the Workloads in the order the scheduler admits them, and its fast read of a log
agrees with the engines rebuilt from it.

1. One ClusterQueue, full: a Workload holding all its quota and random others
   waiting (priorities, ages with ties, LocalQueues in two namespaces, either
   queueing strategy). ``pending`` is taken from the log; then the running
   Workload finishes, one at a time, and each freed slot admits exactly one
   Workload: the order of those admissions is the listed order. Kueue's
   ``ClusterQueue.Snapshot`` sorts with the queue heap's ``baseCompareFunc``,
   the order ``Manager.Heads`` pops in.
2. Random histories over a cohort of two ClusterQueues (arrivals, preemption,
   finishes, deletions and re-creations, Workloads without a creation time, a LocalQueue that
   comes late, deactivation): for every queue, the summary folded from the
   queue-relevant records (:mod:`kueuestream.agents.audit.queue_fold`) equals
   the one from the engines a full replay rebuilds, and the live summary of
   the engines that wrote the log.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kueuestream.agents.audit.pending import (
    engines_at_end,
    pending_json,
    pending_summary,
    read_log,
    summary_of_log,
)
from kueuestream.agents.audit.queue_fold import NeedsReplay, fold
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.sources.watch_events import as_batch, identify, listing_events, watch_event
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.schemas import DecisionRecord, WatchEvent, WatchEventType
from tests.helpers import (
    T0,
    cluster_queue_manifest,
    cohort_manifest,
    created_at,
    finished_workload,
    flavor_manifest,
    local_queue_manifest,
    workload_manifest,
)

QUEUES = [("alpha", "main"), ("alpha", "side"), ("beta", "main")]


def _event(manifest: dict[str, Any], type_: WatchEventType, ts: int) -> WatchEvent:
    item = identify(manifest)
    assert not isinstance(item, str), item
    return watch_event(item, type_, ts)


def _cpu_queue(name: str, cpu: int, strategy: str = "BestEffortFIFO", **kwargs: Any) -> dict[str, Any]:
    return cluster_queue_manifest(
        name, [(["cpu"], [("default", {"cpu": cpu})])], spec={"queueingStrategy": strategy}, **kwargs
    )


waiting_workloads = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from(QUEUES)), min_size=1, max_size=7
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(waiting=waiting_workloads, strategy=st.sampled_from(["BestEffortFIFO", "StrictFIFO"]))
def test_pending_is_the_order_in_which_freed_capacity_admits(
    waiting: list[tuple[int, int, tuple[str, str]]], strategy: str
) -> None:
    cluster = [flavor_manifest("default"), _cpu_queue("research", 1, strategy)]
    cluster += [local_queue_manifest(name, "research", ns) for ns, name in QUEUES]
    running = workload_manifest("running", "main", {"cpu": "1"}, namespace="alpha", priority=100)
    workloads = [
        workload_manifest(f"wl-{i}", lq, {"cpu": "1"}, namespace=ns, priority=prio, created=created_at(age))
        for i, (prio, age, (ns, lq)) in enumerate(waiting)
    ]
    admitted: list[str] = []

    def on_decision(d: DecisionRecord) -> None:
        if d.ref.kind == "Workload" and d.action.value == "Admitted":
            admitted.append(d.ref.name)

    with tempfile.TemporaryDirectory() as tmp:
        log_dir = Path(tmp) / "log"
        with FileLog(log_dir, fsync=False) as log:
            pipeline = EmbeddedPipeline(log, on_decision=on_decision)
            ts = T0
            for batch in ([*cluster, running], workloads):
                events, refused = listing_events(batch, ts)
                assert not refused
                pipeline.submit(events)
                pipeline.pump()
                ts += 1000
            assert admitted == ["running"]
            listed = pending_json(str(log_dir), cluster_queue="research", limit=100)
            live = pending_summary(_engines(pipeline), cluster_queue="research", limit=100)
            names = [item["metadata"]["name"] for item in listed["items"]]
            assert listed == live
            assert sorted(names) == sorted(w["metadata"]["name"] for w in workloads)
            by_name = {w["metadata"]["name"]: w for w in [running, *workloads]}
            while len(admitted) <= len(workloads):
                done = admitted[-1]
                pipeline.submit([_event(finished_workload(by_name[done]), WatchEventType.MODIFIED, ts)])
                pipeline.pump()
                ts += 2000
                pipeline.advance_clock(ts)
                assert len(admitted) <= len(workloads) + 1
                if admitted[-1] == done:
                    break
    assert admitted[1:] == names


def _engines(pipeline: EmbeddedPipeline) -> list[Any]:
    states = pipeline.admission.states
    return [states[p].shards[s].engine for p in sorted(states) for s in sorted(states[p].shards)]


# --- the fast read of a log against the engines --------------------------------------------

arrive = st.tuples(
    st.just("arrive"),
    st.integers(0, 3),  # priority
    st.integers(1, 2),  # cpu
    st.sampled_from([*QUEUES, ("alpha", "late")]),
    st.one_of(st.none(), st.integers(0, 5)),  # age, or no creationTimestamp
)
OTHER_STEPS = {
    "finish": st.tuples(st.just("finish"), st.integers(0, 30)),
    "delete": st.tuples(st.just("delete"), st.integers(0, 30)),
    "deactivate": st.tuples(st.just("deactivate"), st.integers(0, 30)),
    "late-queue": st.tuples(st.just("late-queue")),
    "recreate": st.tuples(st.just("recreate"), st.integers(0, 30)),
}
# Arrivals six times as often as anything else, so that queues fill up.
step = st.sampled_from(["arrive"] * 6 + sorted(OTHER_STEPS)).flatmap(
    lambda kind: arrive if kind == "arrive" else OTHER_STEPS[kind]
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(step, min_size=8, max_size=20),
    strategy=st.sampled_from(["BestEffortFIFO", "StrictFIFO"]),
    cluster=st.booleans(),
)
def test_the_folded_log_agrees_with_the_rebuilt_engines(
    steps: list[tuple[Any, ...]], strategy: str, cluster: bool
) -> None:
    """With ``cluster``, as with a cluster behind the log: an evicted Workload's job stops only when
    the watch says so, which here it never does, so preemptors wait for their victims at the end."""
    preemption = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    objects = [
        flavor_manifest("default"),
        cohort_manifest("org"),
        _cpu_queue("research", 2, strategy, cohort="org", preemption=preemption),
        _cpu_queue("prod", 1, strategy, cohort="org"),
        local_queue_manifest("main", "research", "alpha"),
        local_queue_manifest("side", "prod", "alpha"),
        local_queue_manifest("main", "prod", "beta"),
    ]
    late_queue = local_queue_manifest("late", "research", "alpha")
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = Path(tmp) / "log"
        with FileLog(log_dir, fsync=False) as log:
            pipeline = EmbeddedPipeline(log, cluster=cluster)
            ts = T0
            events, _ = listing_events(objects, ts)
            pipeline.submit(events)
            pipeline.pump()
            live: list[dict[str, Any]] = []
            gone: list[dict[str, Any]] = []
            for i, s in enumerate(steps):
                ts += 1000
                batch: list[WatchEvent] = []
                if s[0] == "arrive":
                    _, prio, cpu, (ns, lq), age = s
                    created = None if age is None else created_at(age)
                    wl = workload_manifest(
                        f"wl-{i}", lq, {"cpu": str(cpu)}, namespace=ns, priority=prio, created=created
                    )
                    live.append(wl)
                    batch.append(_event(wl, WatchEventType.ADDED, ts))
                elif s[0] == "late-queue":
                    batch.append(_event(late_queue, WatchEventType.ADDED, ts))
                elif s[0] == "recreate":
                    if gone:
                        wl = gone.pop(s[1] % len(gone))
                        live.append(wl)
                        batch.append(_event(wl, WatchEventType.ADDED, ts))
                elif live:
                    wl = live.pop(s[1] % len(live))
                    if s[0] == "finish":
                        batch.append(_event(finished_workload(wl), WatchEventType.MODIFIED, ts))
                    elif s[0] == "delete":
                        gone.append(wl)
                        batch.append(_event(wl, WatchEventType.DELETED, ts))
                    else:
                        off = {**wl, "spec": {**wl["spec"], "active": False}}
                        batch.append(_event(off, WatchEventType.MODIFIED, ts))
                pipeline.submit(as_batch(batch, ts))
                pipeline.pump()
                pipeline.advance_clock(ts + 1500)
            engines = _engines(pipeline)
            admission, decisions = _read(str(log_dir))
            replayed = engines_at_end(admission)
            try:
                fold(admission, decisions)
            except NeedsReplay as exc:
                # Only a Workload that came before its LocalQueue moves between shards.
                assert "ShardHandover" in str(exc), exc
                assert any(s[0] == "arrive" and s[3] == ("alpha", "late") for s in steps)
            for cq in ("research", "prod"):
                folded = summary_of_log(admission, decisions, cluster_queue=cq)
                assert folded == pending_summary(replayed, cluster_queue=cq)
                assert folded == pending_summary(engines, cluster_queue=cq)
            for lq in [*QUEUES[:1], ("alpha", "side"), ("beta", "main")]:
                folded = summary_of_log(admission, decisions, local_queue=lq)
                assert folded == pending_summary(replayed, local_queue=lq)


def _read(log: str) -> tuple[Any, Any]:
    import asyncio

    return asyncio.run(read_log(log, TopicNames(), None))
