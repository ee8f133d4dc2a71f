"""Kueue's scheduler side by side: the two backlog shapes of issue 11, engine and ``admit``.

    .venv/bin/python bench/kueue_shapes_bench.py [--shape small|large|both] [--repeat 3]
                                                 [--skip-engine] [--skip-admit]

The shape, as Kueue's ``schedule()`` loop was measured on it: one
ResourceFlavor; N ClusterQueues spread over 10 cohorts, each with cpu
nominalQuota 20 and borrowingLimit 100, a Namespace and a LocalQueue; 1-cpu
Workloads of priority 0 spread evenly over the queues, created one second
apart.

- small: 30 ClusterQueues, 15,000 Workloads (600 admitted, 14,400 pending);
- large: 1,000 ClusterQueues, 50,000 Workloads (20,000 admitted).

Three measurements per shape, each repeated ``--repeat`` times (best and
spread printed, since the machine may be shared):

- engine, scheduling only: the cluster's objects applied to one
  :class:`Engine` and settled, then every Workload applied as one batch
  (decoded, stored and queued as it arrives, nothing scheduled), then the
  clock is timed from the event that ends the batch to quiescence: every
  scheduling cycle and every status. Kueue's own scheduler benchmark
  (``BenchmarkSchedulerTAS``) times ``schedule()`` the same way: the
  Workloads go into its queue manager (``AddOrUpdateWorkload``) with the
  timer stopped;
- engine, quota tree included: every object applied as one batch (decoded
  and stored, each Workload's requests counted as it arrives, nothing
  queued), then the clock is timed from the event that ends the batch to
  quiescence: building the quota tree, queueing every Workload, and every
  scheduling cycle;
- ``kueuestream admit FILE -o yaml`` as a user runs it, a new process timed
  from start to exit, with the objects in one multi-document YAML file
  (loading, validation, the pipeline and the YAML output all included). The
  package's bytecode is compiled first, as an installed package has it, so a
  run does not compile every module again where ``PYTHONDONTWRITEBYTECODE``
  is set.

Each reports admissions per second (admitted Workloads / seconds) and the
engine's scheduling cycles.
"""

from __future__ import annotations

import argparse
import compileall
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kueuestream.admission.engine import Engine  # noqa: E402
from kueuestream.admission.events import Action, Event, EventType  # noqa: E402
from kueuestream.admission.timefmt import rfc3339  # noqa: E402

T0 = 1_700_000_000_000
T = TypeVar("T")
COHORTS = 10
NOMINAL = 20
BORROWING = 100


@dataclass(frozen=True)
class Shape:
    name: str
    queues: int
    workloads: int

    @property
    def expected_admitted(self) -> int:
        return min(self.workloads, self.queues * NOMINAL)


SHAPES = {
    "small": Shape("small", 30, 15_000),
    "large": Shape("large", 1_000, 50_000),
}


def manifests(shape: Shape) -> list[dict[str, Any]]:
    """The flavor, each queue's Namespace, ClusterQueue and LocalQueue, then the Workloads."""
    api = "kueue.x-k8s.io/v1beta2"
    out: list[dict[str, Any]] = [
        {"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": "default"}, "spec": {}}
    ]
    for q in range(shape.queues):
        ns = f"ns-{q:04d}"
        out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        out.append(
            {
                "apiVersion": api,
                "kind": "ClusterQueue",
                "metadata": {"name": f"cq-{q:04d}"},
                "spec": {
                    "cohortName": f"cohort-{q % COHORTS:02d}",
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {
                                    "name": "default",
                                    "resources": [
                                        {
                                            "name": "cpu",
                                            "nominalQuota": str(NOMINAL),
                                            "borrowingLimit": str(BORROWING),
                                        }
                                    ],
                                }
                            ],
                        }
                    ],
                },
            }
        )
        out.append(
            {
                "apiVersion": api,
                "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": ns},
                "spec": {"clusterQueue": f"cq-{q:04d}"},
            }
        )
    for w in range(shape.workloads):
        out.append(
            {
                "apiVersion": api,
                "kind": "Workload",
                "metadata": {
                    "name": f"wl-{w:06d}",
                    "namespace": f"ns-{w % shape.queues:04d}",
                    "creationTimestamp": rfc3339(T0 + w * 1000),
                },
                "spec": {
                    "queueName": "lq",
                    "priority": 0,
                    "podSets": [
                        {
                            "name": "main",
                            "count": 1,
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [
                                        {
                                            "name": "c",
                                            "image": "registry.k8s.io/pause:3.9",
                                            "resources": {"requests": {"cpu": "1"}},
                                        }
                                    ],
                                }
                            },
                        }
                    ],
                },
            }
        )
    return out


@dataclass(frozen=True)
class Run:
    seconds: float
    admitted: int
    cycles: int | None = None
    # CPU time of the measured part, steadier than wall time on a shared machine.
    cpu_seconds: float | None = None


def engine_run(docs: list[dict[str, Any]]) -> Run:
    """Load every object as one batch, then time the quota tree, queueing and scheduling to quiescence."""
    engine = Engine()
    now = T0 + len(docs) * 1000
    for doc in docs:
        engine.apply(Event(EventType.UPSERT, now, manifest=doc, batch=True))
    return _settled(engine, now)


def scheduling_run(docs: list[dict[str, Any]]) -> Run:
    """Settle the cluster's objects, queue the Workloads as one batch, then time scheduling to quiescence."""
    engine = Engine()
    now = T0 + len(docs) * 1000
    for doc in docs:
        if doc["kind"] != "Workload":
            engine.apply(Event(EventType.UPSERT, now, manifest=doc, batch=True))
    engine.apply(Event(EventType.TICK, now))
    for doc in docs:
        if doc["kind"] == "Workload":
            engine.apply(Event(EventType.UPSERT, now, manifest=doc, batch=True))
    return _settled(engine, now)


def _settled(engine: Engine, now: int) -> Run:
    start, cpu = time.perf_counter(), time.process_time()
    decisions = engine.apply(Event(EventType.TICK, now))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    admitted = sum(1 for d in decisions if d.action == Action.ADMITTED)
    return Run(seconds, admitted, engine.cycles, cpu)


def admit_run(path: Path) -> Run:
    """``kueuestream admit PATH`` in a new process, timed from start to exit."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "kueuestream.agents.cli.main", "admit", str(path)], stdout=out, cwd=REPO
        )
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            raise SystemExit(f"admit exited with {child.returncode}")
        out.seek(0)
        listing = yaml.load(out, Loader=yaml.CSafeLoader)
    admitted = sum(
        1
        for item in listing["items"]
        if any(c["type"] == "Admitted" and c["status"] == "True" for c in item["status"]["conditions"])
    )
    return Run(seconds, admitted, cpu_seconds=usage.ru_utime + usage.ru_stime)


def report(label: str, runs: list[Run]) -> None:
    rates = [r.admitted / r.seconds for r in runs]
    best = max(rates)
    spread = f"{min(rates):,.0f}-{best:,.0f}/s" if len(rates) > 1 else "-"
    cycles = f", {runs[0].cycles:,} cycles" if runs[0].cycles is not None else ""
    cpu = min(r.cpu_seconds for r in runs if r.cpu_seconds is not None)
    print(
        f"  {label:<26} {best:>8,.0f} admissions/s  (best of {len(runs)}: "
        f"{min(r.seconds for r in runs):.2f} s, CPU {cpu:.2f} s = {runs[0].admitted / cpu:,.0f}/s; "
        f"spread {spread}; {runs[0].admitted:,} admitted{cycles})"
    )


def repeated(times: int, one: Callable[[T], Run], arg: T) -> list[Run]:
    return [one(arg) for _ in range(times)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", choices=(*SHAPES, "both"), default="both")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-engine", action="store_true")
    parser.add_argument("--skip-admit", action="store_true")
    args = parser.parse_args()
    for shape in SHAPES.values() if args.shape == "both" else [SHAPES[args.shape]]:
        print(
            f"--- {shape.queues:,} ClusterQueues in {COHORTS} cohorts, {shape.workloads:,} Workloads "
            f"({shape.expected_admitted:,} can be admitted)"
        )
        docs = manifests(shape)
        if not args.skip_engine:
            report("engine, scheduling only", repeated(args.repeat, scheduling_run, docs))
            report("engine, quota tree incl.", repeated(args.repeat, engine_run, docs))
        if not args.skip_admit:
            for package in ("admission", "agents", "streams", "kueuestream"):
                # The real folders: compileall does not follow kueuestream/'s links to them.
                compileall.compile_dir(REPO / package, quiet=1)
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / f"{shape.name}.yaml"
                with path.open("w") as f:
                    yaml.dump_all(docs, f, Dumper=yaml.CSafeDumper, sort_keys=False)
                size = path.stat().st_size
                runs = repeated(args.repeat, admit_run, path)
            report(f"admit incl. loading ({size / 2**20:.0f} MiB)", runs)


if __name__ == "__main__":
    main()
