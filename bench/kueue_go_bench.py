"""Upstream Kueue's own Go scheduler (v0.19.2) on the two backlog shapes of ``kueue_shapes_bench.py``.

    .venv/bin/python bench/kueue_go_bench.py [--shape small|large|both] [--repeat 3]
                                             [--client plain|field-managed|discard]
                                             [--kueue DIR] [--go PATH]

Kueue's figures measured on this machine, to set beside ``kueue_shapes_bench.py``'s.
The shapes are the same objects as its ``manifests()``: one ResourceFlavor; N
ClusterQueues spread over 10 cohorts, each with cpu nominalQuota 20 and
borrowingLimit 100, a Namespace and a LocalQueue; 1-cpu Workloads of priority 0
spread evenly over the queues, created one second apart.

- small: 30 ClusterQueues, 15,000 Workloads (600 admitted, 14,400 pending);
- large: 1,000 ClusterQueues, 50,000 Workloads (20,000 admitted).

``Scheduler.schedule`` is unexported, so the benchmark is a test in Kueue's own
package, ``kueue_go/shapes_bench_test.go`` (its top comment has the details).
This script copies Kueue's module from the Go module cache (``go mod download``
fetches it when missing) into a temporary folder, drops that file into
``pkg/scheduler/`` in place of upstream's tests there, builds the package's
test binary once (``go test -c -trimpath``: Go's build cache is shared between
the temporary folders, so only the first build compiles for minutes), runs the
binary once per measurement, in a fresh process, and removes the folder.

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
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TEST_FILE = HERE / "kueue_go" / "shapes_bench_test.go"
KUEUE_MODULE = "sigs.k8s.io/kueue"
KUEUE_VERSION = "v0.19.2"
RESULT_PREFIX = "KUEUE_SHAPES_RESULT "
COHORTS = 10
NOMINAL = 20


@dataclass(frozen=True)
class Shape:
    """The shapes of ``kueue_shapes_bench.py`` (``SHAPES`` there)."""

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


def go_env(go: str) -> dict[str, str]:
    env = dict(os.environ)
    flags = env.get("GOFLAGS", "").split()
    if "-buildvcs=false" not in flags:
        flags.append("-buildvcs=false")
    env["GOFLAGS"] = " ".join(flags)
    # The module's go.mod asks for the Go it was released with; use this one.
    env.setdefault("GOTOOLCHAIN", "local")
    env["PATH"] = f"{Path(go).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def module_dir(go: str, env: dict[str, str]) -> Path:
    """Kueue's module in the Go module cache, downloaded through GOPROXY when missing."""
    out = subprocess.run(
        [go, "mod", "download", "-json", f"{KUEUE_MODULE}@{KUEUE_VERSION}"],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"go mod download failed:\n{out.stdout}{out.stderr}")
    info: dict[str, Any] = json.loads(out.stdout)
    return Path(info["Dir"])


def make_writable(root: Path) -> None:
    """The module cache is read-only; so is a copy of it until this runs (chmod -R u+w)."""
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(folder) / name
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | stat.S_IWUSR)
    root.chmod(root.stat().st_mode | stat.S_IWUSR)


def prepare(source: Path, work: Path) -> Path:
    """Copy Kueue's module into ``work`` with our test in pkg/scheduler/; return the module's copy."""
    module = work / "kueue"
    shutil.copytree(source, module, symlinks=True)
    make_writable(module)
    package = module / "pkg" / "scheduler"
    # Upstream's own tests there are not needed, and are 20,000 lines to compile.
    for test in package.glob("*_test.go"):
        test.unlink()
    shutil.copyfile(TEST_FILE, package / "kueuestream_shapes_bench_test.go")
    return module


def build(go: str, env: dict[str, str], module: Path, binary: Path) -> float:
    start = time.perf_counter()
    out = subprocess.run(
        [go, "test", "-c", "-trimpath", "-o", str(binary), "./pkg/scheduler"],
        env=env,
        cwd=module,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"building Kueue's scheduler test binary failed:\n{out.stdout}{out.stderr}")
    return time.perf_counter() - start


def run_once(binary: Path, package: Path, shape: Shape, timed: str, client: str) -> Run:
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
        cwd=package,
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
    parser.add_argument("--kueue", type=Path, help="Kueue's module source (default: the Go module cache)")
    go = shutil.which("go") or "/usr/local/go/bin/go"
    parser.add_argument("--go", default=go, help="the go command (default: %(default)s)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    env = go_env(args.go)
    source: Path = args.kueue or module_dir(args.go, env)
    work = Path(tempfile.mkdtemp(prefix="kueue-go-bench-"))
    try:
        module = prepare(source, work)
        binary = work / "scheduler.test"
        print(f"Kueue {KUEUE_VERSION} from {source}; fake client: {args.client}")
        print(f"  test binary built in {build(args.go, env, module, binary):.1f} s", flush=True)
        package = module / "pkg" / "scheduler"
        for shape in SHAPES.values() if args.shape == "both" else [SHAPES[args.shape]]:
            print(
                f"--- {shape.queues:,} ClusterQueues in {COHORTS} cohorts, {shape.workloads:,} Workloads "
                f"({shape.expected_admitted:,} can be admitted)",
                flush=True,
            )
            for timed, label in TIMED.items():
                runs = [run_once(binary, package, shape, timed, args.client) for _ in range(args.repeat)]
                report(label, timed, runs)
                sys.stdout.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
