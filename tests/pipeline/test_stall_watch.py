"""When a Faust worker gives up on itself: a record waits in a partition it holds, the group's
committed offset there does not move for the limit, and the worker was not busy meanwhile."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from kueuestream.agents.faust_worker.stall_watch import (
    STALL_EXIT_CODE,
    Position,
    Stall,
    StallWatch,
    confirmed,
    positions,
)
from kueuestream.streams.kafka_log import KafkaLog, parse_broker_url

WATCH = ("t.kueue.watch", 0)
ADMISSION = ("t.kueue.admission", 3)


def checks(watch: StallWatch, seen: dict[tuple[str, int], Position], until: float) -> list[list[Stall]]:
    """Every check from 0 to ``until`` seconds, one interval apart, with the same positions."""
    out = []
    now = 0.0
    while now <= until:
        out.append(watch.observe(now, seen))
        now += watch.interval
    return out


def test_a_record_left_waiting_for_the_limit_is_a_stall() -> None:
    watch = StallWatch(limit=60.0, interval=5.0)
    seen = {WATCH: Position(committed=21, end=22), ADMISSION: Position(committed=20, end=20)}
    results = checks(watch, seen, until=60.0)
    # Not before the limit, and then only the partition with a record waiting.
    assert all(r == [] for r in results[:-1])
    assert [s.key for s in results[-1]] == [WATCH]
    assert results[-1][0].seconds == 60.0
    assert "t.kueue.watch[0]: a record waits at offset 21" in results[-1][0].describe()


def test_a_committed_offset_that_moves_is_progress() -> None:
    watch = StallWatch(limit=60.0, interval=5.0)
    stalls = []
    for step in range(30):
        # The worker takes one record every 50 s, with more always waiting behind it.
        committed = 100 + step // 10
        stalls += watch.observe(step * 5.0, {ADMISSION: Position(committed, committed + 5)})
    assert stalls == []


def test_nothing_waiting_is_never_a_stall() -> None:
    watch = StallWatch(limit=10.0, interval=5.0)
    assert checks(watch, {WATCH: Position(7, 7)}, until=600.0) == [[]] * 121


def test_a_stopped_process_starts_counting_again() -> None:
    """A check long after the last one (the process was paused) is not blamed on the worker."""
    watch = StallWatch(limit=60.0, interval=5.0)
    seen = {WATCH: Position(3, 4)}
    assert watch.observe(0.0, seen) == []
    assert watch.observe(5.0, seen) == []
    # Paused for 90 s: without the pause rule this check would report 95 s.
    assert watch.observe(95.0, seen) == []
    for now in range(100, 155, 5):
        assert watch.observe(float(now), seen) == []
    assert [s.seconds for s in watch.observe(155.0, seen)] == [60.0]


def test_a_partition_moved_away_and_back_starts_over() -> None:
    watch = StallWatch(limit=20.0, interval=5.0)
    waiting = {ADMISSION: Position(5, 9)}
    for now in (0.0, 5.0, 10.0):
        assert watch.observe(now, waiting) == []
    assert watch.observe(15.0, {}) == []  # revoked
    for now in (20.0, 25.0, 30.0, 35.0):
        assert watch.observe(now, waiting) == []
    assert [s.key for s in watch.observe(40.0, waiting)] == [ADMISSION]


def test_reset_forgets_what_was_seen() -> None:
    """A rebalance, a table restore or a rebuild resets the count (the worker is busy)."""
    watch = StallWatch(limit=20.0, interval=5.0)
    waiting = {WATCH: Position(0, 1)}
    for now in (0.0, 5.0, 10.0, 15.0):
        assert watch.observe(now, waiting) == []
    watch.reset()
    for now in (20.0, 25.0, 30.0, 35.0):
        assert watch.observe(now, waiting) == []
    assert len(watch.observe(40.0, waiting)) == 1


@pytest.mark.kafka
async def test_the_broker_shows_waiting_records_and_only_records_a_reader_gets(kafka_bootstrap: str) -> None:
    """``positions`` reads the group's committed offsets and the ends; ``confirmed`` keeps a stall
    only when a record a ``read_committed`` reader gets lies at or after the committed offset,
    not when all that follows it is an aborted transaction."""
    tag = f"{random.Random().getrandbits(32):08x}"
    topic, group = f"stall{tag}.t", f"stall{tag}"
    servers = parse_broker_url(kafka_bootstrap)
    async with KafkaLog(kafka_bootstrap) as kafka:
        await kafka.ensure_topic(topic, 2)
        for i in range(3):
            await kafka.append(topic, b"k", f"v{i}".encode(), partition=0)
            await kafka.append(topic, b"k", f"v{i}".encode(), partition=1)
        consumer = AIOKafkaConsumer(bootstrap_servers=servers, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
            await consumer.commit({TopicPartition(topic, 0): 1, TopicPartition(topic, 1): 3})
        finally:
            await consumer.stop()
        producer = AIOKafkaProducer(bootstrap_servers=servers, transactional_id=f"stall{tag}")
        await producer.start()
        try:
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"never", partition=1)
            await producer.abort_transaction()
        finally:
            await producer.stop()

        seen = await positions(kafka, group, [(topic, 1), (topic, 0)])
        assert seen[(topic, 0)] == Position(committed=1, end=3)
        # The aborted record and its marker put the end past the committed offset.
        assert seen[(topic, 1)].committed == 3 and seen[(topic, 1)].end > 3
        assert all(p.waiting for p in seen.values())
        stalls = [Stall((topic, 0), 1, 60.0), Stall((topic, 1), 3, 60.0)]
        assert await confirmed(kafka, stalls, seen) == [stalls[0]]


def test_a_worker_that_gives_up_says_why_and_exits_75() -> None:
    """The log names the stuck partition, what the consumer says of it and what each task was
    waiting on; the exit status tells the Deployment (or the operator) to start the worker again."""
    script = textwrap.dedent(
        """
        import asyncio, logging
        from kueuestream.agents.faust_worker.stall_watch import Stall, give_up

        async def wait_for_a_record_that_never_comes():
            await asyncio.Event().wait()

        async def main():
            asyncio.ensure_future(wait_for_a_record_that_never_comes())
            await asyncio.sleep(0.05)
            give_up([Stall(("t.kueue.watch", 0), 21, 61.0)], ["t.kueue.watch[0]: Faust: paused yes"])

        logging.basicConfig(level=logging.INFO)
        asyncio.run(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == STALL_EXIT_CODE == 75
    assert "exiting with status 75 so that it is started again" in done.stderr
    assert "t.kueue.watch[0]: a record waits at offset 21" in done.stderr
    assert "what the consumer says of them:\n  t.kueue.watch[0]: Faust: paused yes" in done.stderr
    assert "wait_for_a_record_that_never_comes" in done.stderr
