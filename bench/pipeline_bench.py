"""Pipeline benchmark: throughput and watch-event-to-decision latency, embedded and on Kafka; replay speed.

    .venv/bin/python bench/pipeline_bench.py [--events 2000] [--replay-events 100000]
                                             [--broker HOST:PORT --workers 1 2 3]
                                             [--recovery-events 10000 100000]

- embedded, streaming: one Workload event at a time through the embedded
  runtime on its durable file log (fsync on), each processed to its decision
  before the next arrives; latency is submit -> decision written and applied.
- embedded, listing: the same Workloads as one batch (a folder loaded at once).
- embedded, at once: the Kafka run's shape (the cluster, then every event
  submitted at once) on the in-memory log: the agents with no broker and no
  fsync. With the raw run it is printed as a fraction of raw aiokafka's
  throughput: the most any runtime of these agents could reach.
- kafka (with --broker): real Faust workers (subprocesses), once per count
  of --workers. Throughput: the events published at once, until the last
  Workload is decided, and the CPU time each worker spent meanwhile (per 1,000
  events; with several counts, the workers' total is also compared with the
  first count's), and when the group had committed its reading of every
  event on `kueue.watch`'s one partition (ingest's part done: each event's
  admission records written), to show whether that partition bounds the
  throughput. Latency: half of them published one by one at --rate per
  second (below saturation), from the publish being acknowledged to the
  decision being committed and read by a read_committed consumer.
- raw aiokafka (with --broker): the same watch-event messages produced by one
  idempotent aiokafka producer (acks=all, as the pipeline's) into a
  one-partition topic and read back by one consumer, first send to last
  message read (repeated up to 20,000 messages, to be timed well); the
  pipeline's throughput is printed as a fraction of it.
- faust alone (with --broker, after the raw run): a Faust worker with the
  pipeline's settings whose agent does nothing with the same messages, read
  from a filled one-partition topic (see ``bench/faust_ceiling.py``): what
  Faust itself takes per record, as a fraction of raw aiokafka.
- recovery (with --broker): for each --recovery-events count, a history of that
  many watch events (Workloads arriving, finishing and deleted, so the live
  state stays bounded) is decided by the embedded runtime and copied into fresh
  Kafka topics, with the group's offsets at their ends. One worker starts, a
  new Workload per cohort makes it rebuild each shard's partition from offset 0
  and write a snapshot; it is killed (SIGKILL) and started again, and new
  Workloads make it recover again, now from the snapshots. Printed: each
  partition's rebuild (from 0, then from the snapshot: restore + the log after
  it), the ingest routing rebuild, and restart -> new Workloads decided.
- replay: a log of --replay-events watch events (about twice as many admission
  records) replayed from an embedded log directory, every decision compared
  byte for byte.

The workload mix keeps the cluster busy but bounded: four cohorts of four
ClusterQueues, Workloads of 1-4 cpu, each finishing a few events after it
arrived, a third of them preempting on priority.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402

from bench.faust_ceiling import print_ceilings  # noqa: E402
from bench.process_cpu import cpu_seconds  # noqa: E402
from kueuestream.agents.audit.replay import verify  # noqa: E402
from kueuestream.agents.embedded.memory_log import MemoryLog  # noqa: E402
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline  # noqa: E402
from kueuestream.agents.faust_worker.processes import WorkerProcesses  # noqa: E402
from kueuestream.agents.faust_worker.publish import ensure_topics  # noqa: E402
from kueuestream.agents.sources.watch_events import as_batch, identify, listing_order, watch_event  # noqa: E402
from kueuestream.agents.topic_names import TopicNames  # noqa: E402
from kueuestream.streams import codec  # noqa: E402
from kueuestream.streams.file_log import FileLog  # noqa: E402
from kueuestream.streams.kafka_log import KafkaLog  # noqa: E402
from kueuestream.streams.schemas import DecisionRecord, WatchEvent, WatchEventType  # noqa: E402
from tests.helpers import (  # noqa: E402
    T0,
    cpu_queue,
    cpu_workload,
    finished_workload,
    flavor_manifest,
    local_queue_manifest,
)
from tests.pipeline.kafka_run import TopicReader  # noqa: E402

NS = "bench"


def cluster() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [flavor_manifest("default")]
    for c in range(4):
        for q in range(4):
            name = f"cq-{c}-{q}"
            out.append(cpu_queue(name, 8, f"cohort-{c}"))
            out.append(local_queue_manifest(f"lq-{c}-{q}", name, NS))
    return out


def workload(i: int, rng: random.Random) -> dict[str, Any]:
    queue = f"lq-{rng.randrange(4)}-{rng.randrange(4)}"
    priority = rng.choice((0, 0, 5))
    return cpu_workload(f"wl-{i:06d}", queue, rng.randint(1, 4), priority=priority, namespace=NS)


def event(manifest: dict[str, Any], type_: WatchEventType, ts: int) -> WatchEvent:
    item = identify(manifest)
    assert not isinstance(item, str)
    return watch_event(item, type_, ts)


def listing(ts: int) -> list[WatchEvent]:
    items = [i for i in (identify(m) for m in cluster()) if not isinstance(i, str)]
    return as_batch([watch_event(i, WatchEventType.ADDED, ts) for i in listing_order(items)], ts)


def recovery_stream(n: int, seed: int = 3) -> list[WatchEvent]:
    """Arrivals, each finishing 16 arrivals later and deleted 16 arrivals after that."""
    rng = random.Random(seed)
    out: list[WatchEvent] = []
    live: list[dict[str, Any]] = []
    finished: list[dict[str, Any]] = []
    i = 0
    while len(out) < n:
        ts = T0 + 1000 + len(out)
        wl = workload(i, rng)
        i += 1
        out.append(event(wl, WatchEventType.ADDED, ts))
        live.append(wl)
        if len(live) > 16:
            done = finished_workload(live.pop(0))
            out.append(event(done, WatchEventType.MODIFIED, ts))
            finished.append(done)
        if len(finished) > 16:
            out.append(event(finished.pop(0), WatchEventType.DELETED, ts))
    return out[:n]


def stream(n: int, seed: int = 1) -> list[tuple[str, WatchEvent]]:
    """(workload the event is about, event): arrivals, each finishing 16 arrivals later."""
    rng = random.Random(seed)
    out: list[tuple[str, WatchEvent]] = []
    live: list[dict[str, Any]] = []
    i = 0
    while len(out) < n:
        ts = T0 + 1000 + len(out)
        wl = workload(i, rng)
        i += 1
        out.append((wl["metadata"]["name"], event(wl, WatchEventType.ADDED, ts)))
        live.append(wl)
        if len(live) > 16 and len(out) < n:
            done = live.pop(0)
            out.append(("", event(finished_workload(done), WatchEventType.MODIFIED, ts)))
    return out


def percentiles(samples: list[float]) -> str:
    samples = sorted(samples)
    p50 = statistics.median(samples)
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    return f"p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms"


# --- embedded ---------------------------------------------------------------------------


def bench_embedded(n: int) -> float:
    """Prints the embedded runs; returns the events/s of the run that mirrors the Kafka one."""
    events = stream(n)
    with tempfile.TemporaryDirectory() as tmp:
        decided: dict[str, float] = {}

        def on_decision(d: DecisionRecord) -> None:
            decided.setdefault(d.ref.name, time.perf_counter())

        with FileLog(Path(tmp) / "log") as log:
            pipeline = EmbeddedPipeline(log, on_decision=on_decision)
            pipeline.submit(listing(T0))
            pipeline.pump()
            sent: dict[str, float] = {}
            start = time.perf_counter()
            for name, ev in events:
                if name:
                    sent[name] = time.perf_counter()
                pipeline.submit([ev])
                pipeline.pump()
            elapsed = time.perf_counter() - start
        latencies = [decided[k] - t for k, t in sent.items() if k in decided]
        print(
            f"embedded streaming: {len(events)} events in {elapsed:.2f}s = "
            f"{len(events) / elapsed:,.0f} events/s; "
            f"watch event -> decision {percentiles(latencies)} ({len(latencies)} workloads decided)"
        )
    with tempfile.TemporaryDirectory() as tmp, FileLog(Path(tmp) / "log") as log:
        manifests = [e.object for _, e in events if e.type == WatchEventType.ADDED]
        items = [i for i in (identify(m) for m in cluster() + manifests) if not isinstance(i, str)]
        batch = as_batch([watch_event(i, WatchEventType.ADDED, T0) for i in listing_order(items)], T0)
        pipeline = EmbeddedPipeline(log)
        start = time.perf_counter()
        pipeline.submit(batch)
        pipeline.pump()
        elapsed = time.perf_counter() - start
        print(
            f"embedded listing:   {len(batch)} events as one batch in {elapsed:.2f}s = "
            f"{len(batch) / elapsed:,.0f} events/s"
        )
    # The Kafka run's shape (the cluster first, then every event published at once) on the
    # in-memory log: the same agents with no broker and no fsync, the most a runtime of
    # these agents could reach.
    pipeline = EmbeddedPipeline(MemoryLog())
    pipeline.submit(listing(T0))
    pipeline.pump()
    start = time.perf_counter()
    pipeline.submit([ev for _, ev in events])
    pipeline.pump()
    elapsed = time.perf_counter() - start
    print(
        f"embedded at once:   {len(events)} events submitted at once, in memory, in {elapsed:.2f}s = "
        f"{len(events) / elapsed:,.0f} events/s"
    )
    return len(events) / elapsed


# --- kafka ------------------------------------------------------------------------------


async def kafka_run(
    broker: str,
    names: TopicNames,
    events: list[tuple[str, WatchEvent]],
    rate: float | None,
    pids: Sequence[int] = (),
    group_id: str = "",
) -> tuple[float, list[float], list[float], float | None]:
    """Publish ``events`` (all at once, or one by one at ``rate`` per second); the time until the
    last decision, each Workload's latency from publication to its first committed decision,
    the CPU seconds each process of ``pids`` spent from the first publication to the last
    decision, and (with ``group_id``) the time until that group had committed its reading of
    every event published: ingest's part, done with the events' admission records written."""
    sent: dict[str, float] = {}
    decided: dict[str, float] = {}
    ingested: float | None = None

    async def collect(decisions: TopicReader) -> None:
        read = [0] * len(decisions.parts)
        while True:
            parts = await decisions.poll(timeout_ms=20)
            now = time.perf_counter()
            for p, part in enumerate(parts):
                for value in part[read[p] :]:
                    decided.setdefault(codec.decode(value, DecisionRecord).ref.name, now)
                read[p] = len(part)

    partitions = names.partition_counts()[names.decisions]
    async with TopicReader(broker, names.decisions, partitions) as decisions, KafkaLog(broker) as kafka:
        reader = asyncio.ensure_future(collect(decisions))
        try:
            await kafka.append_many(names.watch, [(b"", codec.encode(e)) for e in listing(T0)], partition=0)
            await asyncio.sleep(3)
            cpu_before = [cpu_seconds(pid) for pid in pids]
            start = time.perf_counter()
            if rate is None:
                await kafka.append_many(names.watch, [(b"", codec.encode(e)) for _, e in events], partition=0)
                sent = dict.fromkeys((name for name, _ in events if name), start)
            else:
                for i, (name, ev) in enumerate(events):
                    await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
                    await kafka.append(names.watch, b"", codec.encode(ev), partition=0)
                    if name:
                        sent[name] = time.perf_counter()
            watch_end = (await kafka.end_offsets(names.watch))[0]
            deadline = time.monotonic() + 600
            next_check = 0.0
            while time.monotonic() < deadline and not set(sent) <= set(decided):
                if group_id and ingested is None and time.monotonic() >= next_check:
                    # Asked of the broker five times a second, not at every turn of this loop.
                    next_check = time.monotonic() + 0.2
                    committed = await kafka.committed_offsets(group_id, names.watch)
                    if committed.get(0, -1) >= watch_end:
                        ingested = time.perf_counter() - start
                await asyncio.sleep(0.05)
            cpu = [cpu_seconds(pid) - before for pid, before in zip(pids, cpu_before, strict=True)]
        finally:
            reader.cancel()
    end = max(decided.values()) if decided else time.perf_counter()
    return end - start, [decided[k] - t for k, t in sent.items() if k in decided], cpu, ingested


async def raw_run(broker: str, values: list[bytes]) -> float:
    """Seconds from the first send of ``values`` into a fresh one-partition topic to the last one read."""
    topic = f"raw-{uuid.uuid4().hex[:8]}"
    async with KafkaLog(broker) as kafka:
        await kafka.ensure_topic(topic, 1)
        settings = kafka.settings
    producer = AIOKafkaProducer(**settings.client_options(), enable_idempotence=True, acks="all")
    consumer = AIOKafkaConsumer(topic, **settings.client_options(), auto_offset_reset="earliest")
    await producer.start()
    await consumer.start()
    try:
        await consumer.seek_to_beginning()
        start = time.perf_counter()
        pending = [await producer.send(topic, value=v, key=b"", partition=0) for v in values]
        read = 0
        while read < len(values):
            batches = await consumer.getmany(timeout_ms=100)
            read += sum(len(records) for records in batches.values())
        elapsed = time.perf_counter() - start
        await asyncio.gather(*pending)
    finally:
        await consumer.stop()
        await producer.stop()
        async with KafkaLog(broker) as kafka:
            await kafka.delete_topic(topic)
    return elapsed


def bench_kafka(broker: str, n: int, workers: int, rate: float) -> tuple[float, float]:
    """Events/s of the pipeline with ``workers`` workers, and their CPU seconds per 1,000 events."""
    events = stream(n)
    with tempfile.TemporaryDirectory() as tmp:
        # Workers write no clock ticks: time moves only with the events, as in the embedded runs.
        with WorkerProcesses.isolated(broker, workers, Path(tmp) / "bulk", tag="bulk", clock=False) as group:
            pids = [p.pid for p in group.procs if p is not None]
            elapsed, _, cpu, ingested = asyncio.run(
                kafka_run(broker, group.names, events, None, pids, group.app_id)
            )
            # The worker that read kueue.watch's one partition: its ingest rebuilt its routing.
            ingest = [i for i in range(workers) if INGEST.search(group.log_of(i))]
        # A second pipeline for the latency run, so the backlog above cannot delay it.
        with WorkerProcesses.isolated(
            broker, workers, Path(tmp) / "paced", tag="paced", clock=False
        ) as group:
            _, latencies, _, _ = asyncio.run(kafka_run(broker, group.names, events[: len(events) // 2], rate))
    label = f"kafka ({workers} worker{'s' if workers > 1 else ''})"
    per_k = [c * 1000 / len(events) for c in cpu]
    print(
        f"{label}: {len(events)} events published at once, all decided in {elapsed:.2f}s = "
        f"{len(events) / elapsed:,.0f} events/s; CPU per 1,000 events: "
        + ", ".join(f"worker {i} {c:.2f}s" for i, c in enumerate(per_k))
        + f" (total {sum(per_k):.2f}s); kueue.watch read by worker "
        + (", ".join(map(str, ingest)) or "?")
    )
    if ingested is None:
        print(f"{label}: ingest committed its reading of the last events only after the last decision")
    else:
        # The one partition of kueue.watch is read by one worker: where this is far below the
        # time to the last decision, that partition is not what bounds the throughput.
        print(
            f"{label}: ingest read and committed all {len(events)} events in {ingested:.2f}s = "
            f"{len(events) / ingested:,.0f} events/s "
            f"({ingested / elapsed:.0%} of the time to the last decision)"
        )
    print(
        f"{label}: {len(events) // 2} events at {rate:g}/s, watch event -> decision {percentiles(latencies)}"
    )
    return len(events) / elapsed, sum(per_k)


RAW_MESSAGES = 20_000


def raw_values(n: int, total: int = RAW_MESSAGES) -> list[bytes]:
    """The watch-event messages of ``stream(n)``, repeated up to ``total``: a few thousand take
    too little time to be timed well."""
    events = [codec.encode(e) for _, e in stream(n)]
    return events * -(-total // len(events))


def bench_raw(broker: str, n: int, values: list[bytes]) -> float:
    """Messages/s of raw aiokafka with ``values``, the messages of ``stream(n)`` repeated."""
    elapsed = asyncio.run(raw_run(broker, values))
    print(
        f"raw aiokafka: the same {n} messages, {len(values)} in all, produced and read back "
        f"in {elapsed:.2f}s = {len(values) / elapsed:,.0f} messages/s"
    )
    return len(values) / elapsed


# --- recovery -------------------------------------------------------------------------

REBUILT = re.compile(r"admission partition (\d+) rebuilt from offset (\d+) up to offset (\d+) in ([0-9.]+)s")
INGEST = re.compile(r"ingest routing rebuilt from \S+ offset (\d+) up to offset (\d+) in ([0-9.]+)s")
ROUTING_RESTORED = re.compile(r"ingest routing: restored the snapshot at offset \d+ \((\d+) bytes\)")
SNAPSHOT_WRITTEN = re.compile(r"admission partition (\d+): snapshot at offset \d+ written")
RESTORED = re.compile(r"admission partition (\d+): restored the snapshot at offset (\d+) \((\d+) bytes\)")


async def copy_history(broker: str, group: WorkerProcesses, log: MemoryLog) -> None:
    """The embedded run's watch, admission and decision logs into the group's topics, with the
    group's offsets at their ends."""
    names = group.names
    async with KafkaLog(broker) as kafka:
        await ensure_topics(kafka, names)
        tps = []
        for base, topic in (
            ("kueue.watch", names.watch),
            ("kueue.admission", names.admission),
            ("kueue.decisions", names.decisions),
        ):
            for p in range(log.partitions_sync(base)):
                values = [(r.key, r.value) for r in log.read_sync(base, p)]
                for i in range(0, len(values), 5000):
                    await kafka.append_many(topic, values[i : i + 5000], partition=p)
                tps.append(TopicPartition(topic, p))
        consumer = AIOKafkaConsumer(bootstrap_servers=broker, group_id=group.app_id, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign(tps)
            await consumer.commit(await consumer.end_offsets(tps))
        finally:
            await consumer.stop()


async def decide_probes(broker: str, names: TopicNames, tag: str) -> float:
    """One new Workload per cohort; seconds until each has a committed decision."""
    probes = [cpu_workload(f"probe-{tag}-{c}", f"lq-{c}-0", 1, namespace=NS) for c in range(4)]
    wanted = {p["metadata"]["name"] for p in probes}
    async with KafkaLog(broker) as kafka, TopicReader(broker, names.decisions, 6) as decisions:
        for tp in decisions.consumer.assignment():
            decisions.consumer.seek(tp, (await kafka.end_offsets(names.decisions))[tp.partition])
        start = time.perf_counter()
        values = [codec.encode(event(p, WatchEventType.ADDED, T0 + 10_000_000)) for p in probes]
        await kafka.append_many(names.watch, [(b"", v) for v in values], partition=0)
        seen: set[str] = set()
        deadline = time.monotonic() + 900
        while not wanted <= seen:
            if time.monotonic() > deadline:
                raise RuntimeError(f"probes not decided: {sorted(wanted - seen)}")
            for part in await decisions.poll(timeout_ms=50):
                seen |= {codec.decode(v, DecisionRecord).ref.name for v in part}
        return time.perf_counter() - start


def rebuilds(log_text: str) -> str:
    parts = [
        f"p{p} {int(end) - int(start):,} records in {float(secs):.2f}s"
        for p, start, end, secs in REBUILT.findall(log_text)
        if int(end) > 0
    ]
    return "; ".join(parts) or "none"


def bench_recovery(broker: str, n: int) -> None:
    events = recovery_stream(n)
    log = MemoryLog()
    pipeline = EmbeddedPipeline(log)
    pipeline.submit(listing(T0))
    for ev in events:
        pipeline.submit([ev])
    pipeline.pump()
    records = sum(log.end_offsets_sync("kueue.admission").values())
    with tempfile.TemporaryDirectory() as tmp:
        group = WorkerProcesses.isolated(broker, 1, Path(tmp), tag="recovery", clock=False)
        asyncio.run(copy_history(broker, group, log))
        with group:
            first = asyncio.run(decide_probes(broker, group.names, "a"))
            # The probes' records come after each partition's rebuild: the snapshot is taken then.
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                text = group.log_of(0)
                rebuilt = {p for p, start, end, _ in REBUILT.findall(text) if int(end) > 0}
                written = set(SNAPSHOT_WRITTEN.findall(text))
                if rebuilt <= written and "ingest routing: snapshot at offset" in text:
                    break
                time.sleep(0.5)
            cold = group.log_of(0)
            group.kill(0, signal.SIGKILL)
            started = time.perf_counter()
            group.start(0)
            group.wait_settled()
            settled = time.perf_counter() - started
            again = asyncio.run(decide_probes(broker, group.names, "b"))
            total = time.perf_counter() - started
            warm = group.log_of(0)
    sizes = ", ".join(f"p{p} {int(size) / 1e6:.2f} MB" for p, _, size in RESTORED.findall(warm))
    routing = ROUTING_RESTORED.findall(warm)
    if routing:
        sizes += f", routing {int(routing[-1]) / 1e6:.2f} MB"
    ingest = INGEST.findall(warm)
    print(f"recovery, {n:,} watch events of history ({records:,} admission records):")
    print(
        f"  first start, from offset 0: {rebuilds(cold)}; new Workloads decided {first:.2f}s after publishing"
    )
    print(f"  restart, from the snapshots ({sizes}): {rebuilds(warm)}")
    if ingest:
        start, end, secs = ingest[-1]
        print(
            f"  restart, ingest routing rebuilt from watch offset {start} up to {int(end):,} "
            f"in {float(secs):.2f}s"
        )
    print(
        f"  restart -> group settled {settled:.2f}s; -> new Workloads decided {total:.2f}s "
        f"({again:.2f}s after publishing)"
    )


# --- replay -----------------------------------------------------------------------------


def bench_replay(n: int) -> None:
    events = stream(n, seed=7)
    log = MemoryLog()
    pipeline = EmbeddedPipeline(log)
    start = time.perf_counter()
    pipeline.submit(listing(T0))
    for _, ev in events:
        pipeline.submit([ev])
    pipeline.pump()
    built = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        with FileLog(Path(tmp) / "log", fsync=False) as file_log:
            for topic in ("kueue.watch", "kueue.admission", "kueue.decisions"):
                for p in range(log.partitions_sync(topic)):
                    values = [(r.key, r.value) for r in log.read_sync(topic, p)]
                    file_log.ensure_topic_sync(topic, log.partitions_sync(topic))
                    if values:
                        file_log.append_many_sync(topic, values, partition=p)
        with FileLog(Path(tmp) / "log", read_only=True) as file_log:
            start = time.perf_counter()
            admission = [list(file_log.read_sync("kueue.admission", p)) for p in range(6)]
            decisions = [[r.value for r in file_log.read_sync("kueue.decisions", p)] for p in range(6)]
            verdict = verify(admission, decisions)
            elapsed = time.perf_counter() - start
    records = sum(len(p) for p in admission)
    status = (
        "every decision reproduced byte for byte"
        if not verdict.mismatches
        else f"MISMATCH {verdict.mismatches[0]}"
    )
    print(
        f"replay: {len(events)} watch events = {records} admission records, {verdict.decisions} decisions, "
        f"replayed in {elapsed:.1f}s = {len(events) / elapsed:,.0f} watch events/s ({records / elapsed:,.0f} "
        f"admission records/s); {status} (log built in {built:.1f}s)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--replay-events", type=int, default=100_000)
    parser.add_argument("--broker", help="HOST:PORT of a Kafka broker (the Kafka run is skipped without it)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1], help="worker counts to run (Kafka)")
    parser.add_argument("--rate", type=float, default=50.0, help="events/s of the Kafka latency run")
    parser.add_argument(
        "--recovery-events", type=int, nargs="*", default=[10_000, 100_000], help="history lengths (Kafka)"
    )
    parser.add_argument(
        "--skip", nargs="*", default=[], choices=["embedded", "kafka", "raw", "faust", "recovery", "replay"]
    )
    args = parser.parse_args()
    agents_alone = bench_embedded(args.events) if "embedded" not in args.skip else None
    if args.broker and "kafka" not in args.skip:
        runs = {count: bench_kafka(args.broker, args.events, count, args.rate) for count in args.workers}
        first = args.workers[0]
        for count, (per_s, cpu) in runs.items():
            if count != first:
                print(
                    f"kafka {count} workers against {first}: {per_s / runs[first][0]:.2f}x the events/s, "
                    f"{cpu / runs[first][1]:.2f}x the CPU per event (all workers together)"
                )
        if "raw" not in args.skip:
            values = raw_values(args.events)
            raw = bench_raw(args.broker, args.events, values)
            for count, (per_s, _) in runs.items():
                print(f"kafka {count} worker(s): {per_s / raw:.2%} of raw aiokafka's throughput")
            if agents_alone is not None:
                print(
                    f"embedded at once (the agents with no broker): {agents_alone / raw:.2%} of raw "
                    "aiokafka's throughput"
                )
            if "faust" not in args.skip:
                print_ceilings(args.broker, values, raw)
    if args.broker and "recovery" not in args.skip:
        for n in args.recovery_events:
            bench_recovery(args.broker, n)
    if "replay" not in args.skip and args.replay_events:
        bench_replay(args.replay_events)
    return 0


if __name__ == "__main__":
    sys.exit(main())
