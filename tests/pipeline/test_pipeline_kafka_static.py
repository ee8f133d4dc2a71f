"""Workers that are static members of the group (``worker --instance-id``).

A static worker SIGKILLed and started again under the same id within the
session timeout takes its own partitions back: the coordinator hands it the
assignment it had (KIP-345), so the other worker keeps its partitions and
goes on processing, with no rebalance. The decisions stay those of the
embedded runtime, each once.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from kueuestream.agents.faust_worker.processes import REVOKING, WorkerProcesses
from tests.pipeline.embedded_run import raw_topic
from tests.pipeline.test_pipeline_kafka import embedded, encoded, kafka_topics, through_kafka
from tests.pipeline.watch_streams import workload_stream

pytestmark = pytest.mark.kafka


def test_a_static_worker_restarted_takes_its_partitions_back_without_a_rebalance(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    steps = encoded(workload_stream(40, seed=7).steps)
    log, ends, counts = embedded(steps)
    half = len(steps) // 2
    with WorkerProcesses.isolated(kafka_bootstrap, 2, tmp_path, tag="static", clock=False, static=True) as w:
        asyncio.run(through_kafka(kafka_bootstrap, w.names, steps[:half], ends[:half], counts[:half]))
        before = w.log_of(0)
        w.kill(1, signal.SIGKILL)
        w.start(1)
        w.wait_settled()
        asyncio.run(through_kafka(kafka_bootstrap, w.names, steps[half:], ends[half:], counts[half:]))
        got = asyncio.run(kafka_topics(kafka_bootstrap, w.names))
        other = w.log_of(0)[len(before) :]
        restarted = w.log_of(1)
    assert got == {topic: raw_topic(log, topic) for topic in got}
    # Worker 0 kept its partitions through worker 1's restart; worker 1 got its own back.
    assert REVOKING not in other, f"worker 0 took part in a rebalance:\n{other[-3000:]}"
    assert "Worker ready" in restarted
