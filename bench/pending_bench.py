"""``kueuestream pending`` benchmark: one ClusterQueue with many pending Workloads.

    .venv/bin/python bench/pending_bench.py [--pending 50000] [--log DIR] [--replay]

Builds an embedded log (in a temporary folder, or in --log DIR, reused when it
is already there) in which one ClusterQueue of 1 cpu runs one Workload while
--pending Workloads of 1 cpu wait, spread over 5 namespaces with 2 LocalQueues
each and 10 priorities, created one a second. Then it times
``pending_json`` for the ClusterQueue (its first 1000 and its last 1000) and
for one LocalQueue, each from a fresh read of the log, and prints the figures
(wall-clock and CPU seconds, and the machine's load). The goal is at most
1 s for the ClusterQueue. With --replay it also times the same answer from
engines rebuilt by a full replay of the log, which the fold replaces.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kueuestream.agents.audit.pending import (  # noqa: E402
    engines_at_end,
    pending_json,
    pending_summary,
    read_log,
)
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline  # noqa: E402
from kueuestream.agents.sources.watch_events import listing_events  # noqa: E402
from kueuestream.agents.topic_names import TopicNames  # noqa: E402
from kueuestream.streams.file_log import FileLog  # noqa: E402
from tests.helpers import (  # noqa: E402
    T0,
    cpu_queue,
    cpu_workload,
    flavor_manifest,
    local_queue_manifest,
)

CQ = "bench-cq"
NAMESPACES = [f"team-{i}" for i in range(5)]


def manifests(pending: int, seed: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out: list[dict[str, Any]] = [flavor_manifest("default"), cpu_queue(CQ, 1)]
    for ns in NAMESPACES:
        out += [local_queue_manifest(f"lq-{i}", CQ, ns) for i in range(2)]
    out.append(cpu_workload("running", "lq-0", 1, namespace=NAMESPACES[0], priority=100))
    for i in range(pending):
        ns = rng.choice(NAMESPACES)
        out.append(
            cpu_workload(
                f"wl-{i:06d}",
                f"lq-{rng.randrange(2)}",
                1,
                priority=rng.randrange(10),
                created_s=i + 1,
                namespace=ns,
            )
        )
    return out


def build(log_dir: Path, pending: int) -> float:
    """Write the scenario into a fresh log at ``log_dir``; seconds it took."""
    start = time.perf_counter()
    with FileLog(log_dir, fsync=False) as log:
        pipeline = EmbeddedPipeline(log)
        # The running Workload first, so that it is the one admitted.
        docs = manifests(pending)
        events, refused = listing_events(docs[:-pending], T0)
        assert not refused, refused
        pipeline.submit(events)
        pipeline.pump()
        events, refused = listing_events(docs[-pending:], T0 + 1000)
        assert not refused, refused
        pipeline.submit(events)
        pipeline.pump()
        log.persist_sync()
    return time.perf_counter() - start


def timed(label: str, **kwargs: Any) -> dict[str, Any]:
    start, cpu = time.perf_counter(), time.process_time()
    out = pending_json(**kwargs)
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"{label}: {took:.2f} s ({cpu:.2f} s CPU), {len(out['items'])} items")
    return out


def timed_replay(log: str) -> dict[str, Any]:
    start, cpu = time.perf_counter(), time.process_time()
    admission, _ = asyncio.run(read_log(log, TopicNames(), None))
    out = pending_summary(engines_at_end(admission), cluster_queue=CQ)
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"full replay, then pending --cluster-queue: {took:.2f} s ({cpu:.2f} s CPU)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pending", type=int, default=50_000)
    parser.add_argument("--log", type=Path, help="where to keep the log (default: a temporary folder)")
    parser.add_argument("--replay", action="store_true", help="also time a full replay")
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = args.log or Path(tmp) / "log"
        if not log_dir.exists():
            took = build(log_dir, args.pending)
            print(f"log of {args.pending} pending Workloads written in {took:.1f} s")
        size = sum(f.stat().st_size for f in log_dir.rglob("*") if f.is_file())
        print(f"log size: {size / 1e6:.1f} MB")
        log = str(log_dir)
        first = timed("pending --cluster-queue (first 1000)", log=log, cluster_queue=CQ)
        assert first["items"][0]["positionInClusterQueue"] == 0
        timed(
            "pending --cluster-queue (last 1000)",
            log=log,
            cluster_queue=CQ,
            offset=max(0, args.pending - 1000),
        )
        timed("pending --local-queue (first 1000)", log=log, local_queue=(NAMESPACES[0], "lq-0"))
        if args.replay:
            assert timed_replay(log) == first


if __name__ == "__main__":
    main()
