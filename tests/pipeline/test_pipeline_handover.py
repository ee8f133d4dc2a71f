"""Routing: Workloads that arrive before their queues, ClusterQueues that change cohort tree."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

from kueuestream.agents.audit.replay import replay
from kueuestream.agents.embedded.memory_log import MemoryLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.ingest_routing import UNROUTED
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.schemas import WatchEventType
from tests.helpers import (
    NS,
    cpu_queue,
    cpu_workload,
    finished_workload,
    flavor_manifest,
    local_queue_manifest,
    moving_cluster,
)
from tests.pipeline.checks import (
    Limits,
    UsageTracker,
    assert_admitted_once,
    assert_exactly_once,
    assert_usage_consistent,
    engines,
    holders,
    usage_of,
)
from tests.pipeline.embedded_run import decisions, run_steps
from tests.pipeline.watch_streams import Stream, moving_stream


def test_a_workload_before_its_queues_waits_unrouted_then_is_admitted() -> None:
    stream = Stream()
    stream.listing([flavor_manifest("default")])
    stream.event(cpu_workload("early", "lq-late", 2))
    stream.event(local_queue_manifest("lq-late", "late", NS))
    stream.event(cpu_queue("late", 4))
    pipeline = run_steps(EmbeddedPipeline(MemoryLog()), stream.steps)
    parts = decisions(pipeline.log)
    early = [d for part in parts for d in part if d.ref.name == "early"]
    assert [(d.cause.shard, d.action.value, d.message) for d in early] == [
        (UNROUTED, "Pending", "LocalQueue lq-late doesn't exist"),
        (UNROUTED, "Pending", "ClusterQueue late doesn't exist"),
        ("cq:late", "Admitted", "Quota reserved in ClusterQueue late"),
    ]
    assert holders(pipeline) == Counter({(NS, "early"): 1})
    assert set(engines(pipeline)[UNROUTED].workloads) == set()


def test_a_moved_cluster_queue_keeps_its_admitted_usage_exactly_once() -> None:
    cluster = moving_cluster(borrowing=None)
    cluster[4] = cpu_queue("a2", 6, "a", borrowing=0)  # a2 lends but never borrows
    stream = Stream()
    stream.listing(cluster)
    stream.event(cpu_workload("w1", "lq-a2", 6))
    stream.event(cpu_queue("a2", 6, "b", borrowing=0), WatchEventType.MODIFIED)
    # b1 has 4 and could borrow a2's 6, but w1 uses all of it: w2 must wait.
    stream.event(cpu_workload("w2", "lq-b1", 5, created_s=10))
    pipeline = run_steps(EmbeddedPipeline(MemoryLog()), stream.steps)
    by_workload = {
        (d.ref.name, d.cause.shard, d.action.value) for part in decisions(pipeline.log) for d in part
    }
    assert ("w1", "cohort:a", "Admitted") in by_workload
    assert not [d for d in by_workload if d[0] == "w1" and d[1] == "cohort:b"], "w1 was decided again"
    assert ("w2", "cohort:b", "Pending") in by_workload and ("w2", "cohort:b", "Admitted") not in by_workload
    assert holders(pipeline) == Counter({(NS, "w1"): 1, (NS, "w2"): 1})
    assert engines(pipeline)["cohort:b"].workloads[(NS, "w1")].phase.value == "Admitted"
    assert assert_usage_consistent(pipeline)["a2"] == {("default", "cpu"): 6000}

    # When w1 finishes, its quota is free in its new tree and w2 borrows it.
    more = Stream(time_ms=stream.time_ms)
    more.event(finished_workload(cpu_workload("w1", "lq-a2", 6)), WatchEventType.MODIFIED)
    run_steps(pipeline, more.steps)
    last = {d.ref.name: d for part in decisions(pipeline.log) for d in part}
    assert last["w2"].action.value == "Admitted" and last["w1"].action.value == "Finished"


def test_cluster_queues_moving_between_trees_while_workloads_flow(tmp_path: Path) -> None:
    cluster = moving_cluster()
    stream = moving_stream()
    with FileLog(tmp_path / "log") as log:
        pipeline = EmbeddedPipeline(log)
        tracker = UsageTracker(Limits.of(cluster))
        read = [0] * pipeline.partitions
        for step in stream.steps:
            pipeline.submit(step)
            pipeline.pump()
            pipeline.advance_clock()
            # Between steps everything is settled: each Workload in exactly one shard,
            # each unit of usage counted once, nothing over its limits after any decision.
            # (A step's decisions about one Workload are all in one partition, so reading
            # the partitions one after the other keeps each Workload's order.)
            assert set(holders(pipeline).values()) <= {1}
            assert_usage_consistent(pipeline)
            for p, part in enumerate(decisions(log)):
                for d in part[read[p] :]:
                    tracker.apply(d)
                read[p] = len(part)
        parts = decisions(log)
    assert len(holders(pipeline)) == 90
    assert_exactly_once(parts)
    # Usage seen through the decisions is the usage the engines hold.
    assert tracker.per_cq() == {cq: u for cq, u in assert_usage_consistent(pipeline).items() if u}
    assert_admitted_once(parts)
    out = io.StringIO()
    assert replay(str(tmp_path / "log"), out=out) == 0, out.getvalue()
    assert sum(1 for part in parts for d in part if usage_of(d.status)[1]) > 50
