"""Faust workers SIGKILLed at 20 random points of a run, and the broker killed mid-run.

Workloads arrive on two workers that borrow and preempt across queues. The
run is the embedded runtime's first, step by step; then on Kafka, where after
each step the test waits until Kafka holds the same decisions and, in every
admission partition, the same entries. After every step: every new decision,
in order, keeps each ClusterQueue within nominal quota plus borrowing limit
and each cohort tree within its quota; no decision is committed twice; each
Workload's decisions are the embedded runtime's, so nothing is lost, added or
admitted twice. The kill times and victims come from a seed that each run
prints (``KUEUESTREAM_KILL_SEED`` repeats it; the broker's timing does not
repeat).
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from kueuestream.streams import codec
from tests.pipeline.checks import Limits, assert_admitted_once, per_workload
from tests.pipeline.kafka_run import decisions_of, worker_group
from tests.pipeline.kills import WorkerKiller, kafka_sh, kill_seed, run_with_crashes
from tests.pipeline.test_pipeline_kafka_crash import borrowing_cluster, borrowing_stream

pytestmark = pytest.mark.kafka

# 20 kills over 45 s of a 40-Workload run in CI; KUEUESTREAM_KILLS=N runs N kills over a run
# scaled to match, on demand (a longer run than the suite's time budget allows).
KILLS = int(os.environ.get("KUEUESTREAM_KILLS", "").strip() or 20)


def workload_steps(count: int) -> list[list[bytes]]:
    return [[codec.encode(e) for e in step] for step in borrowing_stream(count).steps]


def test_workers_killed_at_random_points(kafka_bootstrap: str, tmp_path: Path) -> None:
    rng = random.Random(kill_seed())
    workloads = 2 * KILLS
    steps = workload_steps(workloads)
    with worker_group(kafka_bootstrap, tmp_path, 2) as w:
        killer = WorkerKiller(w, rng, KILLS, window=2.25 * KILLS)
        killer.start()
        outcome = asyncio.run(
            run_with_crashes(kafka_bootstrap, w, killer, steps, Limits.of(borrowing_cluster()))
        )
        parts = asyncio.run(decisions_of(kafka_bootstrap, w.names))
        assert killer.kills == KILLS and sum(w.starts) == 2 + KILLS + len(outcome.restarted)
    decided = sum(len(p) for p in parts)
    assert outcome.checked == decided > 1.5 * workloads
    assert_admitted_once(parts)
    assert len(per_workload(parts)) == workloads


@pytest.fixture
def own_broker() -> Iterator[str]:
    """A broker of this test's own (``KAFKA_INSTANCE=kills``), since the test kills and resumes it."""
    bootstrap = kafka_sh("start")
    try:
        yield bootstrap
    finally:
        kafka_sh("stop")


def test_the_broker_killed_mid_run_and_a_worker_with_it(own_broker: str, tmp_path: Path) -> None:
    rng = random.Random(kill_seed())
    steps = workload_steps(16)
    with worker_group(own_broker, tmp_path, 2) as w:
        killer = WorkerKiller(w, rng, 2, window=15.0)
        killer.start()
        outcome = asyncio.run(
            run_with_crashes(
                own_broker,
                w,
                killer,
                steps,
                Limits.of(borrowing_cluster()),
                broker_kill_at=rng.randrange(2, len(steps) - 2),
                broker_down_s=rng.uniform(0.0, 3.0),
            )
        )
        parts = asyncio.run(decisions_of(own_broker, w.names))
    assert outcome.checked == sum(len(p) for p in parts) > 24
    assert_admitted_once(parts)
    assert len(per_workload(parts)) == 16
