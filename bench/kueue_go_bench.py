"""Upstream Kueue's own Go scheduler (v0.19.2) on the two backlog shapes of ``kueue_shapes_bench.py``.

    .venv/bin/python bench/kueue_go_bench.py [--shape small|large|both] [--repeat 3]
                                             [--client plain|field-managed|discard]

Kueue's figures measured on this machine, to set beside ``kueue_shapes_bench.py``'s.
The shapes are the same objects as its ``manifests()``: one ResourceFlavor; N
ClusterQueues spread over 10 cohorts, each with cpu nominalQuota 20 and
borrowingLimit 100, a Namespace and a LocalQueue; 1-cpu Workloads of priority 0
spread evenly over the queues, created one second apart.

- small: 30 ClusterQueues, 15,000 Workloads (600 admitted, 14,400 pending);
- large: 1,000 ClusterQueues, 50,000 Workloads (20,000 admitted).

``Scheduler.schedule`` is unexported, so the benchmark is a test in Kueue's own
package, ``kueue_go/shapes_bench_test.go`` (its top comment has the details),
with ``tests/parity/upstream/heads_test.go``. ``tests/parity/upstream.py``
builds the package's test binary with them (Kueue's module at the version
``scripts/kueue.sh`` pins, from the Go module cache; ``GO`` names the go
command) and caches it until either file changes; the binary runs once per
measurement, in a fresh process.

Two measurements per shape, each repeated ``--repeat`` times (best and spread
printed, since the machine may be shared):

- schedule() only: every object stored in controller-runtime's fake client and
  added to Kueue's scheduler cache and queue manager (the calls Kueue's
  controllers make for an added object) with the clock stopped, then the clock
  is timed from the first ``schedule()`` call to quiescence: every scheduling
  cycle and every admission the scheduler writes to the fake client. Kueue's
  own scheduler benchmark (``BenchmarkSchedulerTAS``) times ``schedule()`` the
  same way;
- incl. loading: the same, with the clock also covering storing the objects in
  the fake client and adding them to the cache and queue manager.

Quiescence is where Kueue's scheduler would block in the queue manager's
``Heads()``: no active ClusterQueue has a Workload in its heap. A Workload that
does not fit is requeued as inadmissible (and its equivalent Workloads with it)
and stays there until a cluster event frees quota, which never comes here.

Each reports admissions per second (admitted Workloads / seconds) and Kueue's
scheduling cycles, and where the best run spent its time: storing objects in the
fake client, adding them to the cache and queue manager, and ``schedule()`` to
quiescence. A run fails unless min(W, 20 N) Workloads hold a quota reservation
in Kueue's cache and in the fake client, and every other one is inadmissible.

With the default client, most of the large shape's time goes to the fake
client applying the 20,000 admission patches (JSON round trips, a strategic
merge), which in a cluster the API server does, not Kueue; ``--client discard``
shows the scheduler without it.

``--client`` picks the fake client under the scheduler: ``plain`` (default), on
client-go's plain object tracker; ``field-managed``, on controller-runtime's
default tracker, which spends about 3 ms on every write building a REST mapper;
``discard``, plain but dropping Workload status patches as
``BenchmarkSchedulerTAS`` does, which leaves the scheduler's own work without
the fake API server's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kueue_shapes_bench import COHORTS, SHAPES, Shape  # also puts the repository on sys.path

from tests.parity import upstream

HERE = Path(__file__).resolve().parent
TEST_FILE = HERE / "kueue_go" / "shapes_bench_test.go"
RESULT_PREFIX = "KUEUE_SHAPES_RESULT "

TIMED = {"schedule": "Kueue schedule() only", "loading": "Kueue incl. loading"}


@dataclass(frozen=True)
class Run:
    seconds: float
    cpu_seconds: float
    admitted: int
    cycles: int
    load_client_seconds: float
    load_kueue_seconds: float
    schedule_seconds: float


def run_once(binary: Path, shape: Shape, timed: str, client: str) -> Run:
    """One measurement in a fresh process of the test binary."""
    env = dict(os.environ)
    env.update(
        KUEUE_SHAPES_QUEUES=str(shape.queues),
        KUEUE_SHAPES_WORKLOADS=str(shape.workloads),
        KUEUE_SHAPES_TIMED=timed,
        KUEUE_SHAPES_CLIENT=client,
    )
    out = subprocess.run(
        [str(binary), "-test.run", "^TestKueueShapesBench$", "-test.count", "1"],
        env=env,
        cwd=binary.parent,
        capture_output=True,
        text=True,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if out.returncode != 0 or len(lines) != 1:
        raise SystemExit(
            f"Kueue's {shape.name} run ({timed}) failed with exit code {out.returncode}:\n"
            f"{out.stdout[-4000:]}{out.stderr[-4000:]}"
        )
    result: dict[str, Any] = json.loads(lines[0].removeprefix(RESULT_PREFIX))
    admitted = int(result["admitted_cache"])
    if admitted != shape.expected_admitted:
        raise SystemExit(f"Kueue admitted {admitted:,} Workloads, expected {shape.expected_admitted:,}")
    return Run(
        seconds=float(result["seconds"]),
        cpu_seconds=float(result["cpu_seconds"]),
        admitted=admitted,
        cycles=int(result["cycles"]),
        load_client_seconds=float(result["load_client_seconds"]),
        load_kueue_seconds=float(result["load_kueue_seconds"]),
        schedule_seconds=float(result["schedule_seconds"]),
    )


def report(label: str, timed: str, runs: list[Run]) -> None:
    rates = [r.admitted / r.seconds for r in runs]
    best = max(rates)
    spread = f"{min(rates):,.0f}-{best:,.0f}/s" if len(rates) > 1 else "-"
    cpu = min(r.cpu_seconds for r in runs)
    fastest = min(runs, key=lambda r: r.seconds)
    print(
        f"  {label:<26} {best:>8,.0f} admissions/s  (best of {len(runs)}: "
        f"{fastest.seconds:.2f} s, CPU {cpu:.2f} s = {runs[0].admitted / cpu:,.0f}/s; "
        f"spread {spread}; {runs[0].admitted:,} admitted, {runs[0].cycles:,} cycles)"
    )
    loading = "loading" if timed == "loading" else "loading (not timed)"
    print(
        f"  {'':<26} {'':>8} best run: {loading} {fastest.load_client_seconds:.2f} s in the fake client "
        f"+ {fastest.load_kueue_seconds:.2f} s in the cache and queue manager; "
        f"schedule() to quiescence {fastest.schedule_seconds:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", choices=(*SHAPES, "both"), default="both")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--client", choices=("plain", "field-managed", "discard"), default="plain")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    try:
        binary = upstream.build([upstream.HEADS_SOURCE, TEST_FILE], name="shapes")
    except upstream.UpstreamUnavailable as exc:
        raise SystemExit(str(exc)) from exc
    print(f"Kueue {upstream.kueue_version()}: {binary}; fake client: {args.client}", flush=True)
    for shape in SHAPES.values() if args.shape == "both" else [SHAPES[args.shape]]:
        print(
            f"--- {shape.queues:,} ClusterQueues in {COHORTS} cohorts, {shape.workloads:,} Workloads "
            f"({shape.expected_admitted:,} can be admitted)",
            flush=True,
        )
        for timed, label in TIMED.items():
            runs = [run_once(binary, shape, timed, args.client) for _ in range(args.repeat)]
            report(label, timed, runs)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
