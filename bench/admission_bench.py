"""Admission core benchmark: 1,000 ClusterQueues in 10 cohorts, 50,000 pending workloads.

Run: .venv/bin/python bench/admission_bench.py [--queues 1000] [--cohorts 10] [--workloads 50000]

Prints admissions per second, time to quiescence and peak RSS. Every workload
is applied as one batch (like an initial listing), then the engine schedules
until nothing more changes.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action, Event, EventType
from tests.helpers import (
    PREEMPTING,
    cluster_queue_manifest,
    flavor_manifest,
    local_queue_manifest,
    workload_manifest,
)


def manifests(queues: int, cohorts: int, workloads: int, nominal: int = 20) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [flavor_manifest("default")]
    for q in range(queues):
        name = f"cq-{q:04d}"
        groups = [(["cpu"], [("default", {"cpu": nominal})])]
        cohort = f"cohort-{q % cohorts:02d}"
        out.append(cluster_queue_manifest(name, groups, cohort=cohort, preemption=PREEMPTING, borrowing=100))
        out.append(local_queue_manifest("lq", name, f"ns-{q:04d}"))
    sizes = [(1, 50), (5, 100), (20, 200)]
    for w in range(workloads):
        q = w % queues
        cpu, priority = sizes[w % 3]
        created = f"2024-01-01T{(w // 3600) % 24:02d}:{(w // 60) % 60:02d}:{w % 60:02d}Z"
        out.append(
            workload_manifest(
                f"wl-{w:06d}",
                "lq",
                {"cpu": str(cpu)},
                namespace=f"ns-{q:04d}",
                priority=priority,
                created=created,
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--cohorts", type=int, default=10)
    parser.add_argument("--workloads", type=int, default=50_000)
    parser.add_argument(
        "--nominal",
        type=int,
        action="append",
        help="cpu nominal quota per ClusterQueue; repeat to run several (default: 20 as in Kueue's "
        "scheduler benchmark, where most workloads wait, and 500, where every workload fits)",
    )
    args = parser.parse_args()
    for nominal in args.nominal or [20, 500]:
        print(f"--- nominalQuota {nominal} cpu, borrowingLimit 100 cpu per ClusterQueue")
        measure(args.queues, args.cohorts, args.workloads, nominal)


def measure(queues: int, cohorts: int, workloads: int, nominal: int) -> None:
    docs = manifests(queues, cohorts, workloads, nominal)
    engine = Engine()
    start = time.perf_counter()
    decisions = []
    for i, doc in enumerate(docs):
        decisions += engine.apply(Event(EventType.UPSERT, 1_000, manifest=doc, batch=i < len(docs) - 1))
    loaded = time.perf_counter()
    admitted = sum(1 for d in decisions if d.action == Action.ADMITTED)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"objects:               {len(docs):,} ({queues:,} ClusterQueues in {cohorts} cohorts, "
        f"{workloads:,} workloads)"
    )
    print(f"time to quiescence:    {loaded - start:.2f} s (load, validate and schedule)")
    print(f"scheduling cycles:     {engine.cycles:,}")
    print(f"decisions:             {len(decisions):,} ({admitted:,} admitted)")
    print(f"admissions per second: {admitted / (loaded - start):,.0f}")
    print(f"decisions per second:  {len(decisions) / (loaded - start):,.0f}")
    print(f"peak RSS:              {rss_mib:,.0f} MiB")


if __name__ == "__main__":
    main()
