"""The clock on Kafka: a worker writes the tick that lets parked Workloads try again, also after a SIGKILL.

Capacity freed in a cohort tree lets its parked (inadmissible) Workloads try
again one batch period later (``requeue_later``, Kueue's delaying requeue of
inadmissible workloads after ``queueInadmissibleWorkloads``). Time moves only
with the log, so the worker that holds the shard writes a clock tick to
``kueue.watch`` once that moment has come. Here the worker is killed while it
holds the parked Workloads and the pending requeue, before the moment comes;
started again, it must rebuild them (from its snapshot) and write the tick
itself: the Workloads are admitted, each once, within quota, and a replay of
the Kafka log reproduces every decision.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from kueuestream.agents.audit.replay import verify
from kueuestream.agents.embedded.runtime import now_ms
from kueuestream.agents.faust_worker.processes import WorkerProcesses
from kueuestream.agents.faust_worker.publish import send_watch
from kueuestream.agents.log_entries import CLOCK_TICK, WATCH_BATCH
from kueuestream.streams import codec
from kueuestream.streams.kafka_log import KafkaLog
from kueuestream.streams.schemas import DecisionRecord, WatchEvent, WatchEventType
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


async def ticks(broker: str, w: WorkerProcesses) -> list[int]:
    """Offsets of the clock ticks in ``kueue.watch``."""
    async with KafkaLog(broker) as kafka:
        return [
            r.offset
            for r in (await read_topic(kafka, w.names.watch))[0]
            if (e := codec.decode(r.value, WatchEvent)).kind == WATCH_BATCH and e.name == CLOCK_TICK
        ]


async def scenario(broker: str, w: WorkerProcesses) -> list[list[DecisionRecord]]:
    big = cpu_workload("big", "lq", 4)
    stream = Stream(time_ms=now_ms() - 10_000)
    stream.listing(CLUSTER)
    stream.event(big)
    stream.event(cpu_workload("small-1", "lq", 2))
    stream.event(cpu_workload("small-2", "lq", 2))
    async with KafkaLog(broker) as kafka, TopicReader(broker, w.names.decisions, 6) as reader:
        for step in stream.steps:
            await send_watch(kafka, w.names, [codec.encode(e) for e in step])
        await wait_for(
            reader, {("big", "Admitted"), ("small-1", "Pending"), ("small-2", "Pending")}, "parking"
        )
        stream.steps.clear()
        stream.time_ms = now_ms() + AHEAD_MS
        stream.event(finished_workload(big), WatchEventType.MODIFIED)
        await send_watch(kafka, w.names, [codec.encode(e) for e in stream.steps[0]])
        await wait_for(reader, {("big", "Finished")}, "the finish")
        # Killed holding two parked Workloads and a requeue due in about 9 s.
        w.kill(0, signal.SIGKILL)
        killed = now_ms()
        assert killed < stream.time_ms, "the requeue came due before the kill: the test proves nothing"
        assert await ticks(broker, w) == []
        w.start(0)
        await wait_for(
            reader, {("small-1", "Admitted"), ("small-2", "Admitted")}, "the requeue after the restart"
        )
        assert now_ms() >= stream.time_ms, "admitted before their requeue was due"
        await asyncio.sleep(1.0)
        await reader.poll()
        return reader.decisions()


def test_parked_workloads_are_requeued_by_the_clock_after_a_sigkill(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    with WorkerProcesses.isolated(
        kafka_bootstrap, 1, tmp_path, tag="clock", clock=True, snapshot_every=2
    ) as w:
        parts = asyncio.run(scenario(kafka_bootstrap, w))
        restarted = w.log_of(0)
        written = asyncio.run(ticks(kafka_bootstrap, w))

        async def logs() -> tuple[list, list[list[bytes]]]:
            async with KafkaLog(kafka_bootstrap) as kafka:
                admission = await read_topic(kafka, w.names.admission)
                decisions = [[r.value for r in part] for part in await read_topic(kafka, w.names.decisions)]
            return admission, decisions

        admission, decisions = asyncio.run(logs())
    # The restarted worker wrote the tick(s); the engines it rebuilt came from a snapshot.
    assert written
    assert "restored the snapshot" in restarted
    actions = [(d.ref.name, d.action.value) for part in parts for d in part]
    assert actions.count(("small-1", "Admitted")) == actions.count(("small-2", "Admitted")) == 1
    assert_exactly_once(parts)
    assert_admitted_once(parts)
    check_limits(Limits.of(CLUSTER), parts)
    verdict = verify(admission, decisions)
    assert not verdict.mismatches and verdict.decisions == len(actions)
