"""``explain`` benchmark: answer time on a long history, and what a waiting Workload costs the log.

    .venv/bin/python bench/explain_bench.py [--events 100000] [--cycles 100 1000 10000]

- history: pipeline_bench's workload mix (four cohorts of four ClusterQueues,
  Workloads of 1-4 cpu arriving and finishing, a third preempting on
  priority), --events watch events through the embedded runtime into a file
  log; then ``kueuestream explain`` (a process of its own, start to exit) of
  the Workload with the most decisions, of one admitted at once, and of a
  name the log does not have (which looks for the closest names). Also the
  share of the decisions topic the traces take.
- waiting: one Workload, the head of a StrictFIFO ClusterQueue, waits for the
  same reason (1 cpu short) while Workloads of another ClusterQueue of its
  Cohort (neither lends) arrive and finish, each arrival and finish a
  scheduling cycle that tries it again;
  the bytes of kueue.decisions about it after N cycles, for each --cycles N.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from pipeline_bench import listing, stream  # noqa: E402

from kueuestream.agents.embedded.memory_log import MemoryLog  # noqa: E402
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline  # noqa: E402
from kueuestream.agents.sources.watch_events import as_batch, identify, listing_order, watch_event  # noqa: E402
from kueuestream.streams import codec  # noqa: E402
from kueuestream.streams.file_log import FileLog  # noqa: E402
from kueuestream.streams.schemas import DecisionRecord, WatchEvent, WatchEventType  # noqa: E402
from tests.helpers import (  # noqa: E402
    T0,
    cpu_workload,
    finished_workload,
    flavor_manifest,
    local_queue_manifest,
)
from tests.helpers import (  # noqa: E402
    cluster_queue_manifest as cq_manifest,
)

TOPICS = ("kueue.watch", "kueue.admission", "kueue.decisions")
NS = "bench"


def to_files(log: MemoryLog, folder: Path) -> None:
    with FileLog(folder, fsync=False) as file_log:
        for topic in TOPICS:
            count = log.partitions_sync(topic)
            file_log.ensure_topic_sync(topic, count)
            for p in range(count):
                values = [(r.key, r.value) for r in log.read_sync(topic, p)]
                if values:
                    file_log.append_many_sync(topic, values, partition=p)


def timed(folder: Path, key: str) -> tuple[float, str]:
    """``kueuestream explain KEY FOLDER -o json`` as a user runs it: its own process, start to exit."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "kueuestream", "explain", key, str(folder), "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if done.returncode == 0:
        return elapsed, f"{len(json.loads(done.stdout)['timeline'])} timeline entries"
    return elapsed, f"exit {done.returncode}: {done.stderr.strip()}"


def bench_history(n: int) -> None:
    log = MemoryLog()
    pipeline = EmbeddedPipeline(log)
    start = time.perf_counter()
    pipeline.submit(listing(T0))
    for _, ev in stream(n, seed=7):
        pipeline.submit([ev])
    pipeline.pump()
    built = time.perf_counter() - start
    per_key: dict[str, int] = {}
    admitted_at_once = ""
    trace_bytes = total_bytes = 0
    for p in range(log.partitions_sync("kueue.decisions")):
        for record in log.read_sync("kueue.decisions", p):
            total_bytes += len(record.value)
            key = (record.key or b"").decode()
            per_key[key] = per_key.get(key, 0) + 1
            if b'"trace":{' in record.value:
                decision = codec.decode(record.value, DecisionRecord)
                trace_bytes += len(codec.encode_json(decision.trace))
                if not admitted_at_once and decision.action.value == "Admitted" and per_key[key] == 1:
                    admitted_at_once = key
    busiest = max(sorted(per_key), key=lambda k: per_key[k])
    records = sum(
        len(list(log.read_sync("kueue.admission", p))) for p in range(log.partitions_sync("kueue.admission"))
    )
    print(
        f"history: {n} watch events = {records} admission records, {sum(per_key.values())} decisions "
        f"(built in {built:.1f}s); traces are {trace_bytes / max(total_bytes, 1):.1%} of kueue.decisions "
        f"({trace_bytes:,} of {total_bytes:,} bytes)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "log"
        to_files(log, folder)
        for what, key in (
            (f"busiest ({per_key[busiest]} decisions)", busiest),
            ("admitted at once", admitted_at_once),
            ("unknown name", f"{NS}/wl-no-such"),
        ):
            elapsed, said = timed(folder, key)
            print(f"explain {key} [{what}]: {elapsed:.2f}s ({said})")


def cohort() -> list[dict[str, Any]]:
    quota = [(["cpu"], [("default", {"cpu": 4})])]
    out: list[dict[str, Any]] = [flavor_manifest("default")]
    for name in ("q", "other"):
        cq = cq_manifest(name, quota, cohort="team")
        # Neither lends: the waiting Workload's numbers stay the same whatever the other runs.
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = "0"
        # StrictFIFO keeps the head that does not fit in the heap: every cycle tries it again.
        cq["spec"]["queueingStrategy"] = "StrictFIFO"
        out.append(cq)
        out.append(local_queue_manifest(name, name, NS))
    return out


def event(manifest: dict[str, Any], type_: WatchEventType, ts: int) -> WatchEvent:
    item = identify(manifest)
    assert not isinstance(item, str)
    return watch_event(item, type_, ts)


def bench_waiting(cycles: list[int]) -> None:
    for target in cycles:
        log = MemoryLog()
        pipeline = EmbeddedPipeline(log)
        items = [i for i in (identify(m) for m in cohort()) if not isinstance(i, str)]
        pipeline.submit(
            as_batch([watch_event(i, WatchEventType.ADDED, T0) for i in listing_order(items)], T0)
        )
        ts = T0 + 1
        for wl in (
            cpu_workload("hog", "q", 2, namespace=NS),
            cpu_workload("waits", "q", 3, created_s=1, namespace=NS),
        ):
            pipeline.submit([event(wl, WatchEventType.ADDED, ts)])
            ts += 1
        pipeline.pump()
        states = pipeline.admission.states
        shard = next(
            s.engine
            for p in sorted(states)
            for _, s in sorted(states[p].shards.items())
            if "q" in s.engine.cqs
        )
        start_cycles = shard.cycles
        i = 0
        while shard.cycles - start_cycles < target:
            other = cpu_workload(f"o-{i}", "other", 4, namespace=NS)
            pipeline.submit([event(other, WatchEventType.ADDED, ts)])
            pipeline.submit([event(finished_workload(other), WatchEventType.MODIFIED, ts + 1)])
            pipeline.pump()
            ts += 2
            i += 1
        about = [
            r.value
            for p in range(log.partitions_sync("kueue.decisions"))
            for r in log.read_sync("kueue.decisions", p)
            if r.key == f"{NS}/waits".encode()
        ]
        waited = shard.cycles - start_cycles
        size = sum(map(len, about))
        print(
            f"waiting {waited} cycles for the same reason: {len(about)} decisions, {size:,} bytes "
            f"of kueue.decisions about it = {size / waited:.1f} bytes per cycle"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--cycles", type=int, nargs="*", default=[100, 1000, 10000])
    parser.add_argument("--skip", nargs="*", default=[], choices=["history", "waiting"])
    args = parser.parse_args()
    if "waiting" not in args.skip:
        bench_waiting(args.cycles)
    if "history" not in args.skip:
        bench_history(args.events)
    return 0


if __name__ == "__main__":
    sys.exit(main())
