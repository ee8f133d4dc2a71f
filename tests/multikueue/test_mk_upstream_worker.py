"""MultiKueue with a worker that runs upstream Kueue: only the Workload and Job copies cross clusters.

Our manager (``run --kubeconfig``) federates two workers: ``w1`` runs our runtime
with no quota, ``w2`` is a fourth API server where upstream Kueue's own controller
manager (``scripts/kueue.sh``, v0.19.2) admits and starts the copies. No Job
controller runs: the test marks the worker's Job succeeded itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueuestream.admission.job_workload import job_workload_name
from kueuestream.agents.kube.rest import JOBS, WORKLOADS
from tests.cluster.kube_rig import condition, eventually, is_true
from tests.conftest import KubeInstance, MultiKueueServers
from tests.multikueue.fleet import Fleet, check_state, fleet, manager_workload, now
from tests.multikueue.upstream_kueue import upstream_kueue

pytestmark = pytest.mark.kube


MESSAGE = "all pods of the upstream worker's Job succeeded"


async def succeed(fl: Fleet, worker: str, name: str, message: str) -> None:
    """Mark the worker's Job succeeded with ``message``, as its Job controller would (none runs here)."""
    stamp = now()
    conditions = [
        {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": stamp, "lastProbeTime": stamp},
        {
            "type": "Complete",
            "status": "True",
            "lastTransitionTime": stamp,
            "lastProbeTime": stamp,
            "message": message,
        },
    ]
    status = {"conditions": conditions, "startTime": stamp, "completionTime": stamp, "succeeded": 1}
    await fl.api(worker).patch(JOBS, fl.ns, name, {"status": status}, subresource="status")


async def test_upstream_worker_admits_runs_and_finishes(
    multikueue_servers: MultiKueueServers, upstream_worker_server: KubeInstance, tmp_path: Path
) -> None:
    """Upstream's worker side, unchanged: its scheduler (``Scheduler.schedule``) reserves quota
    for our Workload copy in its ClusterQueue and the workload controller sets ``Admitted``
    (``workload.SyncAdmittedCondition``); its Job reconciler
    (``JobReconciler.ReconcileGenericJob``) takes the copy named by the Job's
    ``kueue.x-k8s.io/prebuilt-workload-name`` label as the Job's Workload
    (``ensurePrebuiltWorkloadInSync`` finds it equivalent) and unsuspends the Job
    (``startJob``); a succeeded Job finishes that Workload (``Job.Finished``,
    ``workloadfinish.Finish``: reason Succeeded, the Complete condition's message). Our
    manager follows ``wlReconciler.reconcileGroup``: the copy admitted in w2 wins, the check
    is Ready naming w2, the copies in w1 are deleted, and the worker's finished Workload
    finishes the manager's (same reason and message) and frees its quota."""
    ours = multikueue_servers
    servers = MultiKueueServers(ours.manager, ours.worker1, upstream_worker_server)
    with upstream_kueue(upstream_worker_server.kubeconfig, tmp_path / "upstream") as kueue:
        async with fleet(
            servers, tmp_path, worker_cpu={"w1": "0", "w2": "4"}, upstream_workers=("w2",)
        ) as fl:
            await fl.start_worker("w1")
            manager = await fl.start_manager()
            first = await fl.job("first")
            wl_name = job_workload_name(first)

            async def ready() -> bool:
                return check_state(await manager_workload(fl, first), fl.check).get("state") == "Ready"

            await eventually(ready, "the MultiKueue check Ready", 90)
            wl = await manager_workload(fl, first)
            assert wl is not None
            assert fl.cluster("w2") in check_state(wl, fl.check)["message"]
            assert wl["status"]["clusterName"] == fl.cluster("w2")
            copy = await fl.get("w2", WORKLOADS, wl_name)
            assert is_true(copy or {}, "QuotaReserved"), kueue.log_tail()
            assert copy is not None
            assert copy["status"]["admission"]["clusterQueue"] == f"cq-{fl.suffix}"

            async def w1_clean() -> bool:
                return await fl.copies("w1") == ([], [])

            await eventually(w1_clean, "the copies in w1 deleted")

            async def remote_started() -> bool:
                found = await fl.get("w2", JOBS, "first")
                return found is not None and found["spec"].get("suspend") is False

            await eventually(remote_started, "upstream Kueue unsuspended its copy of the Job", 60)
            remote_job = await fl.get("w2", JOBS, "first")
            assert remote_job is not None
            # Upstream's startJob injects the admitted flavor's node labels into the pod template.
            assert remote_job["spec"]["template"]["spec"].get("nodeSelector") == {"pool": fl.suffix}
            await manager.runtime.settle()
            assert (await fl.get("manager", JOBS, "first") or {})["spec"]["suspend"] is True

            second = await fl.job("second")

            async def second_waits() -> bool:
                cond = condition(await manager_workload(fl, second), "QuotaReserved")
                return cond is not None and cond["status"] == "False"

            await eventually(second_waits, "the second Job waiting for the manager's quota")

            await succeed(fl, "w2", "first", MESSAGE)

            async def finished() -> bool:
                return is_true(await manager_workload(fl, first), "Finished")

            await eventually(finished, "the manager's Workload Finished", 60)
            # Upstream's Job.Finished takes the Complete condition's message, and workloadfinish.Finish
            # puts it on the copy; the manager's Workload finishes with the copy's reason and message.
            done = condition(await manager_workload(fl, first), "Finished")
            assert done is not None
            assert (done["reason"], done["message"]) == ("Succeeded", MESSAGE), kueue.log_tail()
            mirrored = await fl.get("manager", JOBS, "first")
            assert mirrored is not None
            assert mirrored["status"]["succeeded"] == 1

            async def second_reserved() -> bool:
                return is_true(await manager_workload(fl, second), "QuotaReserved")

            await eventually(second_reserved, "the second Job's quota reserved once the first finished")
