"""A Faust worker killed with SIGKILL mid-stream: nothing lost, nothing decided twice, nothing over quota.

Workloads keep arriving while one of two workers is killed and started again.
When everything is processed the Kafka log is replayed: every decision the
admission log implies must be in ``kueue.decisions`` exactly once and byte for
byte (nothing lost, nothing extra), every runtime-appended record too, and the
decisions, read in order, must keep every ClusterQueue and cohort within its
limits after each one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kueuestream.agents.admission import AdmissionHandler
from kueuestream.agents.log_entries import decode_entry
from kueuestream.streams import codec
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
    assert_admitted_once,
    assert_exactly_once,
    assert_usage_consistent,
    check_limits,
    holders,
)
from tests.pipeline.kafka_run import decisions_of, stream_with_a_kill, worker_group
from tests.pipeline.watch_streams import Stream, moving_stream

pytestmark = pytest.mark.kafka


def borrowing_cluster() -> list[dict]:
    """Two trees whose queues borrow from each other, so preemption and reclaim happen."""
    return [
        flavor_manifest("default"),
        cpu_queue("a1", 6, "a"),
        cpu_queue("a2", 6, "a"),
        cpu_queue("b1", 8, "b"),
        cpu_queue("b2", 4, "b", borrowing=2),
        *(local_queue_manifest(f"lq-{q}", q, NS) for q in ("a1", "a2", "b1", "b2")),
    ]


def borrowing_stream(count: int) -> Stream:
    """The listing of :func:`borrowing_cluster`, then ``count`` Workloads of 1-4 cpu over its four
    queues, priorities 0-2; from the seventh on, every other one finishes the one six before it."""
    stream = Stream()
    stream.listing(borrowing_cluster())
    queues = ("lq-a1", "lq-a2", "lq-b1", "lq-b2")
    for i in range(count):
        stream.event(cpu_workload(f"wl-{i:03d}", queues[i % 4], 1 + i % 4, priority=i % 3, created_s=i))
        if i >= 6 and i % 2 == 0:
            done = cpu_workload(f"wl-{i - 6:03d}", queues[(i - 6) % 4], 1 + (i - 6) % 4, priority=(i - 6) % 3)
            stream.event(finished_workload(done), WatchEventType.MODIFIED)
    return stream


def test_a_worker_killed_mid_stream_loses_and_repeats_nothing(kafka_bootstrap: str, tmp_path: Path) -> None:
    events = [codec.encode(e) for e in borrowing_stream(120).events()]
    with worker_group(kafka_bootstrap, tmp_path, 2) as w:
        verdict, admission = asyncio.run(
            stream_with_a_kill(kafka_bootstrap, w, events, kill_at=len(events) // 3)
        )
        parts = asyncio.run(decisions_of(kafka_bootstrap, w.names))
        assert w.starts[0] == 2
    assert verdict.decisions == sum(len(p) for p in parts) > 150
    assert_exactly_once(parts)
    tracker = check_limits(Limits.of(borrowing_cluster()), parts)
    assert tracker.checked == verdict.decisions
    assert_admitted_once(parts)
    # Every Workload made it into exactly one engine (queued ones may have no decision yet).
    handler = AdmissionHandler(partitions=len(admission), admission_topic="kueue.admission")
    for p, records in enumerate(admission):
        for record in records:
            handler.feed(p, record.offset, record.value)
    assert len(handler.workload_objects()) == 120


def test_cluster_queues_moving_between_trees_on_three_workers(kafka_bootstrap: str, tmp_path: Path) -> None:
    """The handover test of the embedded runtime, on Kafka, with three workers and no pause between events."""
    events = [codec.encode(e) for e in moving_stream(60).events()]
    with worker_group(kafka_bootstrap, tmp_path, 3) as w:
        verdict, admission = asyncio.run(stream_with_a_kill(kafka_bootstrap, w, events))
        parts = asyncio.run(decisions_of(kafka_bootstrap, w.names))
    assert_exactly_once(parts)
    assert_admitted_once(parts)
    # Rebuild the shards from the Kafka log: after every record, no ClusterQueue holds more than
    # its quota (no borrowing in this cluster); at the end each Workload is in exactly one shard
    # and each unit of usage is counted once. (Decisions cannot be checked one by one here: a
    # moved ClusterQueue's decisions continue in another partition, with no order between the two.)
    limits = Limits.of(moving_cluster())
    handler = AdmissionHandler(partitions=len(admission), admission_topic="kueue.admission")
    for p, records in enumerate(admission):
        for record in records:
            handler.feed(p, record.offset, record.value)
            for shard, state in handler.state(p).shards.items():
                for rec in state.engine.workloads.values():
                    if rec.phase.value == "Admitted":
                        for fr, amount in rec.usage.items():
                            assert amount <= limits.nominal[rec.cluster_queue][fr], (shard, rec.key)
                for name, cq in state.engine.cqs.items():
                    for fr, amount in cq.node.usage.items():
                        assert amount <= limits.nominal[name].get(fr, 0), f"{name} over quota in {shard}"
    assert set(holders(handler).values()) == {1} and len(holders(handler)) == 60
    usage = assert_usage_consistent(handler)
    assert set(usage) == {"a1", "a2", "b1"}
    handovers = [r for part in admission for r in part if decode_entry(r.value).kind == "ShardHandover"]
    assert len(handovers) >= 8 and verdict.followups >= 3
