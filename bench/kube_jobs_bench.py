"""Jobs through Kueue's job integration on a real API server: from creation to unsuspended.

    .venv/bin/python bench/kube_jobs_bench.py [--jobs 5000] [--kubeconfig PATH] [--create-concurrency 32]

The API server is the one of ``scripts/kube.sh`` (started here if it is not
running, and stopped again at the end), or ``--kubeconfig`` /
``KUEUESTREAM_KUBECONFIG``. ``kueuestream run --kubeconfig`` runs as a
subprocess, as a user runs it, on a fresh log. This process creates the
suspended Jobs (one ClusterQueue with room for all of them) and watches them
on a watch of its own; a Job counts as started when the watch shows it
unsuspended.

Figures: Jobs per second from the first creation to the last unsuspension,
p50/p99 of each Job's latency from its creation (the create call answered) to
its unsuspension (the watch event received), and the API writes and reads
``kueuestream run`` made per admitted Job (from its closing summary).
"""

from __future__ import annotations

import argparse
import asyncio
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
from kueuestream.agents.kube.api_calls import watch_lines  # noqa: E402
from kueuestream.agents.kube.client import connect  # noqa: E402
from kueuestream.agents.kube.crd_install import install_crds  # noqa: E402
from kueuestream.agents.kube.rest import JOBS, KubeObjects, Resource  # noqa: E402
from tests.helpers import queued_job  # noqa: E402

V = "kueue.x-k8s.io/v1beta2"
NAMESPACES = Resource("", "v1", "namespaces", "Namespace")
FLAVORS = Resource("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor")
CLUSTER_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue")
LOCAL_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")


def kube_sh(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "kube.sh"), command], capture_output=True, text=True, check=False
    )


def kubeconfig(given: str | None) -> tuple[str, bool]:
    """A kubeconfig path, and whether this run started the server (and so stops it)."""
    path = given or os.environ.get("KUEUESTREAM_KUBECONFIG", "").strip()
    if path:
        return path, False
    first = (kube_sh("status").stdout.splitlines() or [""])[0].split()
    if first[:1] == ["running"] and len(first) == 3:
        return first[2], False
    started = kube_sh("start")
    if started.returncode != 0:
        sys.exit(f"scripts/kube.sh start failed:\n{started.stderr[-2000:]}")
    return started.stdout.strip().splitlines()[-1], True


def server_pids() -> dict[str, int]:
    """The API server's and etcd's pids when they are scripts/kube.sh's."""
    out = {}
    for name in ("kube-apiserver", "etcd"):
        path = REPO / ".kube" / f"{name}.pid"
        if path.is_file():
            out[name] = int(path.read_text().strip())
    return out


async def setup(api: KubeObjects, jobs: int) -> str:
    suffix = uuid.uuid4().hex[:8]
    namespace = f"bench-{suffix}"
    await api.create(
        NAMESPACES, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    await api.create(
        FLAVORS,
        "",
        {
            "apiVersion": V,
            "kind": "ResourceFlavor",
            "metadata": {"name": f"bench-{suffix}"},
            "spec": {"nodeLabels": {"pool": "bench"}},
        },
    )
    await api.create(
        CLUSTER_QUEUES,
        "",
        {
            "apiVersion": V,
            "kind": "ClusterQueue",
            "metadata": {"name": f"bench-{suffix}"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {
                                "name": f"bench-{suffix}",
                                "resources": [{"name": "cpu", "nominalQuota": str(jobs)}],
                            }
                        ],
                    }
                ],
            },
        },
    )
    await api.create(
        LOCAL_QUEUES,
        namespace,
        {
            "apiVersion": V,
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": namespace},
            "spec": {"clusterQueue": f"bench-{suffix}"},
        },
    )
    return namespace


async def observe(api: Any, namespace: str, started: dict[str, float], total: int, rv: str) -> None:
    """Record when each Job of ``namespace`` is first seen unsuspended."""
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    while len(started) < total:
        async for event in watch_lines(api, path, [("resourceVersion", rv)], server_timeout_s=300):
            obj = event.get("object") or {}
            rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
            if event.get("type") == "BOOKMARK":
                continue
            name = obj["metadata"]["name"]
            if (obj.get("spec") or {}).get("suspend") is False and name not in started:
                started[name] = time.time()
                if len(started) >= total:
                    return


async def bench(config: str, count: int, concurrency: int, timeout_s: float) -> dict[str, float]:
    async with await connect(config) as conn:
        await install_crds(conn)
        api = KubeObjects(conn.api)
        namespace = await setup(api, count)
        listing = await api.get(Resource("batch", "v1", "jobs", "Job"), namespace, "")
        log_dir = Path(tempfile.mkdtemp(prefix="kube-bench-log-"))
        out_path = log_dir.parent / f"{log_dir.name}.out"
        with open(out_path, "w") as out:
            runner = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "kueuestream",
                    "run",
                    "--kubeconfig",
                    config,
                    "--log-dir",
                    str(log_dir),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO,
            )
        try:
            # Ready once it has listed the cluster and says so.
            deadline = time.monotonic() + 120
            while "running against" not in out_path.read_text():
                if runner.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"kueuestream run did not start:\n{out_path.read_text()[-2000:]}")
                await asyncio.sleep(0.2)
            created: dict[str, float] = {}
            started: dict[str, float] = {}
            watcher = asyncio.create_task(
                observe(conn.api, namespace, started, count, listing["metadata"]["resourceVersion"])
            )
            gate = asyncio.Semaphore(concurrency)

            async def create(i: int) -> None:
                name = f"job-{i:05d}"
                async with gate:
                    await api.create(JOBS, namespace, queued_job(namespace, name, "lq"))
                    created[name] = time.time()

            servers = server_pids()
            cpu_before = {name: cpu_seconds(pid) for name, pid in servers.items()}
            cpu_before["kueuestream run"] = cpu_seconds(runner.pid)
            begin = time.time()
            await asyncio.gather(*(create(i) for i in range(count)))
            created_s = time.time() - begin
            await asyncio.wait_for(watcher, timeout_s)
            end = max(started.values())
            cpu = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in servers.items()}
            cpu["kueuestream run"] = cpu_seconds(runner.pid) - cpu_before["kueuestream run"]
            load = os.getloadavg()[0]
        finally:
            runner.send_signal(signal.SIGINT)
            try:
                runner.wait(60)
            except subprocess.TimeoutExpired:
                runner.kill()
        summary = out_path.read_text().strip().splitlines()[-1]
        writes = re.search(r"(\d+) API writes", summary)
        reads = re.search(r"(\d+) API reads", summary)
        latencies = sorted(started[n] - created[n] for n in created)
        return {
            "jobs": count,
            "create_s": created_s,
            "total_s": end - begin,
            "jobs_per_s": count / (end - begin),
            "p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": latencies[int(0.99 * (len(latencies) - 1))] * 1000,
            "writes_per_job": int(writes.group(1)) / count if writes else float("nan"),
            "reads_per_job": int(reads.group(1)) / count if reads else float("nan"),
            "load": load,
            **{f"cpu_ms:{name}": seconds * 1000 / count for name, seconds in cpu.items()},
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--create-concurrency", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for the last Job")
    args = parser.parse_args()
    config, ours = kubeconfig(args.kubeconfig)
    try:
        r = asyncio.run(bench(config, args.jobs, args.create_concurrency, args.timeout))
    finally:
        if ours:
            kube_sh("stop")
    print(
        f"{r['jobs']:.0f} suspended Jobs created in {r['create_s']:.1f}s; "
        f"all unsuspended after {r['total_s']:.1f}s"
    )
    print(f"throughput: {r['jobs_per_s']:.1f} Jobs/s from creation to unsuspended")
    print(f"latency creation -> unsuspended: p50 {r['p50_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms")
    print(
        f"API calls by kueuestream run per admitted Job: {r['writes_per_job']:.2f} writes, "
        f"{r['reads_per_job']:.2f} reads"
    )
    cpu = ", ".join(f"{k.split(':', 1)[1]} {v:.1f} ms" for k, v in r.items() if k.startswith("cpu_ms:"))
    print(f"CPU time per Job: {cpu}; machine load average at the end: {r['load']:.1f}")


if __name__ == "__main__":
    main()
