"""The clock on Kafka: a worker writes the tick that lets parked Workloads try again, or that
runs a Workload out of its maximum execution time, also after a SIGKILL.

Capacity freed in a cohort tree lets its parked (inadmissible) Workloads try
again one batch period later (upstream ``workqueueRequeuer.notifyCohort`` /
``notifyClusterQueue``: ``AddAfter(..., requeueBatchPeriod)``, then
``queueInadmissibleWorkloads``; here ``QueueManager.requeue_later``). Time
moves only with the log, so the worker that holds the shard writes a clock tick
to ``kueue.watch`` once that moment has come.

Here the worker is killed while it holds the parked Workloads and the pending
requeue, before the moment comes, and after the group committed every input
offset: started again, it is given nothing to process, yet it must rebuild the
shard (from its snapshot) and write the tick itself. The Workloads are admitted
by that tick, not before it is due, each once, within quota, and a replay of
the Kafka log reproduces every decision.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from kueuestream.admission.queue_manager import REQUEUE_BATCH_MS
from kueuestream.admission.timefmt import parse_rfc3339
from kueuestream.agents.audit.replay import verify
from kueuestream.agents.embedded.runtime import now_ms
from kueuestream.agents.faust_worker.processes import WorkerProcesses
from kueuestream.agents.faust_worker.publish import send_watch
from kueuestream.agents.log_entries import CLOCK_TICK, WATCH_BATCH, decode_entry
from kueuestream.streams import codec
from kueuestream.streams.kafka_log import KafkaLog, parse_broker_url
from kueuestream.streams.log import Record
from kueuestream.streams.schemas import DecisionRecord, EventType, WatchEvent, WatchEventType
from tests.helpers import (
    NS,
    cpu_queue,
    cpu_workload,
    finished_workload,
    flavor_manifest,
    local_queue_manifest,
)
from tests.pipeline.checks import Limits, assert_admitted_once, assert_exactly_once, check_limits
from tests.pipeline.kafka_run import TIMEOUT, TopicReader, read_topic
from tests.pipeline.watch_streams import Stream

pytestmark = pytest.mark.kafka

CLUSTER = [flavor_manifest("default"), cpu_queue("cq", 4), local_queue_manifest("lq", "cq", NS)]
# The finishing Workload's event is this far ahead of the wall clock, so the requeue it
# causes is due well after the worker is killed.
AHEAD_MS = 8000
PARKED = ("small-1", "small-2")


async def wait_for(reader: TopicReader, wanted: set[tuple[str, str]], what: str) -> list[DecisionRecord]:
    deadline = time.monotonic() + TIMEOUT
    while True:
        await reader.poll()
        got = [d for part in reader.decisions() for d in part]
        if wanted <= {(d.ref.name, d.action.value) for d in got}:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out waiting for {what}: {[(d.ref.name, d.action.value) for d in got]}"
            )


async def committed_to_the_end(broker: str, w: WorkerProcesses) -> None:
    """Wait until the group has committed every record of ``kueue.watch`` and ``kueue.admission``,
    so that a restarted worker is given none of them again."""
    admin = AIOKafkaAdminClient(bootstrap_servers=parse_broker_url(broker))
    await admin.start()
    try:
        async with KafkaLog(broker) as kafka:
            deadline = time.monotonic() + TIMEOUT
            while True:
                ends = {
                    TopicPartition(topic, p): end
                    for topic in (w.names.watch, w.names.admission)
                    for p, end in (await kafka.end_offsets(topic)).items()
                }
                offsets = await admin.list_consumer_group_offsets(w.app_id, partitions=sorted(ends))
                behind = {
                    f"{tp.topic}[{tp.partition}]": (offsets[tp].offset if tp in offsets else None, end)
                    for tp, end in ends.items()
                    if end and (tp not in offsets or offsets[tp].offset < end)
                }
                if not behind:
                    return
                if time.monotonic() > deadline:
                    raise AssertionError(f"offsets not committed (committed, end): {behind}")
                await asyncio.sleep(0.1)
    finally:
        await admin.close()


async def ticks(broker: str, w: WorkerProcesses) -> list[int]:
    """Offsets of the clock ticks in ``kueue.watch``."""
    async with KafkaLog(broker) as kafka:
        return [
            r.offset
            for r in (await read_topic(kafka, w.names.watch))[0]
            if (e := codec.decode(r.value, WatchEvent)).kind == WATCH_BATCH and e.name == CLOCK_TICK
        ]


async def logs(broker: str, w: WorkerProcesses) -> tuple[list[list[Record]], list[list[bytes]]]:
    """The admission records and the decisions' bytes, per partition, for a replay."""
    async with KafkaLog(broker) as kafka:
        admission = await read_topic(kafka, w.names.admission)
        decisions = [[r.value for r in part] for part in await read_topic(kafka, w.names.decisions)]
    return admission, decisions


def assert_replayed_once(
    parts: list[list[DecisionRecord]], admission: list[list[Record]], decisions: list[list[bytes]]
) -> None:
    """Each decision once, every Workload admitted at most once at a time, nothing over
    quota, and a replay of the log reproducing every decision."""
    assert_exactly_once(parts)
    assert_admitted_once(parts)
    check_limits(Limits.of(CLUSTER), parts)
    verdict = verify(admission, decisions)
    assert not verdict.mismatches and verdict.decisions == sum(len(part) for part in parts)


async def scenario(broker: str, w: WorkerProcesses) -> tuple[list[list[DecisionRecord]], int]:
    """Park two Workloads, free their quota ahead of time, SIGKILL the worker and start it again;
    every decision, and the time the requeue was due."""
    big = cpu_workload("big", "lq", 4)
    stream = Stream(time_ms=now_ms() - 10_000)
    stream.listing(CLUSTER)
    stream.event(big)
    for name in PARKED:
        stream.event(cpu_workload(name, "lq", 2))
    async with KafkaLog(broker) as kafka, TopicReader(broker, w.names.decisions, 6) as reader:
        for step in stream.steps:
            await send_watch(kafka, w.names, [codec.encode(e) for e in step])
        await wait_for(reader, {("big", "Admitted"), *((n, "Pending") for n in PARKED)}, "parking")
        stream.steps.clear()
        stream.time_ms = finished_at = now_ms() + AHEAD_MS
        stream.event(finished_workload(big), WatchEventType.MODIFIED)
        await send_watch(kafka, w.names, [codec.encode(e) for e in stream.steps[0]])
        await wait_for(reader, {("big", "Finished")}, "the finish")
        due = finished_at + REQUEUE_BATCH_MS
        # Nothing is left to process: the restarted worker gets no record that would make it
        # rebuild the shard.
        await committed_to_the_end(broker, w)
        # Killed holding two parked Workloads and a requeue due in about 9 s.
        w.kill(0, signal.SIGKILL)
        assert now_ms() < due, "the requeue came due before the kill: the test proves nothing"
        assert await ticks(broker, w) == []
        w.start(0)
        await wait_for(reader, {(n, "Admitted") for n in PARKED}, "the requeue after the restart")
        await asyncio.sleep(1.0)
        await reader.poll()
        return reader.decisions(), due


def test_parked_workloads_are_requeued_by_the_clock_after_a_sigkill(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    with WorkerProcesses.isolated(
        kafka_bootstrap, 1, tmp_path, tag="clock", clock=True, snapshot_every=2
    ) as w:
        parts, due = asyncio.run(scenario(kafka_bootstrap, w))
        restarted = w.log_of(0)
        written = asyncio.run(ticks(kafka_bootstrap, w))
        admission, decisions = asyncio.run(logs(kafka_bootstrap, w))
    # The parked Workloads were admitted by a tick the restarted worker wrote (there was
    # none before the kill), dated no earlier than the requeue was due.
    assert written
    [shard_partition] = {p for p, part in enumerate(parts) if any(d.ref.name in PARKED for d in part)}
    for d in (d for d in parts[shard_partition] if d.ref.name in PARKED and d.action.value == "Admitted"):
        cause = decode_entry(admission[shard_partition][d.cause.offset].value)
        assert cause.type == EventType.TICK, f"{d.ref.name} was admitted by {cause.type}, not by the clock"
        assert cause.origin.stream == "watch" and cause.origin.offset in written
        assert cause.time_ms >= due, f"{d.ref.name} was admitted {due - cause.time_ms} ms before it was due"
    # The restarted worker rebuilt the shard from its snapshot, unprompted by any record.
    assert f"admission partition {shard_partition}: restored the snapshot" in restarted
    actions = [(d.ref.name, d.action.value) for part in parts for d in part]
    assert all(actions.count((n, "Admitted")) == 1 for n in PARKED), actions
    assert_replayed_once(parts, admission, decisions)


LIMIT_S = 10


async def deadline_scenario(broker: str, w: WorkerProcesses) -> tuple[list[list[DecisionRecord]], int]:
    """Admit a Workload with a maximum execution time and park another behind it, SIGKILL the
    worker before the time runs out and start it again; every decision, and the deadline."""
    limited = cpu_workload("limited", "lq", 4)
    limited["spec"]["maximumExecutionTimeSeconds"] = LIMIT_S
    stream = Stream(time_ms=now_ms())
    stream.listing(CLUSTER)
    stream.event(limited)
    stream.event(cpu_workload("waiting", "lq", 4))
    async with KafkaLog(broker) as kafka, TopicReader(broker, w.names.decisions, 6) as reader:
        for step in stream.steps:
            await send_watch(kafka, w.names, [codec.encode(e) for e in step])
        got = await wait_for(reader, {("limited", "Admitted"), ("waiting", "Pending")}, "the admission")
        [admitted] = [d for d in got if (d.ref.name, d.action.value) == ("limited", "Admitted")]
        [since] = [c["lastTransitionTime"] for c in admitted.status["conditions"] if c["type"] == "Admitted"]
        admitted_ms = parse_rfc3339(since)
        assert admitted_ms is not None, since
        deadline = admitted_ms + LIMIT_S * 1000
        await committed_to_the_end(broker, w)
        w.kill(0, signal.SIGKILL)
        assert now_ms() < deadline, "the time ran out before the kill: the test proves nothing"
        w.start(0)
        await wait_for(
            reader, {("limited", "Evicted"), ("waiting", "Admitted")}, "the deactivation after the restart"
        )
        await asyncio.sleep(1.0)
        await reader.poll()
        return reader.decisions(), deadline


def test_a_workload_runs_out_of_time_on_the_clock_of_a_restarted_worker(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """``reconcileMaxExecutionTime`` on Kafka: the worker that holds the shard writes a clock tick
    once a Workload's maximum execution time has run out by its wall clock, also when it was
    SIGKILLed while the Workload ran; the tick, not an earlier record, deactivates it, and the
    Workload parked behind it takes the quota, once, as a replay reproduces."""
    with WorkerProcesses.isolated(
        kafka_bootstrap, 1, tmp_path, tag="deadline", clock=True, snapshot_every=2
    ) as w:
        parts, deadline = asyncio.run(deadline_scenario(kafka_bootstrap, w))
        written = asyncio.run(ticks(kafka_bootstrap, w))
        admission, decisions = asyncio.run(logs(kafka_bootstrap, w))
    [partition] = {p for p, part in enumerate(parts) if any(d.ref.name == "limited" for d in part)}
    [evicted] = [d for d in parts[partition] if (d.ref.name, d.action.value) == ("limited", "Evicted")]
    cause = decode_entry(admission[partition][evicted.cause.offset].value)
    assert cause.type == EventType.TICK and cause.origin.offset in written
    assert cause.time_ms >= deadline, f"deactivated {deadline - cause.time_ms} ms before its time ran out"
    reasons = [c["reason"] for c in evicted.status["conditions"] if c["type"] == "Evicted"]
    assert reasons == ["DeactivatedDueToMaximumExecutionTimeExceeded"]
    actions = [(d.ref.name, d.action.value) for part in parts for d in part]
    assert actions.count(("waiting", "Admitted")) == 1, actions
    assert_replayed_once(parts, admission, decisions)
