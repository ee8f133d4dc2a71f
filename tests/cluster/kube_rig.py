"""What the job integration and applier tests share: objects on the real API server, and the runtime.

Every name is unique per test and namespaced objects live in a namespace of
the test's own: the API server outlives tests, and without a namespace
controller a namespace is never really deleted. Cluster-scoped quota objects
(flavors, ClusterQueues) carry the test's unique suffix too.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kueuestream.agents.kube.client import KubeConnection, connect
from kueuestream.agents.kube.crd_install import install_crds
from kueuestream.agents.kube.rest import JOBS, WORKLOADS, KubeObjects, Resource
from kueuestream.agents.kube.runtime import EmbeddedCluster, open_cluster
from kueuestream.agents.kube.watch_service import WatchOptions
from kueuestream.agents.kube.watcher import Watcher
from kueuestream.streams import codec
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.schemas import AppliedRecord, DecisionRecord

V = "kueue.x-k8s.io/v1beta2"
NAMESPACES = Resource("", "v1", "namespaces", "Namespace")
FLAVORS = Resource("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor")
CLUSTER_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue")
LOCAL_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")
PRIORITY_CLASSES = Resource("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", "WorkloadPriorityClass")
TIMEOUT_S = 60.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def eventually(
    check: Callable[[], Awaitable[bool]],
    what: str,
    timeout_s: float = TIMEOUT_S,
    describe: Callable[[], str] | None = None,
) -> None:
    """Wait until ``check`` holds; on timeout, say what was awaited and, with ``describe``,
    what was seen instead."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            seen = f"; {describe()}" if describe is not None else ""
            raise AssertionError(f"not within {timeout_s:g}s: {what}{seen}")
        await asyncio.sleep(0.1)


def flavor(
    name: str, node_labels: dict[str, str], tolerations: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": node_labels}
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cluster_queue(name: str, flavor_name: str, cpu: str, preemption: str = "Never") -> dict[str, Any]:
    return {
        "apiVersion": V,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": preemption},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": flavor_name, "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
                }
            ],
        },
    }


@dataclass
class Quota:
    """A flavor, a ClusterQueue and a LocalQueue in the test's namespace."""

    namespace: str
    flavor: str
    cluster_queue: str
    local_queue: str


class Rig:
    def __init__(self, conn: KubeConnection) -> None:
        self.conn = conn
        self.api = KubeObjects(conn.api)

    async def create(self, resource: Resource, body: dict[str, Any]) -> dict[str, Any]:
        return await self.api.create(resource, body["metadata"].get("namespace", ""), body)

    async def get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.api.get(resource, namespace, name)
        except Exception as exc:
            if getattr(exc, "status", None) == 404:
                return None
            raise

    async def namespace(self, prefix: str) -> str:
        name = unique(prefix)
        await self.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        return name

    async def quota(
        self,
        prefix: str,
        cpu: str,
        *,
        node_labels: dict[str, str] | None = None,
        tolerations: list[dict[str, Any]] | None = None,
        preemption: str = "Never",
    ) -> Quota:
        ns = await self.namespace(prefix)
        suffix = ns.rsplit("-", 1)[1]
        q = Quota(ns, f"flavor-{suffix}", f"cq-{suffix}", "lq")
        await self.create(FLAVORS, flavor(q.flavor, node_labels or {"pool": suffix}, tolerations))
        await self.create(CLUSTER_QUEUES, cluster_queue(q.cluster_queue, q.flavor, cpu, preemption))
        await self.create(
            LOCAL_QUEUES,
            {
                "apiVersion": V,
                "kind": "LocalQueue",
                "metadata": {"name": q.local_queue, "namespace": ns},
                "spec": {"clusterQueue": q.cluster_queue},
            },
        )
        return q

    async def job(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self.create(JOBS, body)

    async def workload_of(self, created_job: dict[str, Any]) -> dict[str, Any] | None:
        from kueuestream.admission.job_workload import job_workload_name

        meta = created_job["metadata"]
        return await self.get(WORKLOADS, meta["namespace"], job_workload_name(created_job))

    async def read_job(self, created_job: dict[str, Any]) -> dict[str, Any]:
        meta = created_job["metadata"]
        found = await self.get(JOBS, meta["namespace"], meta["name"])
        assert found is not None
        return found

    async def complete(self, created_job: dict[str, Any], succeeded: bool = True) -> None:
        """Mark a Job Complete (or Failed) as the Job controller would; none runs here."""
        meta = created_job["metadata"]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conditions = [
            {
                "type": "SuccessCriteriaMet" if succeeded else "FailureTarget",
                "status": "True",
                "lastTransitionTime": now,
                "lastProbeTime": now,
            },
            {
                "type": "Complete" if succeeded else "Failed",
                "status": "True",
                "lastTransitionTime": now,
                "lastProbeTime": now,
                "message": "done" if succeeded else "BackoffLimitExceeded",
            },
        ]
        status: dict[str, Any] = {"conditions": conditions, "startTime": now, "completionTime": now}
        if succeeded:
            status["succeeded"] = 1
        else:
            status.pop("completionTime")
            status["failed"] = 1
        await self.api.patch(JOBS, meta["namespace"], meta["name"], {"status": status}, subresource="status")


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    if obj is None:
        return None
    return next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == type_), None
    )


def is_true(obj: dict[str, Any] | None, type_: str) -> bool:
    found = condition(obj, type_)
    return found is not None and found.get("status") == "True"


@dataclass
class Served:
    """``run --kubeconfig`` served in this process: its runtime, watcher, log and task."""

    runtime: EmbeddedCluster
    watcher: Watcher
    log: FileLog
    task: asyncio.Task[None]

    async def stop(self) -> None:
        self.task.cancel()
        with suppress(asyncio.CancelledError):
            await self.task
        self.log.close_sync()


async def serve_synced(
    conn: KubeConnection, directory: Path, options: WatchOptions
) -> tuple[EmbeddedCluster, Watcher, FileLog, asyncio.Task[None]]:
    """Serve ``run --kubeconfig`` over the log at ``directory``; return once its watch synced."""
    from kueuestream.agents.kube.runtime import serve

    log = FileLog(directory, fsync=False)  # as run --kubeconfig opens it: one fsync per group
    runtime, watcher = await open_cluster(conn, log, options)
    task = asyncio.create_task(serve(runtime, watcher))
    synced = asyncio.create_task(watcher.synced.wait())
    done, _ = await asyncio.wait({task, synced}, timeout=120, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        synced.cancel()
        task.result()
    if synced not in done:
        task.cancel()
        raise TimeoutError("the watcher did not sync within 120s")
    return runtime, watcher, log, task


@dataclass
class Running(Served):
    def decisions(self) -> list[DecisionRecord]:
        return [d for part in self.decisions_by_partition() for d in part]

    def decisions_by_partition(self) -> list[list[DecisionRecord]]:
        """Each partition's decisions in log order (only within a partition is the order the log's)."""
        n = self.runtime.names
        return [
            [codec.decode(r.value, DecisionRecord) for r in self.log.read_sync(n.decisions, p)]
            for p in range(self.runtime.pipeline.partitions)
        ]

    def outcomes(self) -> list[AppliedRecord]:
        self.runtime.flush()
        n = self.runtime.names
        return [
            codec.decode(r.value, AppliedRecord)
            for p in range(self.runtime.applied_partitions)
            for r in self.log.read_sync(n.applied, p)
        ]


async def start_runtime(conn: KubeConnection, directory: Path) -> Running:
    """``kueuestream run --kubeconfig`` in this process, over the log at ``directory``, once synced."""
    return Running(*await serve_synced(conn, directory, WatchOptions(kubeconfig="", cluster="test")))


@asynccontextmanager
async def cluster(kube_config: str) -> AsyncIterator[Rig]:
    async with await connect(kube_config) as conn:
        await install_crds(conn)
        yield Rig(conn)


_REPO = str(Path(__file__).resolve().parents[2])  # so that -m finds tests.cluster.cli_child


class Cli:
    """A ``kueuestream`` command running in a child process, its output read as it comes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._reading = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def said(self, words: str) -> bool:
        return any(words in line for line in self.lines)

    async def announced_port(self, words: str, pattern: str) -> int:
        """The port (group 1 of ``pattern``) in the first line saying ``words``, once one does."""

        async def announced() -> bool:
            return self.said(words)

        await eventually(announced, f"the port announced ({words.strip()})")
        line = next(line for line in self.lines if words in line)
        found = re.search(pattern, line)
        assert found is not None, line
        return int(found.group(1))

    async def stop(self, sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` and wait; a process still running after 60 s is killed, then the test fails."""
        if self.process.returncode is None:
            self.process.send_signal(sig)
        try:
            await asyncio.wait_for(self.process.wait(), 60)
        except TimeoutError:
            with suppress(ProcessLookupError):  # it may end just now
                self.process.send_signal(signal.SIGUSR1)  # cli_child prints its threads and tasks
            with suppress(TimeoutError):
                await asyncio.wait_for(self.process.wait(), 3)
            with suppress(ProcessLookupError):
                self.process.kill()  # never leave it running past the test
            await self.process.wait()
            await self._reading
            tail = "\n".join(self.lines[-200:])
            raise AssertionError(
                f"the command did not stop within 60 s of signal {sig}; its last output:\n{tail}"
            ) from None
        await self._reading


async def start_cli(*args: str) -> Cli:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.cluster.cli_child",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": _REPO},
    )
    return Cli(process)
