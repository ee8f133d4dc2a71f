"""A real federation for the end-to-end MultiKueue tests: a manager and two workers, each with its runtime.

Three API servers (``multikueue_servers``); each runs ``run --kubeconfig`` in
this process (:class:`~kueuestream.agents.kube.runtime.EmbeddedCluster` over a
log of its own). The manager has a MultiKueue AdmissionCheck on its
ClusterQueue, a MultiKueueConfig listing both workers, and a MultiKueueCluster
per worker whose kubeconfig is a Secret in a namespace of the test's own. Each
worker has a LocalQueue of the same name in the same namespace, and a
ClusterQueue with the quota the test gives it.

Cluster-scoped names, the namespace and the origin label's value carry a
suffix of the test's own, so that tests sharing the servers never see each
other's copies; the MultiKueueClusters are deleted at the end so that later
managers do not link to them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kueuestream.admission.job_workload import job_workload_name
from kueuestream.admission.multikueue.names import CONTROLLER_NAME, ORIGIN_LABEL
from kueuestream.agents.kube.api_calls import request_json
from kueuestream.agents.kube.client import KubeConnection, connect
from kueuestream.agents.kube.crd_install import install_crds
from kueuestream.agents.kube.multikueue.executor import ADMISSION_CHECKS, MULTIKUEUE_CLUSTERS
from kueuestream.agents.kube.rest import JOBS, WORKLOADS, KubeObjects, Resource
from kueuestream.agents.kube.watch_service import WatchOptions
from kueuestream.streams import codec
from kueuestream.streams.schemas import DecisionRecord, MultiKueueApplied, MultiKueueDecision
from tests.cluster.kube_rig import (
    CLUSTER_QUEUES,
    FLAVORS,
    LOCAL_QUEUES,
    NAMESPACES,
    Served,
    V,
    cluster_queue,
    flavor,
    serve_synced,
)
from tests.conftest import KubeInstance, MultiKueueServers

MULTIKUEUE_CONFIGS = Resource("kueue.x-k8s.io", "v1beta2", "multikueueconfigs", "MultiKueueConfig")
SECRETS = Resource("", "v1", "secrets", "Secret")
WORKERS = ("w1", "w2")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Running(Served):
    def decisions(self) -> list[MultiKueueDecision]:
        names = self.runtime.names
        return [codec.decode(r.value, MultiKueueDecision) for r in self.log.read_sync(names.multikueue, 0)]

    def engine_actions(self, namespace: str, name: str) -> list[str]:
        """The engine's decisions about Workload ``namespace/name`` (one partition holds them all)."""
        topic = self.runtime.names.decisions
        for partition in range(self.runtime.pipeline.partitions):
            records = [codec.decode(r.value, DecisionRecord) for r in self.log.read_sync(topic, partition)]
            actions = [str(d.action) for d in records if (d.ref.namespace, d.ref.name) == (namespace, name)]
            if actions:
                return actions
        return []

    def outcomes(self) -> list[MultiKueueApplied]:
        self.runtime.flush()
        names = self.runtime.names
        return [
            codec.decode(r.value, MultiKueueApplied) for r in self.log.read_sync(names.multikueue_applied, 0)
        ]


async def start(conn: KubeConnection, directory: Path, options: WatchOptions) -> Running:
    """``run --kubeconfig`` in this process over the log at ``directory``, once its watch synced."""
    return Running(*await serve_synced(conn, directory, options))


@dataclass
class Fleet:
    servers: MultiKueueServers
    tmp: Path
    manager: KubeConnection
    workers: dict[str, KubeConnection]
    suffix: str
    ns: str
    secrets_ns: str
    origin: str
    check: str
    configuration: Path
    running: dict[str, Running] = field(default_factory=dict)

    def cluster(self, worker: str) -> str:
        """The MultiKueueCluster name of worker ``w1`` or ``w2``."""
        return f"{worker}-{self.suffix}"

    def instance(self, worker: str) -> KubeInstance:
        return self.servers.worker1 if worker == "w1" else self.servers.worker2

    def api(self, where: str) -> KubeObjects:
        conn = self.manager if where == "manager" else self.workers[where]
        return KubeObjects(conn.api)

    async def start_manager(self, log_dir: str = "manager") -> Running:
        options = WatchOptions(
            kubeconfig="",
            cluster="manager",
            config_file=self.configuration,
            multikueue_namespace=self.secrets_ns,
        )
        running = await start(self.manager, self.tmp / log_dir, options)
        self.running["manager"] = running
        return running

    async def start_worker(self, worker: str) -> Running:
        options = WatchOptions(kubeconfig="", cluster=worker)
        running = await start(self.workers[worker], self.tmp / worker, options)
        self.running[worker] = running
        return running

    async def stop(self, which: str) -> None:
        running = self.running.pop(which, None)
        if running is not None:
            await running.stop()

    async def job(self, name: str, cpu: str = "1") -> dict[str, Any]:
        from tests.helpers import queued_job

        created: dict[str, Any] = await self.api("manager").create(
            JOBS, self.ns, queued_job(self.ns, name, "lq", cpu)
        )
        return created

    async def get(
        self, where: str, resource: Resource, name: str, ns: str | None = None
    ) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = await self.api(where).get(resource, self.ns if ns is None else ns, name)
        except Exception as exc:
            if getattr(exc, "status", None) == 404:
                return None
            raise
        return found

    async def copies(self, worker: str) -> tuple[list[str], list[str]]:
        """Names of the Workloads and Jobs with our origin in the test's namespace of a worker."""
        out = []
        for resource in (WORKLOADS, JOBS):
            query = [("labelSelector", f"{ORIGIN_LABEL}={self.origin}")]
            body = await request_json(self.workers[worker].api, "GET", resource.path(self.ns), query)
            out.append(
                sorted(
                    i["metadata"]["name"]
                    for i in body.get("items") or []
                    if not i["metadata"].get("deletionTimestamp")
                )
            )
        return out[0], out[1]

    async def complete_remote_job(self, worker: str, name: str) -> None:
        """Mark the worker's Job copy Complete, as the worker's Job controller would (none runs here)."""
        stamp = now()
        conditions = [
            {
                "type": "SuccessCriteriaMet",
                "status": "True",
                "lastTransitionTime": stamp,
                "lastProbeTime": stamp,
            },
            {"type": "Complete", "status": "True", "lastTransitionTime": stamp, "lastProbeTime": stamp},
        ]
        status = {"conditions": conditions, "startTime": stamp, "completionTime": stamp, "succeeded": 1}
        await self.api(worker).patch(JOBS, self.ns, name, {"status": status}, subresource="status")


def configuration(origin: str, lost_timeout: str, dispatcher: str, step: int | None) -> str:
    lines = [
        "apiVersion: config.kueue.x-k8s.io/v1beta2",
        "kind: Configuration",
        "multiKueue:",
        f"  origin: {origin}",
        f"  workerLostTimeout: {lost_timeout}",
        "  gcInterval: 2s",
        f"  dispatcherName: {dispatcher}",
    ]
    if step is not None:
        lines += ["  incrementalDispatcherConfig:", f"    stepSize: {step}"]
    return "\n".join(lines) + "\n"


@asynccontextmanager
async def fleet(
    servers: MultiKueueServers,
    tmp: Path,
    *,
    worker_cpu: dict[str, str],
    manager_cpu: str = "1",
    lost_timeout: str = "15m",
    dispatcher: str = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
    step: int | None = None,
    kubeconfigs: dict[str, bytes] | None = None,
    upstream_workers: tuple[str, ...] = (),
) -> AsyncIterator[Fleet]:
    """The federation's objects in all three clusters; runtimes are started by the test.

    ``upstream_workers`` run upstream Kueue: they get upstream's CRDs from the caller, not ours.
    """
    suffix = uuid.uuid4().hex[:8]
    async with contextlib.AsyncExitStack() as stack:
        manager = await stack.enter_async_context(await connect(servers.manager.kubeconfig))
        workers = {
            "w1": await stack.enter_async_context(await connect(servers.worker1.kubeconfig)),
            "w2": await stack.enter_async_context(await connect(servers.worker2.kubeconfig)),
        }
        ours = [c for w, c in workers.items() if w not in upstream_workers]
        await asyncio.gather(install_crds(manager), *(install_crds(c) for c in ours))
        ns, secrets_ns = f"mk-{suffix}", f"mk-secrets-{suffix}"
        config_path = tmp / "configuration.yaml"
        config_path.write_text(configuration(f"o-{suffix}", lost_timeout, dispatcher, step))
        fl = Fleet(
            servers, tmp, manager, workers, suffix, ns, secrets_ns, f"o-{suffix}", f"mk-{suffix}", config_path
        )
        m = fl.api("manager")
        for name in (ns, secrets_ns):
            await m.create(NAMESPACES, "", {"metadata": {"name": name}})
        for worker in WORKERS:
            raw = (kubeconfigs or {}).get(worker, fl.instance(worker).kubeconfig.read_bytes())
            secret = {
                "metadata": {"name": f"{worker}-kubeconfig"},
                "data": {"kubeconfig": base64.b64encode(raw).decode()},
            }
            await m.create(SECRETS, secrets_ns, secret)
            await m.create(
                MULTIKUEUE_CLUSTERS,
                "",
                {
                    "apiVersion": V,
                    "kind": "MultiKueueCluster",
                    "metadata": {"name": fl.cluster(worker)},
                    "spec": {
                        "clusterSource": {
                            "kubeConfig": {"locationType": "Secret", "location": f"{worker}-kubeconfig"}
                        }
                    },
                },
            )
        await m.create(
            MULTIKUEUE_CONFIGS,
            "",
            {
                "apiVersion": V,
                "kind": "MultiKueueConfig",
                "metadata": {"name": f"fleet-{suffix}"},
                "spec": {"clusters": [fl.cluster(w) for w in WORKERS]},
            },
        )
        await m.create(
            ADMISSION_CHECKS,
            "",
            {
                "apiVersion": V,
                "kind": "AdmissionCheck",
                "metadata": {"name": fl.check},
                "spec": {
                    "controllerName": CONTROLLER_NAME,
                    "parameters": {
                        "apiGroup": "kueue.x-k8s.io",
                        "kind": "MultiKueueConfig",
                        "name": f"fleet-{suffix}",
                    },
                },
            },
        )
        await quota(m, ns, suffix, manager_cpu, check=fl.check)
        for worker in WORKERS:
            w = fl.api(worker)
            await w.create(NAMESPACES, "", {"metadata": {"name": ns}})
            await quota(w, ns, suffix, worker_cpu.get(worker, "0"))
        try:
            yield fl
        finally:
            for which in list(fl.running):
                await fl.stop(which)
            for worker in WORKERS:
                with contextlib.suppress(Exception):
                    await m.delete(MULTIKUEUE_CLUSTERS, "", fl.cluster(worker))
            with contextlib.suppress(Exception):
                await m.delete(ADMISSION_CHECKS, "", fl.check)


async def quota(api: KubeObjects, ns: str, suffix: str, cpu: str, check: str = "") -> None:
    """Flavor, ClusterQueue (with ``check``) and LocalQueue ``lq`` in ``ns``."""
    await api.create(FLAVORS, "", flavor(f"flavor-{suffix}", {"pool": suffix}))
    queue = cluster_queue(f"cq-{suffix}", f"flavor-{suffix}", cpu)
    if check:
        queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    await api.create(CLUSTER_QUEUES, "", queue)
    await api.create(
        LOCAL_QUEUES,
        ns,
        {
            "apiVersion": V,
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": ns},
            "spec": {"clusterQueue": f"cq-{suffix}"},
        },
    )


def check_state(workload: dict[str, Any] | None, check: str) -> dict[str, Any]:
    """The entry of ``status.admissionChecks`` named ``check``, or {}."""
    for entry in ((workload or {}).get("status") or {}).get("admissionChecks") or []:
        if entry.get("name") == check:
            return dict(entry)
    return {}


async def manager_workload(fl: Fleet, job: dict[str, Any]) -> dict[str, Any] | None:
    """The manager's Workload of ``job``, by the name Kueue's job framework gives it."""
    return await fl.get("manager", WORKLOADS, job_workload_name(job))
