"""Running the Faust workers for real: subprocesses on the test broker, and reading their topics."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from aiokafka import AIOKafkaConsumer, TopicPartition

from kueuestream.agents.audit.replay import Verdict, verify
from kueuestream.agents.faust_worker.publish import ensure_topics, send_watch
from kueuestream.agents.log_entries import decode_entry
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams.kafka_log import KafkaLog, parse_broker_url
from kueuestream.streams.log import Record
from kueuestream.streams.schemas import DecisionRecord
from tests.pipeline.checks import decode_all

REPO = Path(__file__).resolve().parents[2]
# Upper bound for one wait on the pipeline; a test normally waits a fraction of it.
TIMEOUT = 60.0


class Workers:
    """``count`` Faust workers of one app on one set of topics, stopped on exit (and logs kept on failure)."""

    def __init__(self, broker: str, tmp: Path, count: int, *, tag: str = "") -> None:
        self.broker = broker
        self.tmp = tmp
        self.count = count
        ident = uuid.uuid4().hex[:8]
        self.prefix = f"t{ident}{tag}."
        self.app_id = f"ks-{ident}{tag}"
        self.names = TopicNames(self.prefix)
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * count
        self.starts = [0] * count

    def start(self, i: int) -> None:
        self.starts[i] += 1
        logfile = open(self.tmp / f"worker-{i}-{self.starts[i]}.log", "wb")  # noqa: SIM115 (owned by the child)
        self.procs[i] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kueuestream",
                "worker",
                "--broker",
                self.broker,
                "--app-id",
                self.app_id,
                "--topic-prefix",
                self.prefix,
                "--datadir",
                str(self.tmp / f"faust-{i}"),
                "--loglevel",
                "info",
                # Time moves only with the events written: comparable with an embedded run.
                "--no-clock",
            ],
            cwd=REPO,
            stdout=logfile,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        logfile.close()

    def kill(self, i: int, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[i]
        assert proc is not None
        proc.send_signal(sig)
        proc.wait(timeout=30)
        self.procs[i] = None

    def log_of(self, i: int) -> str:
        return (self.tmp / f"worker-{i}-{self.starts[i]}.log").read_text(errors="replace")

    def wait_stable(self, timeout: float = TIMEOUT, quiet: float = 1.5) -> None:
        """Wait until every live worker is ready after the group's last rebalance."""
        deadline = time.monotonic() + timeout
        last: list[str] = []
        while time.monotonic() < deadline:
            logs = [self.log_of(i) for i in self.alive()]
            ready = all(
                log.rfind("Worker ready") > log.rfind("Revoking previously assigned partitions") >= 0
                for log in logs
            )
            if ready and logs == last:
                return
            last = logs if ready else []
            time.sleep(quiet)
        raise AssertionError(f"the {self.count} workers did not settle in {timeout:g}s")

    def alive(self) -> list[int]:
        return [i for i, p in enumerate(self.procs) if p is not None and p.poll() is None]

    def __enter__(self) -> Self:
        asyncio.run(_create(self.broker, self.names))
        for i in range(self.count):
            self.start(i)
        self.wait_stable()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for i, proc in enumerate(self.procs):
            if proc is None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)
            self.procs[i] = None
        if exc_type is not None:
            for log in sorted(self.tmp.glob("worker-*.log")):
                tail = log.read_text(errors="replace")[-3000:]
                print(f"--- {log.name} ---\n{tail}", file=sys.stderr)


async def _create(broker: str, names: TopicNames) -> None:
    async with KafkaLog(broker) as kafka:
        await ensure_topics(kafka, names)


async def read_topic(kafka: KafkaLog, topic: str) -> list[list[Record]]:
    count = await kafka.partitions(topic)
    return [[r async for r in kafka.read(topic, p)] for p in range(count)]


async def read_decisions(kafka: KafkaLog, names: TopicNames) -> list[list[DecisionRecord]]:
    return [decode_all(r.value for r in part) for part in await read_topic(kafka, names.decisions)]


async def wait_until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.1)


class TopicReader:
    """Everything committed to a topic so far, read by one long-lived ``read_committed`` consumer."""

    def __init__(self, broker: str, topic: str, partitions: int) -> None:
        self.topic = topic
        self.parts: list[list[bytes]] = [[] for _ in range(partitions)]
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=parse_broker_url(broker),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )

    async def __aenter__(self) -> Self:
        await self.consumer.start()
        tps = [TopicPartition(self.topic, p) for p in range(len(self.parts))]
        self.consumer.assign(tps)
        for tp in tps:
            self.consumer.seek(tp, 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()

    async def poll(self, timeout_ms: int = 100) -> list[list[bytes]]:
        batches = await self.consumer.getmany(timeout_ms=timeout_ms, max_records=10_000)
        for tp, messages in batches.items():
            self.parts[tp.partition] += [m.value for m in messages]
        return self.parts

    def decisions(self) -> list[list[DecisionRecord]]:
        return [decode_all(part) for part in self.parts]


async def wait_for_count(reader: TopicReader, count: int, timeout: float = TIMEOUT) -> None:
    """Wait until exactly ``count`` records are committed (more is a failure)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = total(await reader.poll())
        assert seen <= count, f"{seen} records committed to {reader.topic}, expected {count}"
        if seen == count:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s: {seen} of {count} records in {reader.topic}")


def total(parts: Sequence[Sequence[object]]) -> int:
    return sum(len(p) for p in parts)


async def settled(kafka: KafkaLog, w: Workers, watch_end: int) -> tuple[Verdict, list[list[Record]]] | None:
    """The replay verdict once every watch event is ingested and every decision written; else None."""
    admission = await read_topic(kafka, w.names.admission)
    ingested = max(
        (
            e.origin.offset
            for part in admission
            for r in part
            if (e := decode_entry(r.value)).origin.stream == "watch"
        ),
        default=-1,
    )
    if ingested < watch_end - 2:  # the last watch event is a workload's TICK-closed upsert
        return None
    decisions = [[r.value for r in part] for part in await read_topic(kafka, w.names.decisions)]
    verdict = verify(admission, decisions)
    return None if verdict.mismatches else (verdict, admission)


async def stream_with_a_kill(
    broker: str, w: Workers, events: list[bytes], kill_at: int | None = None
) -> tuple[Verdict, list[list[Record]]]:
    """Send ``events`` one by one (SIGKILL worker 0 and start it again after ``kill_at``); then
    wait until everything is processed, and return the replay verdict and the admission log."""
    async with KafkaLog(broker) as kafka:
        for i, value in enumerate(events):
            await send_watch(kafka, w.names, [value])
            if kill_at is not None and i == kill_at:
                w.kill(0, signal.SIGKILL)
                w.start(0)
            await asyncio.sleep(0.01)
        watch_end = (await kafka.end_offsets(w.names.watch))[0]
        deadline = time.monotonic() + 2 * TIMEOUT
        while time.monotonic() < deadline:
            done = await settled(kafka, w, watch_end)
            if done is not None:
                return done
            await asyncio.sleep(1.0)
    raise AssertionError("the pipeline did not catch up with the stream after the kill")
