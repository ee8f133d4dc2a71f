"""Two of Kueue's known pain points, run through the real pipeline in virtual time.

Run: .venv/bin/python bench/pain_points.py [--gpu-workloads 10000] [--cpu-workloads 1000] [--fitting 536]

(a) One BestEffortFIFO ClusterQueue whose GPU quota is saturated, with 10,000
    pending GPU workloads queued ahead of 1,000 CPU-only workloads: how long,
    in virtual and wall time, until every CPU workload is admitted.
(b) One ClusterQueue with 536 pending workloads that all fit its quota: how
    long, and how many scheduling cycles, until all are admitted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kueuestream.agents.simulator.generator import PlannedWorkload, QueueInfo, Scenario
from kueuestream.agents.simulator.pipeline import EmbeddedSimPipeline
from kueuestream.agents.simulator.scenario_run import SimResult, run_scenario
from kueuestream.agents.simulator.summary import Recorder
from tests.helpers import cluster_queue_manifest, flavor_manifest, local_queue_manifest, workload_manifest

HOUR_MS = 3_600_000


def _queue(name: str, quotas: dict[str, str]) -> list[dict[str, Any]]:
    """Flavor ``default``; a BestEffortFIFO ClusterQueue ``name`` with ``quotas`` in it; namespace
    ``name`` and its LocalQueue ``name``."""
    groups = [(list(quotas), [("default", quotas)])]
    return [
        flavor_manifest("default"),
        cluster_queue_manifest(name, groups, spec={"queueingStrategy": "BestEffortFIFO"}),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        local_queue_manifest(name, name, name),
    ]


def _workload(
    queue: str, name: str, cls: str, created_ms: int, runtime_ms: int, requests: dict[str, str]
) -> PlannedWorkload:
    manifest = workload_manifest(name, queue, requests, namespace=queue, priority=None, created=None)
    return PlannedWorkload(queue, name, cls, queue, created_ms, runtime_ms, manifest)


def _run(scenario: Scenario, stop_when: Callable[[Recorder], bool]) -> tuple[SimResult, float, int]:
    """The scenario run through the embedded pipeline until ``stop_when``: its result, the wall
    time in seconds, and the scheduling cycles of every shard."""
    with tempfile.TemporaryDirectory() as tmp:
        pipeline = EmbeddedSimPipeline(Path(tmp) / "log")
        started = time.perf_counter()
        result = run_scenario(scenario, pipeline, stop_when=stop_when)
        wall = time.perf_counter() - started
        states = pipeline.pipeline.admission.states
        cycles = sum(s.engine.cycles for p in sorted(states) for s in states[p].shards.values())
    return result, wall, cycles


def gpu_wall(gpu_workloads: int, cpu_workloads: int) -> None:
    q = "gpu-team"
    objects = _queue(q, {"cpu": "100000", "nvidia.com/gpu": "8"})
    gpu = {"cpu": "1", "nvidia.com/gpu": "1"}
    workloads = [_workload(q, f"running-{i}", "running", 0, HOUR_MS, gpu) for i in range(8)]
    # The GPU jobs queue first (1 ms), the CPU-only jobs behind them (2 ms).
    workloads += [_workload(q, f"gpu-{i:05d}", "gpu", 1, HOUR_MS, gpu) for i in range(gpu_workloads)]
    workloads += [_workload(q, f"cpu-{i:04d}", "cpu", 2, HOUR_MS, {"cpu": "1"}) for i in range(cpu_workloads)]
    scenario = Scenario(objects, [QueueInfo(q, "cq", "", 100_000_000)], workloads)

    admitted_at: list[int] = []

    def all_cpu_admitted(rec: Recorder) -> bool:
        cpu = [w for (ns, name), w in rec.workloads.items() if name.startswith("cpu-")]
        if len(cpu) == cpu_workloads and all(w.admitted for w in cpu):
            admitted_at.append(max(w.created_ms + w.time_to_admit_ms for w in cpu))
            return True
        return False

    result, wall, cycles = _run(scenario, all_cpu_admitted)
    print(
        f"(a) GPU quota saturated (8 of 8), {gpu_workloads:,} GPU workloads queued ahead of "
        f"{cpu_workloads:,} CPU workloads, BestEffortFIFO"
    )
    if admitted_at:
        print(f"    every CPU workload admitted at virtual {admitted_at[0] - 2} ms after it was created")
    else:
        print("    the CPU workloads were NOT all admitted")
    print(f"    wall time {wall:.2f} s, scheduling cycles {cycles:,}, decisions {result.decisions:,}")


def fitting_queue(count: int) -> None:
    q = "roomy"
    objects = _queue(q, {"cpu": str(count)})
    workloads = [_workload(q, f"wl-{i:04d}", "fits", 1, HOUR_MS, {"cpu": "1"}) for i in range(count)]
    scenario = Scenario(objects, [QueueInfo(q, "cq", "", count * 1000)], workloads)

    def all_admitted(rec: Recorder) -> bool:
        return len(rec.workloads) == count and all(w.admitted for w in rec.workloads.values())

    result, wall, cycles = _run(scenario, all_admitted)
    latest = max(w.time_to_admit_ms for w in result.recorder.workloads.values())
    print(f"(b) one ClusterQueue, {count} pending workloads that all fit")
    print(
        f"    all admitted {latest} ms (virtual) after creation; wall time {wall:.2f} s; "
        f"scheduling cycles {cycles:,}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gpu-workloads", type=int, default=10_000)
    parser.add_argument("--cpu-workloads", type=int, default=1_000)
    parser.add_argument("--fitting", type=int, default=536)
    args = parser.parse_args()
    gpu_wall(args.gpu_workloads, args.cpu_workloads)
    fitting_queue(args.fitting)


if __name__ == "__main__":
    main()
