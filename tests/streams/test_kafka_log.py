from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from kueuestream.streams.file_log import FileLog
from kueuestream.streams.kafka_log import KafkaLog, parse_broker_url
from kueuestream.streams.log import Record, TopicMismatchError, UnknownTopicError
from kueuestream.streams.topic_copy import copy_topic, export_topics, import_topics
from kueuestream.streams.topics import partition_for_key

SHARDS = [f"cohort:root-{i}" for i in range(12)] + ["cq:solo", "cq:batch"]


def test_parse_broker_url() -> None:
    assert parse_broker_url("kafka://127.0.0.1:9093") == ["127.0.0.1:9093"]
    assert parse_broker_url("127.0.0.1:9093") == ["127.0.0.1:9093"]
    assert parse_broker_url("kafka://broker") == ["broker:9092"]
    assert parse_broker_url("kafka://a:1;kafka://b:2") == ["a:1", "b:2"]
    assert parse_broker_url("a:1, b:2") == ["a:1", "b:2"]
    assert parse_broker_url("kafka://[::1]:9092/") == ["[::1]:9092"]
    with pytest.raises(ValueError, match="scheme must be kafka://"):
        parse_broker_url("http://a:1")
    with pytest.raises(ValueError, match="out of range"):
        parse_broker_url("a:70000")
    with pytest.raises(ValueError, match="names no broker"):
        parse_broker_url(" , ")
    with pytest.raises(ValueError, match="is not HOST:PORT"):
        parse_broker_url("a:b:c")


def unique(name: str) -> str:
    return f"kueuestream-test-{name}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def kafka(kafka_bootstrap: str) -> AsyncIterator[KafkaLog]:
    log = KafkaLog(f"kafka://{kafka_bootstrap}", client_id="kueuestream-tests")
    created_before = set(await log.topics())
    try:
        yield log
    finally:
        for topic in set(await log.topics()) - created_before:
            if topic.startswith("kueuestream-test-"):
                await log.delete_topic(topic)
        await log.close()


async def partition_contents(log: KafkaLog | FileLog, topic: str) -> dict[int, list[Record]]:
    count = await log.partitions(topic)
    out: dict[int, list[Record]] = {}
    for p in range(count):
        out[p] = [r async for r in log.read(topic, p)]
    return out


@pytest.mark.kafka
async def test_append_read_round_trip(kafka: KafkaLog) -> None:
    topic = unique("rt")
    assert await kafka.ensure_topic(topic, 6) == 6
    assert await kafka.ensure_topic(topic) == 6
    assert await kafka.end_offsets(topic) == dict.fromkeys(range(6), 0)

    records = [(shard.encode(), f"{shard}#{i}".encode()) for i in range(20) for shard in SHARDS]
    positions = await kafka.append_many(topic, records)
    assert len(positions) == len(records)
    expected: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(6)}
    for (key, value), position in zip(records, positions, strict=True):
        # Every key lands where our partitioner says, in order, offsets dense from 0.
        assert position.topic == topic
        assert position.partition == partition_for_key(key, 6)
        assert position.offset == len(expected[position.partition])
        expected[position.partition].append((key, value))

    single = await kafka.append(topic, b"cq:solo", b"last")
    expected[single.partition].append((b"cq:solo", b"last"))
    assert single.offset == len(expected[single.partition]) - 1

    ends = await kafka.end_offsets(topic)
    assert ends == {p: len(v) for p, v in expected.items()}
    got = await partition_contents(kafka, topic)
    for p in range(6):
        assert [(r.key, r.value) for r in got[p]] == expected[p]
        assert [r.offset for r in got[p]] == list(range(len(expected[p])))
        assert all(r.partition == p and r.topic == topic for r in got[p])

    # Reads from the middle and bounded reads.
    busiest = max(expected, key=lambda p: len(expected[p]))
    tail = [r async for r in kafka.read(topic, busiest, 5)]
    assert [(r.key, r.value) for r in tail] == expected[busiest][5:]
    window = [r.offset async for r in kafka.read(topic, busiest, 2, until=4)]
    assert window == [2, 3]


@pytest.mark.kafka
async def test_topic_checks(kafka: KafkaLog) -> None:
    topic = unique("checks")
    with pytest.raises(UnknownTopicError, match="explicit partition count"):
        await kafka.append(topic, b"k", b"v")
    # The failed append must not have created the topic through auto-creation.
    assert topic not in await kafka.topics()
    await kafka.ensure_topic(topic, 3)
    with pytest.raises(TopicMismatchError, match="3 partitions, not 6"):
        await kafka.ensure_topic(topic, 6)
    assert await kafka.append(topic, b"k", b"v", partition=2) == (topic, 2, 0)
    with pytest.raises(ValueError, match=r"partitions 0\.\.2"):
        await kafka.append(topic, b"k", b"v", partition=3)


@pytest.mark.kafka
async def test_export_to_file_and_import_to_a_new_topic(kafka: KafkaLog, tmp_path: Path) -> None:
    source = unique("src")
    await kafka.ensure_topic(source, 6)
    records = [(shard.encode(), f"{shard}/{i}".encode()) for i in range(15) for shard in SHARDS]
    await kafka.append_many(source, records)

    exported = await export_topics(kafka, tmp_path / "export", [source])
    assert exported[0].records == len(records) and exported[0].offsets_preserved

    with FileLog(tmp_path / "export", read_only=True) as file_log:
        assert await partition_contents(file_log, source) == await partition_contents(kafka, source)
        destination = unique("dst")
        copied = await copy_topic(file_log, kafka, source, destination_topic=destination)
        assert copied.records == len(records) and copied.offsets_preserved

    assert await kafka.partitions(destination) == 6
    original = await partition_contents(kafka, source)
    restored = await partition_contents(kafka, destination)
    for p in range(6):
        assert [(r.offset, r.key, r.value) for r in restored[p]] == [
            (r.offset, r.key, r.value) for r in original[p]
        ]

    # import_topics does the same under the source's own name into another log.
    with FileLog(tmp_path / "again") as again:
        (result,) = await import_topics(tmp_path / "export", again, [source])
        assert result.records == len(records)


@pytest.mark.kafka
async def test_the_last_visible_offset_skips_markers_and_aborted_tails(
    kafka: KafkaLog, kafka_bootstrap: str
) -> None:
    """What Faust's table recovery must read up to: the last record a read_committed reader
    gets, which is not the end offset minus one once a partition is written in transactions."""
    topic = unique("tails")
    await kafka.ensure_topic(topic, 6)
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, transactional_id=unique("tails-tx"), enable_idempotence=True
    )
    await producer.start()
    try:
        # p0: plain appends, no transaction; p1: one committed transaction (marker last);
        # p2: committed, then an aborted transaction longer than the first window read back;
        # p3: only aborted records; p4: committed, aborted, committed; p5: empty.
        await kafka.append_many(topic, [(b"k", b"plain")] * 3, partition=0)

        async def transaction(partition: int, count: int, commit: bool) -> None:
            await producer.begin_transaction()
            for i in range(count):
                await producer.send_and_wait(topic, f"{partition}-{i}".encode(), partition=partition)
            await (producer.commit_transaction() if commit else producer.abort_transaction())

        await transaction(1, 2, True)
        await transaction(2, 3, True)
        await transaction(2, 40, False)
        await transaction(3, 5, False)
        await transaction(4, 2, True)
        await transaction(4, 2, False)
        await transaction(4, 1, True)
    finally:
        await producer.stop()

    ends = await kafka.end_offsets(topic)
    # Each transaction adds one marker; aborted records take offsets too.
    assert ends == {0: 3, 1: 3, 2: 45, 3: 6, 4: 8, 5: 0}
    last = await kafka.last_visible_offsets({(topic, p): end for p, end in ends.items()})
    assert last == {
        (topic, 0): 2,
        (topic, 1): 1,
        (topic, 2): 2,
        (topic, 3): -1,
        (topic, 4): 6,
        (topic, 5): -1,
    }
    # What the reader gets agrees: the last record read is at that offset.
    for p in range(6):
        offsets = [r.offset for r in [r async for r in kafka.read(topic, p)]]
        assert (offsets[-1] if offsets else -1) == last[(topic, p)]
