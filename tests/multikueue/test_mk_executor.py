"""The MultiKueue executor, one test per action, against real API servers (a manager and a worker).

Each decision is applied as the dispatcher wrote it; each is applied twice to
show it is idempotent (a restart applies again every decision without an
outcome): upstream's remote client treats AlreadyExists and NotFound the same
way (``wlGroup.RemoveRemoteObjects`` ignores NotFound; ``syncToSingleCluster``
creates only what is missing).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from kueuestream.admission.multikueue.decisions import MultiKueueAction
from kueuestream.admission.multikueue.names import CONTROLLER_NAME, ORIGIN_LABEL, PREBUILT_WORKLOAD_LABEL
from kueuestream.admission.multikueue.objects import job_copy, ref, workload_copy
from kueuestream.agents.kube.api_calls import watch_lines
from kueuestream.agents.kube.client import connect
from kueuestream.agents.kube.crd_install import install_crds
from kueuestream.agents.kube.multikueue.executor import (
    ADMISSION_CHECKS,
    MULTIKUEUE_CLUSTERS,
    MultiKueueExecutor,
)
from kueuestream.agents.kube.rest import JOBS, WORKLOADS, KubeObjects, Resource
from kueuestream.streams import codec
from kueuestream.streams.schemas import MultiKueueApplied, MultiKueueDecision
from tests.conftest import MultiKueueServers
from tests.helpers import queued_job
from tests.kube.rig import namespace, unique

pytestmark = pytest.mark.kube

NAMESPACES = Resource("", "v1", "namespaces", "Namespace")


@dataclass
class Federation:
    manager: KubeObjects
    worker: KubeObjects
    ns: str  # in both clusters
    outcomes: list[MultiKueueApplied]
    executor: MultiKueueExecutor

    async def run(self, decision: MultiKueueDecision) -> MultiKueueApplied:
        """Submit ``decision`` at the next offset; its outcome."""
        offset = len(self.outcomes) + len(self.executor.done) + 1000
        self.executor.submit(offset, decision)
        await asyncio.wait_for(self.executor.idle(), 60)
        [outcome] = [o for o in self.outcomes if o.decision == offset]
        return outcome


@asynccontextmanager
async def federation(servers: MultiKueueServers) -> AsyncIterator[Federation]:
    async with (
        await connect(servers.manager.kubeconfig) as manager,
        await connect(servers.worker1.kubeconfig) as worker,
    ):
        await asyncio.gather(install_crds(manager), install_crds(worker))
        ns = await namespace(manager, "mk-exec")
        await KubeObjects(worker.api).create(NAMESPACES, "", {"metadata": {"name": ns}})
        outcomes: list[MultiKueueApplied] = []
        worker_objects = KubeObjects(worker.api)
        executor = MultiKueueExecutor(
            KubeObjects(manager.api),
            lambda name: worker_objects if name == "w1" else None,
            lambda name: name == "w1",
            outcomes.append,
        )
        try:
            yield Federation(KubeObjects(manager.api), worker_objects, ns, outcomes, executor)
        finally:
            await executor.close()


def decision(action: MultiKueueAction, **fields: Any) -> MultiKueueDecision:
    return MultiKueueDecision(time_ms=1, cause=0, action=action, **fields)


def check_ready(ns: str, message: str) -> MultiKueueDecision:
    """Check ``mk`` of Workload ``ns/wl`` Ready on worker ``w1``."""
    return decision(
        MultiKueueAction.SET_CHECK_STATE,
        namespace=ns,
        name="wl",
        check="mk",
        state="Ready",
        message=message,
        clusterName="w1",
    )


def manager_workload(ns: str, name: str) -> dict[str, Any]:
    pod = {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/job-uid": "u"}},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": pod}}]},
    }


async def get(objects: KubeObjects, resource: Resource, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return await objects.get(resource, ns, name)
    except Exception as exc:
        if getattr(exc, "status", None) == 404:
            return None
        raise


async def test_create_remote_makes_both_copies_once(multikueue_servers: MultiKueueServers) -> None:
    """syncToSingleCluster: the Workload copy, then the Job copy (suspended, prebuilt label, origin)."""
    async with federation(multikueue_servers) as fed:
        wl = manager_workload(fed.ns, "job-train-1")
        job = queued_job(fed.ns, "train", "lq")
        objects = [workload_copy(wl, "multikueue"), job_copy(job, "job-train-1", "multikueue")]
        create = decision(
            MultiKueueAction.CREATE_REMOTE,
            cluster="w1",
            namespace=fed.ns,
            name="job-train-1",
            objects=objects,
        )
        first = await fed.run(create)
        assert (first.outcome, first.message) == (
            "applied",
            f"created in cluster w1: Workload {fed.ns}/job-train-1, Job {fed.ns}/train",
        )
        remote_wl = await get(fed.worker, WORKLOADS, fed.ns, "job-train-1")
        remote_job = await get(fed.worker, JOBS, fed.ns, "train")
        assert remote_wl is not None and remote_job is not None
        assert remote_wl["metadata"]["labels"] == {ORIGIN_LABEL: "multikueue"}
        assert remote_job["spec"]["suspend"] is True
        assert remote_job["metadata"]["labels"][PREBUILT_WORKLOAD_LABEL] == "job-train-1"

        again = await fed.run(create)
        assert again.outcome == "unchanged"

        # Someone else's object of the same name is left alone.
        other = manager_workload(fed.ns, "job-other")
        await fed.worker.create(WORKLOADS, fed.ns, other)
        clash = decision(
            MultiKueueAction.CREATE_REMOTE,
            cluster="w1",
            namespace=fed.ns,
            name="job-other",
            objects=[workload_copy(other, "multikueue")],
        )
        refused = await fed.run(clash)
        assert refused.outcome == "conflict"
        assert "without our origin label" in refused.message
        left = await get(fed.worker, WORKLOADS, fed.ns, "job-other")
        assert left is not None and ORIGIN_LABEL not in left["metadata"]["labels"]


async def test_delete_remote_removes_job_then_workload(multikueue_servers: MultiKueueServers) -> None:
    """wlGroup.RemoveRemoteObjects: the Job copy (background propagation), then the Workload copy."""
    async with federation(multikueue_servers) as fed:
        wl = manager_workload(fed.ns, "job-gone-1")
        job = queued_job(fed.ns, "gone", "lq")
        await fed.worker.create(WORKLOADS, fed.ns, workload_copy(wl, "multikueue"))
        await fed.worker.create(JOBS, fed.ns, job_copy(job, "job-gone-1", "multikueue"))
        delete = decision(
            MultiKueueAction.DELETE_REMOTE,
            cluster="w1",
            namespace=fed.ns,
            name="job-gone-1",
            objects=[ref("Job", fed.ns, "gone"), ref("Workload", fed.ns, "job-gone-1")],
        )
        assert (await fed.run(delete)).outcome == "applied"
        assert await get(fed.worker, WORKLOADS, fed.ns, "job-gone-1") is None
        remaining = await get(fed.worker, JOBS, fed.ns, "gone")
        # No garbage collector runs here: a Job deleted in the background may linger, marked.
        assert remaining is None or remaining["metadata"].get("deletionTimestamp")
        assert (await fed.run(delete)).outcome in ("not-found", "applied")
        if remaining is None:
            assert (await fed.run(delete)).outcome == "not-found"


async def test_check_state_cluster_name_and_nominated(multikueue_servers: MultiKueueServers) -> None:
    """wlReconciler.reconcileGroup: the check Ready naming the cluster (status.clusterName), and
    the incremental dispatcher's status.nominatedClusterNames."""
    async with federation(multikueue_servers) as fed:
        await fed.manager.create(WORKLOADS, fed.ns, manager_workload(fed.ns, "wl"))
        nominate = decision(
            MultiKueueAction.SET_NOMINATED, namespace=fed.ns, name="wl", clusters=["w1", "w2"]
        )
        assert (await fed.run(nominate)).outcome == "applied"
        wl = await get(fed.manager, WORKLOADS, fed.ns, "wl")
        assert wl is not None and wl["status"]["nominatedClusterNames"] == ["w1", "w2"]
        assert (await fed.run(nominate)).outcome == "unchanged"

        ready = check_ready(fed.ns, 'The workload got reservation on "w1"')
        assert (await fed.run(ready)).outcome == "applied"
        wl = await get(fed.manager, WORKLOADS, fed.ns, "wl")
        assert wl is not None
        [entry] = wl["status"]["admissionChecks"]
        assert (entry["name"], entry["state"], entry["message"]) == ("mk", "Ready", ready.message)
        assert entry["lastTransitionTime"]
        assert wl["status"]["clusterName"] == "w1"
        assert (await fed.run(ready)).outcome == "unchanged"

        retry = decision(
            MultiKueueAction.SET_CHECK_STATE,
            namespace=fed.ns,
            name="wl",
            check="mk",
            state="Retry",
            message="lost",
        )
        assert (await fed.run(retry)).outcome == "applied"
        wl = await get(fed.manager, WORKLOADS, fed.ns, "wl")
        assert wl is not None and "clusterName" not in wl["status"]
        assert [e["state"] for e in wl["status"]["admissionChecks"]] == ["Retry"]

        gone = decision(MultiKueueAction.SET_NOMINATED, namespace=fed.ns, name="absent", clusters=["w1"])
        assert (await fed.run(gone)).outcome == "not-found"


async def test_sync_job_status_mirrors_the_worker_job(multikueue_servers: MultiKueueServers) -> None:
    """The job adapter's SyncJob: the manager Job's status becomes the worker Job's."""
    async with federation(multikueue_servers) as fed:
        await fed.manager.create(JOBS, fed.ns, queued_job(fed.ns, "train", "lq"))
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conditions = [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now, "lastProbeTime": now},
            {"type": "Complete", "status": "True", "lastTransitionTime": now, "lastProbeTime": now},
        ]
        remote = {
            "conditions": conditions,
            "startTime": now,
            "completionTime": now,
            "succeeded": 1,
            "ready": 0,
            "terminating": 0,
            "uncountedTerminatedPods": {},
        }
        sync = decision(
            MultiKueueAction.SYNC_JOB_STATUS, cluster="w1", namespace=fed.ns, name="train", object=remote
        )
        outcome = await fed.run(sync)
        assert outcome.outcome == "applied", outcome.message
        job = await get(fed.manager, JOBS, fed.ns, "train")
        assert job is not None
        assert job["status"]["succeeded"] == 1
        assert [c["type"] for c in job["status"]["conditions"]] == ["SuccessCriteriaMet", "Complete"]
        assert (await fed.run(sync)).outcome == "unchanged"


async def test_finish_marks_the_manager_workload_finished(multikueue_servers: MultiKueueServers) -> None:
    """workload/finish.Finish on the manager when the worker's copy finished."""
    async with federation(multikueue_servers) as fed:
        await fed.manager.create(WORKLOADS, fed.ns, manager_workload(fed.ns, "wl"))
        finish = decision(
            MultiKueueAction.FINISH, namespace=fed.ns, name="wl", reason="Succeeded", message="done in w1"
        )
        assert (await fed.run(finish)).outcome == "applied"
        wl = await get(fed.manager, WORKLOADS, fed.ns, "wl")
        assert wl is not None
        [cond] = [c for c in wl["status"]["conditions"] if c["type"] == "Finished"]
        assert (cond["status"], cond["reason"], cond["message"]) == ("True", "Succeeded", "done in w1")
        assert (await fed.run(finish)).outcome == "unchanged"


async def test_cluster_and_check_active_conditions(multikueue_servers: MultiKueueServers) -> None:
    """clustersReconciler.updateStatus and the MultiKueue AdmissionCheck's Active condition."""
    async with federation(multikueue_servers) as fed:
        cluster_name, check_name = unique("w"), unique("mk")
        await fed.manager.create(
            MULTIKUEUE_CLUSTERS,
            "",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "MultiKueueCluster",
                "metadata": {"name": cluster_name},
                "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "s"}}},
            },
        )
        await fed.manager.create(
            ADMISSION_CHECKS,
            "",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "AdmissionCheck",
                "metadata": {"name": check_name},
                "spec": {"controllerName": CONTROLLER_NAME},
            },
        )
        bad = decision(
            MultiKueueAction.SET_CLUSTER_STATUS,
            name=cluster_name,
            active=False,
            reason="BadKubeConfig",
            message='load client config failed: secrets "s" not found',
        )
        assert (await fed.run(bad)).outcome == "applied"
        found = await get(fed.manager, MULTIKUEUE_CLUSTERS, "", cluster_name)
        assert found is not None
        [cond] = found["status"]["conditions"]
        assert (cond["type"], cond["status"], cond["reason"]) == ("Active", "False", "BadKubeConfig")
        assert cond["message"] == bad.message
        assert (await fed.run(bad)).outcome == "unchanged"

        active = decision(
            MultiKueueAction.SET_CHECK_ACTIVE,
            name=check_name,
            active=True,
            reason="Active",
            message="The admission check is active",
        )
        assert (await fed.run(active)).outcome == "applied"
        found = await get(fed.manager, ADMISSION_CHECKS, "", check_name)
        assert found is not None
        [cond] = found["status"]["conditions"]
        assert (cond["type"], cond["status"], cond["reason"]) == ("Active", "True", "Active")


async def test_an_absent_worker_waits_and_an_unknown_one_is_unreachable(
    multikueue_servers: MultiKueueServers,
) -> None:
    async with (
        await connect(multikueue_servers.manager.kubeconfig) as manager,
        await connect(multikueue_servers.worker1.kubeconfig) as worker,
    ):
        await install_crds(worker)
        ns = await namespace(worker, "mk-exec")
        outcomes: list[MultiKueueApplied] = []
        worker_objects = KubeObjects(worker.api)
        back = asyncio.Event()
        executor = MultiKueueExecutor(
            KubeObjects(manager.api),
            lambda name: worker_objects if back.is_set() else None,
            lambda name: name == "w1",
            outcomes.append,
            retry_s=0.05,
        )
        try:
            copy = workload_copy(manager_workload(ns, "wl"), "multikueue")
            executor.submit(
                1,
                decision(
                    MultiKueueAction.CREATE_REMOTE, cluster="w1", namespace=ns, name="wl", objects=[copy]
                ),
            )
            executor.submit(
                2,
                decision(
                    MultiKueueAction.CREATE_REMOTE, cluster="gone", namespace=ns, name="wl", objects=[copy]
                ),
            )
            await asyncio.sleep(0.5)
            assert [(o.decision, o.outcome) for o in outcomes] == [(2, "unreachable")]
            assert executor.counters.retries > 0
            back.set()
            await asyncio.wait_for(executor.idle(), 30)
            assert [(o.decision, o.outcome) for o in outcomes] == [(2, "unreachable"), (1, "applied")]
            assert await worker_objects.get(WORKLOADS, ns, "wl")
        finally:
            await executor.close()


async def test_restore_applies_only_decisions_without_an_outcome(
    multikueue_servers: MultiKueueServers,
) -> None:
    async with federation(multikueue_servers) as fed:
        await fed.manager.create(WORKLOADS, fed.ns, manager_workload(fed.ns, "done"))
        await fed.manager.create(WORKLOADS, fed.ns, manager_workload(fed.ns, "todo"))
        logged = [
            (
                0,
                codec.encode(
                    decision(MultiKueueAction.SET_NOMINATED, namespace=fed.ns, name="done", clusters=["w1"])
                ),
            ),
            (
                1,
                codec.encode(
                    decision(MultiKueueAction.SET_NOMINATED, namespace=fed.ns, name="todo", clusters=["w1"])
                ),
            ),
        ]
        applied = [codec.encode(MultiKueueApplied(decision=0, outcome="applied"))]
        assert fed.executor.restore(logged, applied) == 1
        await asyncio.wait_for(fed.executor.idle(), 30)
        assert [(o.decision, o.outcome) for o in fed.outcomes] == [(1, "applied")]
        done = await get(fed.manager, WORKLOADS, fed.ns, "done")
        assert done is not None and "nominatedClusterNames" not in (done.get("status") or {})


async def test_check_ready_and_nominated_cleared_are_one_write(multikueue_servers: MultiKueueServers) -> None:
    """wlReconciler.syncAdmittingRemoteState sets the check Ready and clears
    status.nominatedClusterNames in one patch: waiting one after another in the
    Workload's lane, the two decisions are one status write, each with its outcome."""
    async with federation(multikueue_servers) as fed:
        created = await fed.manager.create(WORKLOADS, fed.ns, manager_workload(fed.ns, "wl"))
        nominate = decision(
            MultiKueueAction.SET_NOMINATED, namespace=fed.ns, name="wl", clusters=["w1", "w2"]
        )
        assert (await fed.run(nominate)).outcome == "applied"
        wl = await get(fed.manager, WORKLOADS, fed.ns, "wl")
        assert wl is not None
        since = wl["metadata"]["resourceVersion"]
        ready = check_ready(fed.ns, 'The workload was admitted on "w1"')
        cleared = decision(MultiKueueAction.SET_NOMINATED, namespace=fed.ns, name="wl", clusters=[])
        again = decision(MultiKueueAction.SET_NOMINATED, namespace=fed.ns, name="wl", clusters=[])
        for offset, d in enumerate((ready, cleared, again), start=500):
            fed.executor.submit(offset, d)
        await asyncio.wait_for(fed.executor.idle(), 60)
        assert [(o.decision, o.outcome) for o in fed.outcomes[1:]] == [
            (500, "applied"),
            (501, "applied"),
            (502, "unchanged"),
        ]
        wl = await get(fed.manager, WORKLOADS, fed.ns, "wl")
        assert wl is not None
        assert [e["state"] for e in wl["status"]["admissionChecks"]] == ["Ready"]
        assert wl["status"]["clusterName"] == "w1"
        assert "nominatedClusterNames" not in wl["status"]
        # Every write to the Workload since the nomination, as its watch shows them.
        path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{fed.ns}/workloads"
        query = [("fieldSelector", "metadata.name=wl"), ("resourceVersion", since)]
        writes = [
            e
            async for e in watch_lines(fed.manager.api, path, query, server_timeout_s=2)
            if e.get("type") == "MODIFIED"
        ]
        assert len(writes) == 1, [w["object"]["status"] for w in writes]
        assert created["metadata"]["uid"] == writes[0]["object"]["metadata"]["uid"]
