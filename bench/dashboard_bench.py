"""Dashboard benchmark: the cost of one state update, and of following a growing log.

Run: .venv/bin/python bench/dashboard_bench.py [--queues 1000] [--cohorts 10] [--workloads 50000]
     [--log-workloads 5000]

1. An engine holding ``--workloads`` Workloads in ``--queues`` ClusterQueues
   (admission_bench's shape; most wait), and one ClusterQueue holding all of
   them: the time of one :meth:`DashboardFeed.publish` (the state taken from
   the engines and encoded) and the size of the JSON each page receives.
2. A log written by the embedded runtime (``--log-workloads`` Workloads
   arriving one by one): the time ``kueuestream dashboard`` takes to read it
   the first time, and from one more Workload appended to its state on the
   page (polls back to back: the folder opened again read-only, the new
   records fed, the state taken once the pause after the last one is over).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from admission_bench import manifests

from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Event, EventType
from kueuestream.agents.dashboard.feed import DashboardFeed
from kueuestream.agents.dashboard.follower import LogFollower
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.streams.file_log import FileLog
from tests.helpers import cpu_workload
from tests.pipeline.embedded_run import run_steps
from tests.pipeline.watch_streams import workload_stream


def loaded(queues: int, cohorts: int, workloads: int) -> Engine:
    docs = manifests(queues, cohorts, workloads)
    engine = Engine()
    for i, doc in enumerate(docs):
        engine.apply(Event(EventType.UPSERT, 1_000, manifest=doc, batch=i < len(docs) - 1))
    return engine


def publish_cost(label: str, engine: Engine) -> None:
    feed = DashboardFeed("bench")
    start = time.perf_counter()
    feed.publish([engine], [])
    took = time.perf_counter() - start
    pending = sum(len(q) for q in engine.queues.queues.values())
    size = len(feed.current()[1])
    print(f"{label}: {len(engine.cqs):,} ClusterQueues, {pending:,} queued")
    print(f"  one state update:   {took * 1000:,.0f} ms")
    print(f"  state sent to page: {size / 1024:,.0f} KiB")


def follow_cost(workloads: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder) / "log"
        stream = workload_stream(workloads, seed=7)
        with FileLog(directory, fsync=False) as log:
            pipeline = run_steps(EmbeddedPipeline(log), stream.steps)
            records = sum(log.end_offsets_sync("kueue.admission").values())
            size = sum(p.stat().st_size for p in directory.rglob("*.log"))
            feed = DashboardFeed("bench")
            follower = LogFollower(str(directory), feed)
            start = time.perf_counter()
            asyncio.run(follower.poll())
            first = time.perf_counter() - start
            stream.event(cpu_workload("one-more", "lq-solo", 1, created_s=workloads + 1))
            run_steps(pipeline, stream.steps[-1:])
            version = feed.current()[0]
            start = time.perf_counter()
            polls = 0
            # A poll inside the pause after a slow state update only counts the decisions.
            while feed.current()[0] == version:
                asyncio.run(follower.poll())
                polls += 1
            again = time.perf_counter() - start
        print(
            f"log: {len(stream.steps):,} watch steps, {records:,} kueue.admission records, "
            f"{size / 1024 / 1024:,.1f} MiB of segments"
        )
        print(f"  first read (dashboard start): {first:,.2f} s")
        print(f"  one Workload appended, on the page after {polls} poll(s): {again * 1000:,.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--cohorts", type=int, default=10)
    parser.add_argument("--workloads", type=int, default=50_000)
    parser.add_argument("--log-workloads", type=int, default=5_000)
    args = parser.parse_args()
    publish_cost("admission_bench's shape", loaded(args.queues, args.cohorts, args.workloads))
    publish_cost("one ClusterQueue", loaded(1, 1, args.workloads))
    follow_cost(args.log_workloads)


if __name__ == "__main__":
    main()
