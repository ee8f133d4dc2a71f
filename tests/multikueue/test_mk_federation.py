"""MultiKueue end to end: a manager and two workers, three real API servers, each with its runtime.

The manager runs ``run --kubeconfig`` with its MultiKueue side (worker links,
dispatcher, executor); each worker runs ``run --kubeconfig`` alone and admits
the copies with its own engine. No Job controller runs: a test marks a
worker's Job Complete itself.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest

from kueuestream.admission.job_workload import job_workload_name
from kueuestream.admission.multikueue.decisions import MultiKueueAction
from kueuestream.agents.audit.replay import replay
from kueuestream.agents.kube.multikueue.executor import MULTIKUEUE_CLUSTERS
from kueuestream.agents.kube.rest import JOBS, WORKLOADS
from tests.cluster.kube_rig import condition, eventually, is_true
from tests.conftest import MultiKueueServers
from tests.multikueue.fleet import Fleet, fleet

pytestmark = pytest.mark.kube


def check_state(workload: dict[str, Any] | None, check: str) -> dict[str, Any]:
    for entry in ((workload or {}).get("status") or {}).get("admissionChecks") or []:
        if entry.get("name") == check:
            return dict(entry)
    return {}


async def manager_workload(fl: Fleet, job: dict[str, Any]) -> dict[str, Any] | None:
    return await fl.get("manager", WORKLOADS, job_workload_name(job))


async def test_dispatch_first_admit_wins_and_completion_flows_back(
    multikueue_servers: MultiKueueServers, tmp_path: Path
) -> None:
    """wlReconciler.reconcileGroup (nominateAndSynchronizeWorkers, syncToSingleCluster): copies in
    both workers; w2 has room and reserves first, so the copy in w1 is deleted and the check is
    Ready naming w2; the manager's Job stays suspended; the worker Job's status is mirrored
    (job adapter SyncJob) and its completion finishes the manager's Workload (workload/finish),
    freeing the manager's quota for the next Job. replay reproduces every dispatch decision."""
    async with fleet(multikueue_servers, tmp_path, worker_cpu={"w1": "0", "w2": "4"}) as fl:
        await fl.start_worker("w1")
        await fl.start_worker("w2")
        manager = await fl.start_manager()
        first = await fl.job("first")
        wl_name = job_workload_name(first)

        async def ready() -> bool:
            return check_state(await manager_workload(fl, first), fl.check).get("state") == "Ready"

        await eventually(ready, "the MultiKueue check Ready", 90)
        wl = await manager_workload(fl, first)
        assert wl is not None
        entry = check_state(wl, fl.check)
        assert fl.cluster("w2") in entry["message"]
        assert wl["status"]["clusterName"] == fl.cluster("w2")
        assert is_true(wl, "Admitted")

        async def w1_clean() -> bool:
            return await fl.copies("w1") == ([], [])

        await eventually(w1_clean, "the copies in w1 deleted")
        assert await fl.copies("w2") == ([wl_name], ["first"])
        remote_job = await fl.get("w2", JOBS, "first")
        assert remote_job is not None

        async def remote_started() -> bool:
            found = await fl.get("w2", JOBS, "first")
            return found is not None and found["spec"].get("suspend") is False

        await eventually(remote_started, "w2's runtime started its copy of the Job")
        await manager.runtime.settle()
        assert (await fl.get("manager", JOBS, "first") or {})["spec"]["suspend"] is True

        second = await fl.job("second")

        async def second_waits() -> bool:
            found = await manager_workload(fl, second)
            cond = condition(found, "QuotaReserved")
            return cond is not None and cond["status"] == "False"

        await eventually(second_waits, "the second Job waiting for the manager's quota")

        await fl.complete_remote_job("w2", "first")

        async def finished() -> bool:
            return is_true(await manager_workload(fl, first), "Finished")

        await eventually(finished, "the manager's Workload Finished")
        mirrored = await fl.get("manager", JOBS, "first")
        assert mirrored is not None
        assert [c["type"] for c in mirrored["status"]["conditions"]] == ["SuccessCriteriaMet", "Complete"]
        assert mirrored["status"]["succeeded"] == 1

        async def second_reserved() -> bool:
            return is_true(await manager_workload(fl, second), "QuotaReserved")

        await eventually(second_reserved, "the second Job's quota reserved once the first finished")

        decisions = manager.decisions()
        creates = [(d.cluster, d.name) for d in decisions if d.action == MultiKueueAction.CREATE_REMOTE]
        assert sorted(c for c in creates if c[1] == wl_name) == [
            (fl.cluster("w1"), wl_name),
            (fl.cluster("w2"), wl_name),
        ]
        await fl.stop("manager")
        out = io.StringIO()
        assert await asyncio.to_thread(replay, str(tmp_path / "manager"), out=out) == 0, out.getvalue()
        assert "MultiKueue decisions reproduced byte for byte" in out.getvalue()


async def test_bad_kubeconfig_shows_inactive_cluster(
    multikueue_servers: MultiKueueServers, tmp_path: Path
) -> None:
    """clustersReconciler.Reconcile: a kubeconfig that cannot be used sets Active=False with the
    loader's reason (InsecureKubeConfig for content that is not a kubeconfig)."""
    async with fleet(
        multikueue_servers,
        tmp_path,
        worker_cpu={"w1": "1", "w2": "1"},
        kubeconfigs={"w1": b"not: [a kubeconfig"},
    ) as fl:
        await fl.start_manager()

        async def reported() -> bool:
            found = await fl.get("manager", MULTIKUEUE_CLUSTERS, fl.cluster("w1"), ns="")
            return condition(found, "Active") is not None

        await eventually(reported, "w1's Active condition")
        found = await fl.get("manager", MULTIKUEUE_CLUSTERS, fl.cluster("w1"), ns="")
        cond = condition(found, "Active") or {}
        assert (cond["status"], cond["reason"]) == ("False", "InsecureKubeConfig")
        assert "not valid YAML" in cond["message"]

        async def w2_active() -> bool:
            found = await fl.get("manager", MULTIKUEUE_CLUSTERS, fl.cluster("w2"), ns="")
            return is_true(found, "Active")

        await eventually(w2_active, "w2 Active")
