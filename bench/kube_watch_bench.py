"""Watcher benchmark against a real kube-apiserver: list time and events per second.

Run: .venv/bin/python bench/kube_watch_bench.py --kubeconfig PATH [--jobs 5000] [--concurrency 32]

In a namespace of its own it creates N suspended batch/v1 Jobs labelled for a
LocalQueue and prints:

- create: how fast the API server took them (the client's side, for scale);
- list: a fresh watcher's first listing of the whole cluster into a file log
  (all kinds; the Jobs dominate), objects per second;
- watch: a watcher resumed from a log that predates the Jobs, so their N
  ADDED events come from the API server's watch cache as fast as it sends
  them; events per second from the watcher's start to the last one written;
- N live updates (a label on every Job) while the watcher runs: the time from
  each update's answer to the watcher receiving its event, p50 and p99.

The log is the embedded file log with fsync, as ``kueuestream run`` uses it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kueuestream.agents.kube.api_calls import request_json
from kueuestream.agents.kube.client import KubeConnection, connect, with_retry
from kueuestream.agents.kube.crd_install import install_crds
from kueuestream.agents.kube.log_sink import LogSink
from kueuestream.agents.kube.resources import kinds_to_watch
from kueuestream.agents.kube.watch_ledger import ledger_from_log
from kueuestream.agents.kube.watcher import Watcher
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.schemas import WatchEvent
from tests.helpers import queued_job

TOPIC = TopicNames().watch


async def in_parallel(calls: list[Any], concurrency: int) -> None:
    queue: asyncio.Queue[Any] = asyncio.Queue()
    for call in calls:
        queue.put_nowait(call)

    async def worker() -> None:
        while not queue.empty():
            await with_retry(queue.get_nowait())

    await asyncio.gather(*(worker() for _ in range(concurrency)))


class Run:
    def __init__(self, conn: KubeConnection, directory: Path) -> None:
        self.conn = conn
        self.directory = directory

    async def start(self) -> tuple[Watcher, asyncio.Task[None], FileLog, float]:
        log = FileLog(self.directory)
        ledger = await ledger_from_log(log, TOPIC, "bench")
        watcher = Watcher(self.conn, LogSink(log, TOPIC), ledger, kinds_to_watch())
        started = time.perf_counter()
        task = asyncio.create_task(watcher.run())
        await watcher.synced.wait()
        return watcher, task, log, started

    @staticmethod
    async def stop(watcher: Watcher, task: asyncio.Task[None], log: FileLog) -> None:
        await watcher.flush()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await log.close()


async def wait_events(watcher: Watcher, count: int, timeout_s: float = 600) -> float:
    deadline = time.perf_counter() + timeout_s
    while watcher.stats.events < count:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{watcher.stats.events} of {count} events after {timeout_s}s")
        await asyncio.sleep(0.01)
    await watcher.flush()
    return time.perf_counter()


async def main(kubeconfig: str, jobs: int, concurrency: int) -> None:
    async with await connect(kubeconfig) as conn:
        await install_crds(conn)
        ns = f"bench-{uuid.uuid4().hex[:8]}"
        await with_retry(
            lambda: request_json(
                conn.api,
                "POST",
                "/api/v1/namespaces",
                body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            )
        )
        with tempfile.TemporaryDirectory() as tmp:
            before = Path(tmp) / "before"
            # A log that knows the cluster as it is before the Jobs.
            watcher, task, log, _ = await Run(conn, before).start()
            await Run.stop(watcher, task, log)

            names = [f"job-{i:05d}" for i in range(jobs)]
            path = f"/apis/batch/v1/namespaces/{ns}/jobs"

            t0 = time.perf_counter()
            await in_parallel(
                [
                    lambda n=n: request_json(conn.api, "POST", path, body=queued_job(ns, n, "main", "100m"))
                    for n in names
                ],
                concurrency,
            )
            created = time.perf_counter() - t0
            print(
                f"create: {jobs} Jobs in {created:.1f}s, {jobs / created:.0f}/s (concurrency {concurrency})"
            )

            fresh = Path(tmp) / "fresh"
            watcher, task, log, started = await Run(conn, fresh).start()
            listed = time.perf_counter() - started
            s = watcher.stats
            print(
                f"list: {s.listed_objects} objects of {s.lists} kinds in {listed:.2f}s "
                f"({s.list_seconds:.2f}s in list calls), {s.listed_objects / listed:.0f} objects/s written"
            )
            await Run.stop(watcher, task, log)

            watcher, task, log, started = await Run(conn, before).start()
            done = await wait_events(watcher, jobs)
            took = done - started
            print(
                f"watch (replay from the cache): {watcher.stats.events} events in {took:.2f}s, "
                f"{watcher.stats.events / took:.0f} events/s, {watcher.stats.writes} writes, "
                f"lists {watcher.stats.lists}"
            )

            t0 = time.perf_counter()
            base = watcher.stats.events
            patch = {"metadata": {"labels": {"bench": "touched"}}}
            answered: dict[str, int] = {}

            async def touch(name: str) -> None:
                await request_json(
                    conn.api,
                    "PATCH",
                    f"{path}/{name}",
                    body=patch,
                    content_type="application/merge-patch+json",
                )
                answered[name] = time.time_ns() // 1_000_000

            await in_parallel([lambda n=n: touch(n) for n in names], concurrency)
            patched = time.perf_counter() - t0
            done = await wait_events(watcher, base + jobs)
            took = done - t0
            await Run.stop(watcher, task, log)
            with FileLog(before, read_only=True) as reader:
                seen = [codec.decode(r.value, WatchEvent) for r in reader.read_sync(TOPIC, 0)]
            lags = sorted(
                e.timestamp - answered[e.name]
                for e in seen
                if e.kind == "Job" and e.namespace == ns and e.type.value == "MODIFIED"
            )
            print(
                f"watch (live): {jobs} updates sent in {patched:.1f}s ({jobs / patched:.0f}/s); "
                f"all {jobs} events written {took:.2f}s after the first was sent; "
                f"from the update's answer to the watcher "
                f"receiving it: p50 {lags[len(lags) // 2]} ms, p99 {lags[len(lags) * 99 // 100]} ms"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=32)
    a = parser.parse_args()
    asyncio.run(main(a.kubeconfig, a.jobs, a.concurrency))
