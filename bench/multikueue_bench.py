"""MultiKueue on three real API servers: Jobs submitted to a manager, run on two workers.

    .venv/bin/python bench/multikueue_bench.py [--jobs 1000] [--create-concurrency 32]

The three API servers are ``scripts/kube.sh`` instances ``mk-manager``,
``mk-worker1`` and ``mk-worker2`` (started here when they are not running,
and then stopped at the end). Instances already running are used as they
are, and this run's manager then also takes in what an earlier run left in
them (its Workloads, ClusterQueues and admission checks), so the figures
are those of a fresh federation only on fresh instances. Three ``kueuestream run --kubeconfig``
subprocesses run as a user runs them, each on a fresh log: the manager (with a
Configuration naming a fresh origin, ``--multikueue-namespace`` holding the
workers' kubeconfig Secrets) and one per worker, admitting the copies with its
own engine. Every ClusterQueue has room for every Job, so the figures are
those of the dispatch path, not of queueing.

This process creates the suspended Jobs in the manager and watches the Jobs
of both workers; a Job counts as running when a worker's copy of it is
unsuspended (by that worker's runtime).

Figures: Workloads dispatched per second (Jobs / time from the first creation
to the last Job running on a worker), p50/p99 of each Job's latency from its
creation (the create call answered) to its copy running on a worker (the watch
event received), how the Jobs split between the workers, and the CPU time of
each process per Job, and the requests each API server answered per Job (from
its ``apiserver_request_total`` metric), by verb and resource.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.process_cpu import cpu_seconds  # noqa: E402
from kueuestream.admission.multikueue.names import CONTROLLER_NAME  # noqa: E402
from kueuestream.agents.kube.api_calls import get_json, request_bytes, watch_lines  # noqa: E402
from kueuestream.agents.kube.client import KubeConnection, connect  # noqa: E402
from kueuestream.agents.kube.crd_install import install_crds  # noqa: E402
from kueuestream.agents.kube.multikueue.executor import ADMISSION_CHECKS, MULTIKUEUE_CLUSTERS  # noqa: E402
from kueuestream.agents.kube.rest import JOBS, KubeObjects, Resource  # noqa: E402
from tests.helpers import queued_job  # noqa: E402
from tests.multikueue.fleet import MULTIKUEUE_CONFIGS, SECRETS, configuration, quota  # noqa: E402

V = "kueue.x-k8s.io/v1beta2"
NAMESPACES = Resource("", "v1", "namespaces", "Namespace")
INSTANCES = {"manager": "mk-manager", "w1": "mk-worker1", "w2": "mk-worker2"}


def kube_sh(instance: str, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "kube.sh"), command],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "KUBE_INSTANCE": instance},
    )


def servers() -> tuple[dict[str, str], list[str]]:
    """Each role's kubeconfig, and the instances started here (to stop at the end)."""
    paths, started = {}, []
    for role, instance in INSTANCES.items():
        first = (kube_sh(instance, "status").stdout.splitlines() or [""])[0].split()
        if first[:1] == ["running"] and len(first) == 3:
            paths[role] = first[2]
            continue
        done = kube_sh(instance, "start")
        if done.returncode != 0:
            sys.exit(f"KUBE_INSTANCE={instance} scripts/kube.sh start failed:\n{done.stderr[-2000:]}")
        paths[role] = done.stdout.strip().splitlines()[-1]
        started.append(instance)
    return paths, started


def server_pids() -> dict[str, int]:
    out = {}
    for role, instance in INSTANCES.items():
        path = REPO / ".kube" / "instances" / instance / "kube-apiserver.pid"
        if path.is_file():
            out[f"kube-apiserver {role}"] = int(path.read_text().strip())
    return out


REQUEST_TOTAL = re.compile(r"^apiserver_request_total\{([^}]*)\} (\S+)$", re.MULTILINE)
LABEL = re.compile(r'(\w+)="([^"]*)"')


async def request_counts(api: Any) -> dict[str, float]:
    """Requests the API server answered so far, by "VERB resource[/subresource]" and, unless it
    succeeded, the answer's code (watches left out)."""
    text = (await request_bytes(api, "GET", "/metrics")).decode()
    counts: dict[str, float] = {}
    for labels, value in REQUEST_TOTAL.findall(text):
        got = dict(LABEL.findall(labels))
        if got.get("verb") == "WATCH":
            continue
        what = got.get("resource", "") + (f"/{got['subresource']}" if got.get("subresource") else "")
        code = got.get("code", "")
        key = f"{got.get('verb')} {what}" + ("" if code.startswith("2") else f" ({code})")
        counts[key] = counts.get(key, 0.0) + float(value)
    return counts


async def setup(conns: dict[str, KubeConnection], paths: dict[str, str], jobs: int) -> tuple[str, str, Path]:
    """The federation's objects; the Jobs' namespace, the Secrets' namespace, the Configuration file."""
    suffix = uuid.uuid4().hex[:8]
    ns, secrets_ns = f"mk-bench-{suffix}", f"mk-bench-secrets-{suffix}"
    m = KubeObjects(conns["manager"].api)
    for name in (ns, secrets_ns):
        await m.create(NAMESPACES, "", {"metadata": {"name": name}})
    for worker in ("w1", "w2"):
        raw = Path(paths[worker]).read_bytes()
        secret = {"metadata": {"name": worker}, "data": {"kubeconfig": base64.b64encode(raw).decode()}}
        await m.create(SECRETS, secrets_ns, secret)
        source = {"kubeConfig": {"locationType": "Secret", "location": worker}}
        await m.create(
            MULTIKUEUE_CLUSTERS,
            "",
            {
                "apiVersion": V,
                "kind": "MultiKueueCluster",
                "metadata": {"name": f"{worker}-{suffix}"},
                "spec": {"clusterSource": source},
            },
        )
    clusters = [f"w1-{suffix}", f"w2-{suffix}"]
    await m.create(
        MULTIKUEUE_CONFIGS,
        "",
        {
            "apiVersion": V,
            "kind": "MultiKueueConfig",
            "metadata": {"name": f"bench-{suffix}"},
            "spec": {"clusters": clusters},
        },
    )
    params = {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": f"bench-{suffix}"}
    await m.create(
        ADMISSION_CHECKS,
        "",
        {
            "apiVersion": V,
            "kind": "AdmissionCheck",
            "metadata": {"name": f"mk-{suffix}"},
            "spec": {"controllerName": CONTROLLER_NAME, "parameters": params},
        },
    )
    await quota(m, ns, suffix, str(jobs), check=f"mk-{suffix}")
    for worker in ("w1", "w2"):
        w = KubeObjects(conns[worker].api)
        await w.create(NAMESPACES, "", {"metadata": {"name": ns}})
        await quota(w, ns, suffix, str(jobs))
    config = Path(tempfile.mkdtemp(prefix="mk-bench-")) / "configuration.yaml"
    dispatcher = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
    config.write_text(configuration(f"bench-{suffix}", "15m", dispatcher, None))
    return ns, secrets_ns, config


async def observe(api: Any, worker: str, ns: str, running: dict[str, tuple[float, str]], total: int) -> None:
    """Record when each Job copy of ``ns`` in a worker is first seen unsuspended."""
    path = f"/apis/batch/v1/namespaces/{ns}/jobs"
    rv = (await get_json(api, path, [("limit", "1")]))["metadata"]["resourceVersion"]
    while len(running) < total:
        async for event in watch_lines(api, path, [("resourceVersion", rv)], server_timeout_s=300):
            obj = event.get("object") or {}
            rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
            if event.get("type") in ("BOOKMARK", "DELETED"):
                continue
            name = obj["metadata"]["name"]
            if (obj.get("spec") or {}).get("suspend") is False and name not in running:
                running[name] = (time.time(), worker)
                if len(running) >= total:
                    return


def start_run(args: list[str], out_path: Path) -> subprocess.Popen[bytes]:
    with open(out_path, "w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "kueuestream", "run", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )


async def bench(paths: dict[str, str], count: int, concurrency: int, timeout_s: float) -> dict[str, Any]:
    conns = {role: await connect(path) for role, path in paths.items()}
    runners: dict[str, subprocess.Popen[bytes]] = {}
    try:
        await asyncio.gather(*(install_crds(c) for c in conns.values()))
        ns, secrets_ns, config = await setup(conns, paths, count)
        outs = {}
        for role in ("w1", "w2", "manager"):
            log_dir = Path(tempfile.mkdtemp(prefix=f"mk-bench-{role}-"))
            outs[role] = log_dir.parent / f"{log_dir.name}.out"
            args = ["--kubeconfig", paths[role], "--log-dir", str(log_dir), "--cluster", role]
            if role == "manager":
                args += ["--config", str(config), "--multikueue-namespace", secrets_ns]
            runners[role] = start_run(args, outs[role])
        deadline = time.monotonic() + 120
        for role, out_path in outs.items():
            while "running against" not in out_path.read_text():
                if runners[role].poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"kueuestream run ({role}) did not start:\n{out_path.read_text()[-2000:]}")
                await asyncio.sleep(0.2)
        m = KubeObjects(conns["manager"].api)
        running: dict[str, tuple[float, str]] = {}
        watchers = [asyncio.create_task(observe(conns[w].api, w, ns, running, count)) for w in ("w1", "w2")]
        await asyncio.sleep(1.0)  # the watches are open
        created: dict[str, float] = {}
        gate = asyncio.Semaphore(concurrency)

        async def create(i: int) -> None:
            name = f"job-{i:05d}"
            async with gate:
                await m.create(JOBS, ns, queued_job(ns, name, "lq"))
                created[name] = time.time()

        pids = {**server_pids(), **{f"kueuestream run {r}": p.pid for r, p in runners.items()}}
        cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        calls_before = {role: await request_counts(c.api) for role, c in conns.items()}
        begin = time.time()
        await asyncio.gather(*(create(i) for i in range(count)))
        created_s = time.time() - begin
        done, _ = await asyncio.wait(watchers, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        if not done:
            sys.exit(f"only {len(running)} of {count} Jobs running on a worker after {timeout_s:g}s")
        for task in watchers:
            task.cancel()
        end = max(t for t, _ in running.values())
        cpu = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in pids.items()}
        calls = {}
        for role, c in conns.items():
            after = await request_counts(c.api)
            diff = {k: v - calls_before[role].get(k, 0.0) for k, v in after.items()}
            calls[role] = {k: v / count for k, v in sorted(diff.items()) if v > 0}
        load = os.getloadavg()[0]
    finally:
        for runner in runners.values():
            runner.send_signal(signal.SIGINT)
        for runner in runners.values():
            try:
                runner.wait(60)
            except subprocess.TimeoutExpired:
                runner.kill()
        for conn in conns.values():
            await conn.close()
    latencies = sorted(running[n][0] - created[n] for n in created if n in running)
    split = {w: sum(1 for _, where in running.values() if where == w) for w in ("w1", "w2")}
    return {
        "jobs": count,
        "create_s": created_s,
        "total_s": end - begin,
        "per_s": count / (end - begin),
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(0.99 * (len(latencies) - 1))] * 1000,
        "split": split,
        "load": load,
        "cpu_ms": {name: seconds * 1000 / count for name, seconds in cpu.items()},
        "calls": calls,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--create-concurrency", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for the last Job")
    args = parser.parse_args()
    paths, started = servers()
    try:
        r = asyncio.run(bench(paths, args.jobs, args.create_concurrency, args.timeout))
    finally:
        for instance in started:
            kube_sh(instance, "stop")
    print(
        f"{r['jobs']} suspended Jobs created in the manager in {r['create_s']:.1f}s; "
        f"all running on a worker after {r['total_s']:.1f}s"
    )
    print(f"throughput: {r['per_s']:.1f} Workloads dispatched per second (creation to running on a worker)")
    print(f"latency Job creation -> running on a worker: p50 {r['p50_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms")
    print(f"ran on: w1 {r['split']['w1']}, w2 {r['split']['w2']}")
    cpu = ", ".join(f"{name} {ms:.1f} ms" for name, ms in r["cpu_ms"].items())
    print(f"CPU time per Job: {cpu}; machine load average at the end: {r['load']:.1f}")
    for role, by_kind in r["calls"].items():
        shown = ", ".join(f"{kind} {n:.2f}" for kind, n in by_kind.items() if n >= 0.01)
        print(f"requests per Job on {role}: {sum(by_kind.values()):.2f} ({shown})")


if __name__ == "__main__":
    main()
