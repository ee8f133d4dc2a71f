"""Faust's own ceiling on a broker: one Faust agent that does nothing with the bench's messages.

    .venv/bin/python bench/faust_ceiling.py --broker HOST:PORT [--events 2000] [--messages 20000]

The pipeline's agents run inside Faust; this measures what Faust itself takes
per record, with no agent work at all, on the same broker and with the
worker's settings (exactly once, in-memory store, 0.1 s commit interval, no
linger). A one-partition topic is filled first with the watch-event messages
of ``pipeline_bench`` (repeated up to --messages); then a Faust worker starts
in a subprocess and its agent reads them:

- pass-through: the agent takes each message and nothing else (Faust
  acknowledges it, and commits the offsets in its transactions); once more
  at least once, with no transactions;
- one out per in: the agent also sends each message to a second topic through
  Faust's producer, in the partition's transaction (one pipeline stage: ingest
  writes two admission records per event, admission one decision per record).

Timed from the first message the agent gets to the last (the worker's start
and the group's rebalance are left out), with the worker's CPU time over the
same span. ``pipeline_bench`` prints the same figures beside raw aiokafka's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import faust  # noqa: E402
from aiokafka import AIOKafkaProducer  # noqa: E402

from kueuestream.agents.faust_worker.app import COMMIT_INTERVAL  # noqa: E402
from kueuestream.streams.kafka_log import KafkaLog  # noqa: E402
from kueuestream.streams.kafka_urls import parse_broker_url  # noqa: E402

# (what the agent does, Faust's processing guarantee)
MODES = (
    ("pass-through", "exactly_once"),
    ("pass-through", "at_least_once"),
    ("one out per in", "exactly_once"),
)


def run_agent(broker: str, topic: str, out: str | None, count: int, datadir: str, guarantee: str) -> None:
    """The subprocess: a Faust worker whose agent takes ``count`` messages of ``topic``, then
    prints the seconds (and the process's CPU seconds) from the first to the last as JSON and exits."""
    app = faust.App(
        f"ceiling-{uuid.uuid4().hex[:8]}",
        broker=";".join(f"kafka://{a}" for a in parse_broker_url(broker)),
        processing_guarantee=guarantee,
        store="memory://",
        datadir=datadir,
        topic_replication_factor=1,
        web_enabled=False,
        broker_commit_interval=COMMIT_INTERVAL,
        producer_linger=0.0,
        consumer_auto_offset_reset="earliest",
    )
    source = app.topic(topic, partitions=1, key_type=bytes, value_type=bytes, value_serializer="raw")
    target = (
        app.topic(out, partitions=1, key_type=bytes, value_type=bytes, value_serializer="raw")
        if out is not None
        else None
    )

    @app.agent(source)
    async def take(stream: faust.Stream[bytes]) -> None:
        seen = 0
        first = first_cpu = 0.0
        async for value in stream:
            if seen == 0:
                first, first_cpu = time.perf_counter(), time.process_time()
            if target is not None:
                await target.send(value=value, partition=0)
            seen += 1
            if seen == count:
                took = {"seconds": time.perf_counter() - first, "cpu": time.process_time() - first_cpu}
                print(json.dumps(took), flush=True)
                # What is measured is done; an orderly stop would only add Faust's shutdown.
                os._exit(0)

    worker = faust.Worker(app, loglevel="warning", quiet=True, redirect_stdouts=False)
    worker.execute_from_commandline()


async def fill(broker: str, topic: str, values: list[bytes], out: str | None) -> None:
    async with KafkaLog(broker) as kafka:
        await kafka.ensure_topic(topic, 1)
        if out is not None:
            await kafka.ensure_topic(out, 1)
        settings = kafka.settings
    producer = AIOKafkaProducer(**settings.client_options(), enable_idempotence=True, acks="all")
    await producer.start()
    try:
        await asyncio.gather(*[await producer.send(topic, value=v, key=b"", partition=0) for v in values])
    finally:
        await producer.stop()


async def drop(broker: str, topics: list[str]) -> None:
    async with KafkaLog(broker) as kafka:
        for topic in topics:
            await kafka.delete_topic(topic)


def ceiling(broker: str, values: list[bytes], mode: str, guarantee: str) -> tuple[float, float]:
    """Messages/s Faust takes ``values`` at in ``mode``, and its CPU seconds per 1,000 messages."""
    tag = uuid.uuid4().hex[:8]
    topic = f"ceiling-{tag}"
    out = f"ceiling-{tag}-out" if mode == "one out per in" else None
    asyncio.run(fill(broker, topic, values, out))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, __file__, "--agent", "--broker", broker, "--topic", topic]
            cmd += ["--count", str(len(values)), "--datadir", tmp, "--guarantee", guarantee]
            cmd += ["--out", out] if out else []
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
            try:
                line, _ = proc.communicate(timeout=600)
            finally:
                proc.kill()
    finally:
        asyncio.run(drop(broker, [t for t in (topic, out) if t is not None]))
    # Faust's spinner writes terminal codes to the same stdout.
    found = re.search(r'\{"seconds": [^}]*\}', line)
    if found is None:
        raise RuntimeError(f"the Faust worker took fewer than {len(values)} messages ({proc.returncode=})")
    took = json.loads(found.group())
    return len(values) / took["seconds"], took["cpu"] * 1000 / len(values)


def print_ceilings(broker: str, values: list[bytes], raw: float | None) -> None:
    for mode, guarantee in MODES:
        rate, cpu = ceiling(broker, values, mode, guarantee)
        share = f" = {rate / raw:.1%} of raw aiokafka" if raw else ""
        print(
            f"faust alone, {mode}, {guarantee.replace('_', ' ')}: {len(values)} messages in one partition, "
            f"{rate:,.0f} messages/s{share}; CPU per 1,000 messages {cpu:.2f}s"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--broker", required=True, help="HOST:PORT of a Kafka broker")
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--agent", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--datadir", help=argparse.SUPPRESS)
    parser.add_argument("--guarantee", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.agent:
        run_agent(args.broker, args.topic, args.out, args.count, args.datadir, args.guarantee)
        return 0
    from bench.pipeline_bench import raw_values

    print_ceilings(args.broker, raw_values(args.events, args.messages), None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
