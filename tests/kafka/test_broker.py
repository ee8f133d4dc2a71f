"""The test broker is a real Kafka and does what the pipeline needs.

- plain aiokafka produce/consume over a 6-partition topic, with a consumer group;
- transactions: a transactional producer commits and aborts, and a
  ``read_committed`` consumer sees only what was committed;
- a Faust app (agent + Table, ``processing_guarantee="exactly_once"``) run
  in-process: it processes messages, its table changelog topic exists and was
  written inside transactions, and its input offsets were committed.

The broker comes from the session fixture ``kafka_bootstrap`` (tests/conftest.py).
Every test uses fresh topic / group names, so the tests are independent of
each other and of the broker's earlier life.
"""

from __future__ import annotations

import asyncio
import faulthandler
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import faust
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

pytestmark = pytest.mark.kafka

# Upper bound for any single wait on the broker: a hang fails fast, a slow
# (cold) machine still passes. The tests themselves take ~1-4 s each.
TIMEOUT = 30.0

T = TypeVar("T")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def within(awaitable: Awaitable[T], what: str) -> T:
    try:
        return await asyncio.wait_for(awaitable, TIMEOUT)
    except TimeoutError:
        pytest.fail(f"timed out after {TIMEOUT}s: {what}", pytrace=False)


async def create_topics(bootstrap: str, *topics: tuple[str, int]) -> None:
    """Create topics and wait until the broker's metadata serves them.

    A client that subscribes before a topic is in the metadata ignores it until
    its next metadata refresh (minutes), so wait for every partition's leader.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await within(
            admin.create_topics([NewTopic(name, n, 1) for name, n in topics]),
            "create_topics",
        )
        wanted = dict(topics)

        async def served() -> None:
            while True:
                described = await admin.describe_topics(list(wanted))
                if all(
                    t["error_code"] == 0
                    and len(t["partitions"]) == wanted[t["topic"]]
                    and all(p["leader"] >= 0 for p in t["partitions"])
                    for t in described
                ):
                    return
                await asyncio.sleep(0.05)

        await within(served(), "topics in metadata")
    finally:
        await admin.close()


async def list_topics(bootstrap: str) -> set[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return set(await within(admin.list_topics(), "list_topics"))
    finally:
        await admin.close()


async def committed_offsets(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await within(admin.list_consumer_group_offsets(group), "group offsets")
    finally:
        await admin.close()
    return {tp: meta.offset for tp, meta in offsets.items()}


async def consume_until(
    consumer: AIOKafkaConsumer,
    done: Callable[[list[Any]], bool],
    what: str,
) -> list[Any]:
    """Poll ``consumer`` until ``done(records)`` holds (or fail after TIMEOUT)."""
    records: list[Any] = []

    async def loop() -> None:
        while not done(records):
            batch = await consumer.getmany(timeout_ms=200)
            for msgs in batch.values():
                records.extend(msgs)

    await within(loop(), what)
    return records


# ----------------------------------------------------------------------------
# aiokafka: produce / consume, 6 partitions, consumer group
# ----------------------------------------------------------------------------


async def test_produce_consume_round_trip_six_partitions(kafka_bootstrap: str) -> None:
    topic, group = unique("rt"), unique("rt-group")
    await create_topics(kafka_bootstrap, (topic, 6))

    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await within(producer.start(), "producer start")
    try:
        assert len(await producer.partitions_for(topic)) == 6
        sent = {}
        for i in range(24):
            meta = await within(
                producer.send_and_wait(topic, key=f"k{i}".encode(), value=f"v{i}".encode()),
                "send",
            )
            sent[f"k{i}"] = (meta.partition, f"v{i}")
        # Also address every partition explicitly.
        for p in range(6):
            await within(producer.send_and_wait(topic, value=b"explicit", partition=p), "send")
    finally:
        await producer.stop()
    assert len({p for p, _ in sent.values()}) > 1, "keys should spread over partitions"

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await within(consumer.start(), "consumer start (group join)")
    try:
        records = await consume_until(consumer, lambda r: len(r) >= 30, "30 records")
        await within(consumer.commit(), "offset commit")
    finally:
        await consumer.stop()

    keyed = {r.key.decode(): (r.partition, r.value.decode()) for r in records if r.key}
    assert keyed == sent  # same key -> same partition, nothing lost or duplicated
    explicit = sorted(r.partition for r in records if r.key is None)
    assert explicit == list(range(6))
    per_partition = {p: sum(1 for r in records if r.partition == p) for p in range(6)}
    offsets = await committed_offsets(kafka_bootstrap, group)
    assert offsets == {TopicPartition(topic, p): n for p, n in per_partition.items()}


# ----------------------------------------------------------------------------
# aiokafka: transactions and read_committed
# ----------------------------------------------------------------------------


async def test_transactions_commit_and_abort(kafka_bootstrap: str) -> None:
    topic = unique("txn")
    await create_topics(kafka_bootstrap, (topic, 1))

    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap,
        transactional_id=unique("txn-producer"),
        enable_idempotence=True,
    )
    await within(producer.start(), "transactional producer start")
    try:
        async with producer.transaction():
            await producer.send_and_wait(topic, b"committed-1")
            await producer.send_and_wait(topic, b"committed-2")

        await within(producer.begin_transaction(), "begin")
        await producer.send_and_wait(topic, b"aborted-1")
        await producer.send_and_wait(topic, b"aborted-2")
        await within(producer.abort_transaction(), "abort")

        async with producer.transaction():
            await producer.send_and_wait(topic, b"committed-3")
    finally:
        await producer.stop()

    async def read(isolation_level: str, last: bytes) -> list[bytes]:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=kafka_bootstrap,
            group_id=None,
            auto_offset_reset="earliest",
            isolation_level=isolation_level,
        )
        await within(consumer.start(), "consumer start")
        try:
            # `last` is the newest record: once it is read, everything before
            # it has been read too (one partition, offset order).
            records = await consume_until(
                consumer, lambda r: any(m.value == last for m in r), isolation_level
            )
        finally:
            await consumer.stop()
        return [m.value for m in records]

    assert await read("read_committed", b"committed-3") == [
        b"committed-1",
        b"committed-2",
        b"committed-3",
    ]
    # The aborted records did reach the log: only the isolation level hides them.
    assert await read("read_uncommitted", b"committed-3") == [
        b"committed-1",
        b"committed-2",
        b"aborted-1",
        b"aborted-2",
        b"committed-3",
    ]


# ----------------------------------------------------------------------------
# Faust: exactly-once app with an agent and a Table, run in-process
# ----------------------------------------------------------------------------
#
# What works for running a Faust app inside a test (faust-streaming 0.15.3,
# aiokafka 0.12-0.14), found by trying:
#
#     app = faust.App(app_id, broker=f"kafka://{bootstrap}", store="memory://",
#                     processing_guarantee="exactly_once", web_enabled=False,
#                     datadir=tmp_path, topic_partitions=N, ...)
#     ... define topics, tables, agents ...
#     app.in_worker = True    # what faust.Worker.on_start does; without it
#                             # app.in_transaction is False and exactly_once
#                             # is silently NOT used (plain at-least-once)
#     await app.start()       # in the test's own event loop; returns once
#                             # the consumer has joined and recovery is done
#     try:
#         ... produce input, await the agent's effects ...
#         ... wait until the table writes reached the changelog (see below) ...
#     finally:
#         await stop_faust(app)  # app.stop() with a bound: commits the open
#                                # transactions, leaves the group
#
# Gotchas:
# - Stopping while table writes are still in Faust's producer buffer breaks
#   exactly_once (faust-streaming 0.15.3): app.stop() first commits the
#   transactions (input offsets included), then flushes the buffer, whose
#   sends then fail with IllegalOperation("Can't send messages while not in
#   transaction"). The changelog misses those writes although their input is
#   committed, and app.stop() / the loop teardown can hang for good. A table
#   write (`table[k] = v`) only queues the changelog record, so "the agent
#   has processed it" is not "it is in the changelog". Before stopping, wait
#   for the changelog (here: read_uncommitted until all records are there;
#   app.producer.flush() helps but returns as soon as one send takes >0.1 s).
#   Seen ~1 run in 40 before the test waited for it.
# - Source topics must exist (and be in the broker's metadata) BEFORE
#   app.start(): Faust only declares its own internal topics (changelogs, the
#   leader topic). A source topic created later (e.g. auto-created by the first
#   produce) is missed by the consumer's subscription until the next metadata
#   refresh (minutes): the agent sees nothing.
# - A table's partitions must equal its source topic's partitions, or the agent
#   crashes with PartitionsMismatch (topic_partitions / Table(partitions=)).
# - web_enabled=False (else it binds port 6066) and datadir=tmp_path (else it
#   creates "<app id>-data/" in the cwd, even with the memory store).
# - faust.Worker(app).execute_from_commandline() owns the loop and the process
#   (signals, logging, sys.exit); `await faust.Worker(app, ...).start()` inside
#   a running loop took ~2 minutes to return and then the agent did not
#   process. Use app.start()/app.stop() as above.


async def stop_faust(app: faust.App) -> None:
    """app.stop(), bounded, and never leaving the test run hung.

    A Faust app whose stop hangs keeps tasks that ignore cancellation (and a
    non-daemon consumer thread): pytest-asyncio's loop teardown, or the
    interpreter's exit, would then wait forever. If stop does not finish in
    TIMEOUT, fail the test and arm a watchdog that ends the whole process
    (with every thread's traceback) 120 s later, so CI fails instead of hanging.
    """
    stopping = asyncio.ensure_future(app.stop())
    done, _ = await asyncio.wait({stopping}, timeout=TIMEOUT)
    if not done:
        faulthandler.dump_traceback_later(120, exit=True)
        pytest.fail(f"faust app.stop() did not finish in {TIMEOUT}s", pytrace=False)
    stopping.result()


async def test_faust_exactly_once_app_with_table(kafka_bootstrap: str, tmp_path: Path) -> None:
    app_id, source_name = unique("faust-app"), unique("faust-src")
    changelog = f"{app_id}-counts-changelog"
    partitions = 2
    await create_topics(kafka_bootstrap, (source_name, partitions))

    app = faust.App(
        app_id,
        broker=f"kafka://{kafka_bootstrap}",
        store="memory://",
        processing_guarantee="exactly_once",
        web_enabled=False,
        datadir=str(tmp_path),
        topic_partitions=partitions,
        topic_replication_factor=1,
        consumer_auto_offset_reset="earliest",
    )
    source = app.topic(
        source_name,
        key_type=str,
        value_type=str,
        key_serializer="raw",
        value_serializer="raw",
        partitions=partitions,
    )
    counts = app.Table("counts", default=int, partitions=partitions)
    inputs = [("k1", "a"), ("k1", "b"), ("k1", "a"), ("k1", "c"), ("k1", "a")]
    seen = asyncio.Event()

    @app.agent(source)
    async def count(stream: Any) -> None:
        async for word in stream:
            counts[word] += 1
            if sum(counts.values()) >= len(inputs):
                seen.set()

    async def read_changelog(isolation_level: str) -> list[Any]:
        consumer = AIOKafkaConsumer(
            changelog,
            bootstrap_servers=kafka_bootstrap,
            group_id=None,
            auto_offset_reset="earliest",
            isolation_level=isolation_level,
        )
        await within(consumer.start(), "changelog consumer start")
        try:
            return await consume_until(
                consumer, lambda r: len(r) >= len(inputs), f"changelog ({isolation_level})"
            )
        finally:
            await consumer.stop()

    app.in_worker = True  # see the recipe above: enables exactly_once
    await within(app.start(), "faust app start")
    try:
        assert app.in_transaction, "exactly_once is not in effect"
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await within(producer.start(), "producer start")
        try:
            for key, word in inputs:
                await within(
                    producer.send_and_wait(source_name, key=key.encode(), value=word.encode()),
                    "send",
                )
        finally:
            await producer.stop()
        await within(seen.wait(), "agent processed the input")
        assert dict(counts.items()) == {"a": 3, "b": 1, "c": 1}
        # Table writes must be in the changelog (still uncommitted) before
        # stop commits the transaction: see the first gotcha above.
        await within(app.producer.flush(), "faust producer flush")
        await read_changelog("read_uncommitted")
    finally:
        await stop_faust(app)

    assert changelog in await list_topics(kafka_bootstrap)

    # The changelog was written in transactions and committed at stop: a
    # read_committed reader sees the final counts, and the partition's end
    # offset is past the last record (a transaction commit marker follows it).
    records = await read_changelog("read_committed")
    latest = {r.key: r.value for r in records}  # JSON-encoded key -> value
    assert latest == {b'"a"': b"3", b'"b"': b"1", b'"c"': b"1"}
    last = max(records, key=lambda r: r.offset)
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=None)
    await within(consumer.start(), "consumer start")
    try:
        tp = TopicPartition(changelog, last.partition)
        end = await within(consumer.end_offsets([tp]), "end offsets")
    finally:
        await consumer.stop()
    assert end[tp] > last.offset + 1

    # The input offsets were committed (via the transaction) for the app's group.
    offsets = await committed_offsets(kafka_bootstrap, app_id)
    assert sum(o for tp, o in offsets.items() if tp.topic == source_name) == len(inputs)
