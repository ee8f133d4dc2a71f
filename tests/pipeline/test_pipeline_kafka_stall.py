"""A Faust worker that stalls past its session timeout comes back: no crash, nothing lost or decided twice.

One of two workers is stopped (SIGSTOP) for longer than the group's session
timeout while Workloads keep arriving (then the other one, until a fence is
seen). The worker that takes over its partitions starts transactional
producers under the same ids, which fences the stalled worker's; or the
stalled one, back in the group, fences the other's. A commit through a fenced
producer fails with ``ProducerFenced``, and faust-streaming 0.15.3 crashes the
app there (``faust.transport.consumer.TransactionManager.commit``,
faust-streaming/faust#323). With ``FenceTolerantProducer`` the worker sets the
fenced producer aside, rejoins the group and goes on; the Kafka log is then
replayed as after a SIGKILL: every decision exactly once, within limits.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from kueuestream.agents.audit.replay import Verdict
from kueuestream.agents.faust_worker.processes import WorkerProcesses
from kueuestream.agents.faust_worker.publish import send_watch
from kueuestream.streams import codec
from kueuestream.streams.kafka_log import KafkaLog
from kueuestream.streams.log import Record
from tests.pipeline.checks import Limits, assert_admitted_once, assert_exactly_once, check_limits
from tests.pipeline.kafka_run import caught_up, decisions_of, worker_group
from tests.pipeline.test_pipeline_kafka_crash import borrowing_cluster, borrowing_stream

pytestmark = pytest.mark.kafka

# The workers' session timeout, and a stall long enough for the group to drop the stalled one.
SESSION_TIMEOUT = 6.0
STALL = 2 * SESSION_TIMEOUT
# What the worker logs when it sets a fenced producer aside (seen by a commit or a send).
FENCED = "was fenced ("


async def stream_with_stalls(
    broker: str, w: WorkerProcesses, events: list[bytes]
) -> tuple[Verdict, list[list[Record]]]:
    """``events`` in four parts. Before each of the last three, a burst of events, then one
    worker (in turn) stopped for :data:`STALL` seconds while the part arrives, until a
    fence is seen in a worker's log. Then the replay verdict once everything is decided.

    A worker stopped while it has offsets to commit meets the fence as soon as it
    resumes; the burst makes that all but certain, the next stall covers the rest.
    """
    quarter = len(events) // 4
    parts = [events[i * quarter : (i + 1) * quarter] for i in range(3)] + [events[3 * quarter :]]
    async with KafkaLog(broker) as kafka:
        for value in parts[0]:
            await send_watch(kafka, w.names, [value])
            await asyncio.sleep(0.02)
        for n, part in enumerate(parts[1:]):
            fenced = any(FENCED in w.log_of(i) for i in range(w.count))
            if fenced:
                for value in part:
                    await send_watch(kafka, w.names, [value])
                    await asyncio.sleep(0.02)
                continue
            burst, rest = part[:12], part[12:]
            await send_watch(kafka, w.names, burst)
            stalled = w.procs[n % w.count]
            assert stalled is not None
            stalled.send_signal(signal.SIGSTOP)
            resume_at = time.monotonic() + STALL
            try:
                for value in rest:
                    await send_watch(kafka, w.names, [value])
                    await asyncio.sleep(STALL / 2 / max(1, len(rest)))
                await asyncio.sleep(max(0.0, resume_at - time.monotonic()))
            finally:
                stalled.send_signal(signal.SIGCONT)
            # Back in the group, after the rebalance its return starts.
            await asyncio.sleep(2 * SESSION_TIMEOUT)
        return await caught_up(kafka, w, "the stalls")


def test_a_worker_stalled_past_its_session_timeout_is_fenced_and_goes_on(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    events = [codec.encode(e) for e in borrowing_stream(120).events()]
    with worker_group(kafka_bootstrap, tmp_path, 2) as w:
        verdict, _ = asyncio.run(stream_with_stalls(kafka_bootstrap, w, events))
        parts = asyncio.run(decisions_of(kafka_bootstrap, w.names))
        logs = [w.log_of(0), w.log_of(1)]
        # Both still running, each started once: neither crashed on the fence.
        assert w.alive() == [0, 1] and w.starts == [1, 1]
    # The fence happened (to one worker or the other, depending on who committed first).
    assert any(FENCED in log for log in logs), "no transactional producer was fenced: the stall did nothing"
    assert not any("Crashed reason=ProducerFenced" in log for log in logs)
    assert verdict.decisions == sum(len(p) for p in parts) > 100
    assert_exactly_once(parts)
    assert check_limits(Limits.of(borrowing_cluster()), parts).checked == verdict.decisions
    assert_admitted_once(parts)
