"""Snapshots of the admission state on Kafka: a restarted worker takes up where the snapshot ends.

A worker writes a snapshot of each admission partition every few records
(``--snapshot-every``). Killed and started again, it must restore the newest
snapshot and read ``kueue.admission`` only from the offset the snapshot covers,
not from 0, and the decisions must still be byte for byte those of the embedded
runtime (nothing lost, nothing twice). A snapshot that cannot be decoded is
reported and the partition is read from 0, with the same decisions.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import signal
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from kueuestream.agents.admission_shards import PartitionState
from kueuestream.agents.faust_worker.processes import WorkerProcesses
from kueuestream.agents.faust_worker.snapshots import (
    CHUNK_BYTES,
    MANIFEST_KEY,
    Coverage,
    SnapshotStore,
    WriterMark,
    encode_state,
    snapshot_topic,
)
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams.kafka_log import KafkaLog, parse_broker_url
from tests.pipeline.embedded_run import raw_topic
from tests.pipeline.test_pipeline_kafka import Steps, embedded, encoded, kafka_topics, through_kafka
from tests.pipeline.watch_streams import workload_stream

pytestmark = pytest.mark.kafka

EVERY = 8
READING = re.compile(r"admission partition (\d+): reading the log from offset (\d+) up to offset (\d+)")
ROUTING = re.compile(r"ingest routing rebuilt from \S+ offset (\d+) up to offset (\d+)")
FROM_0 = re.compile(r"admission partition (\d+): rebuilding for offset 0 ")
# Partition 6 of kueue.snapshots holds ingest's routing tables; 0-5 the admission partitions'.
ROUTING_PARTITION = 6


async def manifests(broker: str, names: TopicNames) -> dict[int, list[dict]]:
    """Every snapshot manifest written so far, per partition of ``kueue.snapshots``, oldest first."""
    topic = snapshot_topic(names)
    async with KafkaLog(broker) as kafka:
        count = await kafka.partitions(topic)
        return {
            p: [json.loads(r.value) async for r in kafka.read(topic, p) if r.key == MANIFEST_KEY]
            for p in range(count)
        }


def readings(log: str) -> dict[int, tuple[int, int]]:
    """Per admission partition, (first offset read, offset read up to) of each rebuild in ``log``."""
    return {int(p): (int(start), int(until)) for p, start, until in READING.findall(log)}


def run_with_a_restart(
    broker: str, tmp_path: Path, steps: Steps, damage: bool = False, rewind: bool = False
) -> tuple[WorkerProcesses, str]:
    """Half the steps, a SIGKILL and a restart of the one worker, the other half; the topics must
    equal the embedded run's. Before the restart, ``damage`` makes the newest snapshot of every
    partition undecodable, ``rewind`` sets the group's committed offsets of ``kueue.admission``
    back to 0 (as if the worker had died before committing any)."""
    log, ends, counts = embedded(steps)
    half = len(steps) // 2
    with WorkerProcesses.isolated(broker, 1, tmp_path, tag="snap", clock=False, snapshot_every=EVERY) as w:
        asyncio.run(through_kafka(broker, w.names, steps[:half], ends[:half], counts[:half]))
        written = asyncio.run(manifests(broker, w.names))
        assert sum(len(m) for m in written.values()) >= 2, "no snapshots were written"
        if damage:
            asyncio.run(damage_newest(broker, w.names, written))
        w.kill(0, signal.SIGKILL)
        if rewind:
            asyncio.run(end_open_transactions(broker, w))
            asyncio.run(rewind_admission(broker, w))
        w.start(0)
        w.wait_settled()
        asyncio.run(through_kafka(broker, w.names, steps[half:], ends[half:], counts[half:]))
        got = asyncio.run(kafka_topics(broker, w.names))
        restarted = w.log_of(0)
    assert got == {topic: raw_topic(log, topic) for topic in got}
    return w, restarted


async def end_open_transactions(broker: str, w: WorkerProcesses) -> None:
    """Start a producer under each transactional id of the killed worker's Faust producers
    (``{app}-{topic group}-{partition}``: group 0 is ``kueue.watch``, 1 the six-partition
    topics). That aborts a transaction it left open, and waits for one it was committing, so
    no offset commit of the killed worker lands after the rewind."""
    ids = [f"{w.app_id}-0-0", *(f"{w.app_id}-1-{p}" for p in range(6))]
    for transactional_id in ids:
        producer = AIOKafkaProducer(
            bootstrap_servers=parse_broker_url(broker), transactional_id=transactional_id
        )
        await producer.start()
        await producer.stop()


async def rewind_admission(broker: str, w: WorkerProcesses) -> None:
    """Commit offset 0 of every ``kueue.admission`` partition for the workers' group, once the
    broker has given up on the killed member (a group with members refuses outside commits)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=parse_broker_url(broker), group_id=w.app_id, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = [TopicPartition(w.names.admission, p) for p in range(6)]
        consumer.assign(tps)
        for _ in range(60):
            try:
                await consumer.commit(dict.fromkeys(tps, 0))
            except KafkaError:
                await asyncio.sleep(1.0)
                continue
            committed = {tp.partition: await consumer.committed(tp) for tp in tps}
            assert set(committed.values()) == {0}, f"the rewind did not hold: {committed}"
            return
        raise AssertionError(f"could not rewind the offsets of group {w.app_id}")
    finally:
        await consumer.stop()


async def damage_newest(broker: str, names: TopicNames, written: dict[int, list[dict]]) -> None:
    """For each partition, a newer snapshot whose chunk passes the checksum but does not decode."""
    producer = AIOKafkaProducer(bootstrap_servers=parse_broker_url(broker), acks="all")
    await producer.start()
    topic = snapshot_topic(names)
    try:
        for p, docs in written.items():
            if not docs:
                continue
            garbage = random.Random(p).randbytes(1000)
            meta = await producer.send_and_wait(topic, value=garbage, key=b"chunk/0/0", partition=p)
            doc = {
                **docs[-1],
                "chunks": [meta.offset],
                "size": len(garbage),
                "sha256": hashlib.sha256(garbage).hexdigest(),
            }
            await producer.send_and_wait(topic, value=json.dumps(doc).encode(), key=MANIFEST_KEY, partition=p)
    finally:
        await producer.stop()


def test_a_restarted_worker_reads_the_admission_log_from_its_snapshot(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    steps = encoded(workload_stream(40, seed=5).steps)
    w, restarted = run_with_a_restart(kafka_bootstrap, tmp_path, steps)
    written = asyncio.run(manifests(kafka_bootstrap, w.names))
    read = readings(restarted)
    snapshotted = {p: docs for p, docs in written.items() if docs and p != ROUTING_PARTITION}
    assert snapshotted, "no partition has a snapshot"
    for p in snapshotted:
        start, _ = read[p]
        # The restart began at a snapshot's offset, never at 0.
        assert start > 0, f"partition {p} was read from offset 0 although it has a snapshot"
        assert start in {doc["offset"] for doc in snapshotted[p]}
    assert "restored the snapshot" in restarted
    assert "not usable" not in restarted
    # Faust restored its Tables up to the last record of each changelog a read_committed
    # reader gets, not waiting 10 s for the transaction markers that end them to show up
    # as aborted (agents/faust_worker/changelog_recovery.py).
    assert "end past their last readable record" in restarted
    assert "Aborted tx until highwater" not in restarted
    # Ingest too took up its routing tables from a snapshot, not from watch offset 0.
    routed = [int(start) for start, _ in ROUTING.findall(restarted)]
    assert routed and all(start in {d["offset"] for d in written[ROUTING_PARTITION]} for start in routed)
    assert min(routed) > 0


def test_records_a_restored_snapshot_covers_are_not_applied_again(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Faust may give a restarted worker records older than its newest snapshot (their offsets
    were not committed yet): they are in the snapshot, so they are skipped, not decided twice;
    and the records after the snapshot that the killed worker had processed do not send their
    admission records again (the topics equal the embedded run's, copies included).

    Every partition's records come again from the committed offset, 0: none is emptied out of a
    stream's buffer for good as Faust's recovery resumes the flow
    (``agents/faust_worker/flow_control.py``; without it, in about a third of the runs some
    partitions' agent got only the records published after the restart). In about one run in
    twenty no partition's records come again at all (see "Faust empties records" in
    docs/design.md): the case is then not exercised, and the run is made once more."""
    steps = encoded(workload_stream(30, seed=13).steps)
    runs: list[list[str]] = []
    for attempt in range(2):
        w, restarted = run_with_a_restart(kafka_bootstrap, tmp_path / f"run{attempt}", steps, rewind=True)
        written = asyncio.run(manifests(kafka_bootstrap, w.names))
        read = {p: start for p, (start, _) in readings(restarted).items() if written.get(p)}
        assert read and all(start > 0 for start in read.values()), read
        runs.append([line for line in restarted.splitlines() if "rebuilding for offset" in line])
        from_0 = {int(p) for p in FROM_0.findall(restarted)}
        if from_0:
            snapshotted = {p for p, docs in written.items() if docs and p != ROUTING_PARTITION}
            assert snapshotted <= from_0, runs[-1]
            return
    raise AssertionError(f"no run got its records again from offset 0; the rebuilds of each: {runs}")


def test_a_damaged_snapshot_falls_back_to_the_log_from_offset_0(kafka_bootstrap: str, tmp_path: Path) -> None:
    steps = encoded(workload_stream(30, seed=9).steps)
    _, restarted = run_with_a_restart(kafka_bootstrap, tmp_path, steps, damage=True)
    assert "is not usable (the state does not decode" in restarted
    assert "ingest routing: the snapshot" in restarted and "(the routing tables do not decode" in restarted
    assert readings(restarted) and all(start == 0 for start, _ in readings(restarted).values())
    assert [start for start, _ in ROUTING.findall(restarted)] == ["0"]


async def test_a_snapshot_over_kafkas_message_limit_is_written_in_chunks(kafka_bootstrap: str) -> None:
    names = TopicNames(f"snap{random.Random().getrandbits(32):08x}.")
    state = PartitionState(3)
    # Random bytes do not compress: the encoded state is over 3 MB, three times Kafka's default limit.
    noise = random.Random(1).randbytes(3 * 1024 * 1024).hex()
    state.overrides[("ConfigMap", "ns", "big")] = {"data": noise}
    blob = encode_state(state)
    assert len(blob) > 3 * 1024 * 1024
    covers = Coverage(
        3, offset=120, decisions=45, writer=WriterMark(50, 45), ends={p: 10 * p for p in range(6)}
    )
    async with KafkaLog(kafka_bootstrap, topic_configs={snapshot_topic(names): {}}) as kafka:
        producer = AIOKafkaProducer(bootstrap_servers=parse_broker_url(kafka_bootstrap), acks="all")
        await producer.start()
        try:
            store = SnapshotStore(kafka, producer, names, 6)
            assert await store.latest(3) is None
            await store.write(covers, blob)
            # A fresh store, as a restarted worker has.
            snapshot = await SnapshotStore(kafka, producer, names, 6).latest(3)
        finally:
            await producer.stop()
        chunks = [r async for r in kafka.read(snapshot_topic(names), 3) if r.key != MANIFEST_KEY]
    assert snapshot is not None
    assert snapshot.covers == covers
    assert snapshot.state.overrides == state.overrides
    assert len(chunks) == -(-len(blob) // CHUNK_BYTES) >= 7
