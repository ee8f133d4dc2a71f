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
from tests.multikueue.fleet import check_state, fleet, manager_workload

pytestmark = pytest.mark.kube


async def test_dispatch_first_admit_wins_and_completion_flows_back(
    multikueue_servers: MultiKueueServers, tmp_path: Path
) -> None:
    """wlReconciler.reconcileGroup (nominateAndSynchronizeWorkers, syncToSingleCluster): copies in
    both workers; w2 has room and reserves first, so the copy in w1 is deleted and the check is
    Ready naming w2; the manager's Job stays suspended, though its Workload is Admitted (the job
    integration's MultiKueue rule); the worker Job's status is mirrored
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

        # The engine admits once it sees the check Ready: a write of its own after the executor's.
        async def admitted() -> bool:
            return is_true(await manager_workload(fl, first) or {}, "Admitted")

        await eventually(admitted, "the manager's Workload Admitted", 30)

        async def w1_clean() -> bool:
            return await fl.copies("w1") == ([], [])

        await eventually(w1_clean, "the copies in w1 deleted")

        async def w2_runs() -> bool:
            return await fl.copies("w2") == ([wl_name], ["first"])

        await eventually(w2_runs, "the Workload and Job copies in w2")
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
        creates = [
            (d.cluster, [o["kind"] for o in d.objects])
            for d in decisions
            if d.action == MultiKueueAction.CREATE_REMOTE and d.name == wl_name
        ]
        # Workload copies in both workers; the Job copy only in the winner (the job adapter's SyncJob).
        assert sorted(creates) == [
            (fl.cluster("w1"), ["Workload"]),
            (fl.cluster("w2"), ["Job"]),
            (fl.cluster("w2"), ["Workload"]),
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


async def test_lost_worker_requeues_to_the_other_and_its_stale_copy_goes(
    multikueue_servers: MultiKueueServers, tmp_path: Path
) -> None:
    """workerLostTimeout (wlReconciler.reconcileGroup, the admitting worker not connected): after
    the timeout the check goes Retry, the manager's Workload is evicted and requeued once, and runs
    on the other worker; when the lost worker comes back its stale copy is deleted."""
    async with fleet(
        multikueue_servers, tmp_path, worker_cpu={"w1": "4", "w2": "4"}, lost_timeout="4s"
    ) as fl:
        await fl.start_worker("w1")
        await fl.start_worker("w2")
        await fl.start_manager()
        job = await fl.job("train")
        wl_name = job_workload_name(job)

        async def ready_on() -> str:
            wl = await manager_workload(fl, job)
            if check_state(wl, fl.check).get("state") != "Ready":
                return ""
            return str((wl or {}).get("status", {}).get("clusterName", ""))

        async def ready() -> bool:
            return bool(await ready_on())

        await eventually(ready, "Ready on a worker", 90)
        winner_cluster = await ready_on()
        winner = "w1" if winner_cluster == fl.cluster("w1") else "w2"
        other = "w2" if winner == "w1" else "w1"
        assert (await fl.copies(winner))[0] == [wl_name]

        instance = fl.instance(winner)
        instance.stop_apiserver()
        try:

            async def moved() -> bool:
                return await ready_on() == fl.cluster(other)

            await eventually(moved, f"the Workload running on {other} after workerLostTimeout", 120)

            async def runs_on_other() -> bool:
                return await fl.copies(other) == ([wl_name], ["train"])

            await eventually(runs_on_other, f"the Workload and Job copies in {other}", 30)
            # One eviction, one requeue: the reset check (resetChecksOnEviction) starts the next
            # reservation Pending, so the Workload is not evicted again at each reservation.
            actions = fl.running["manager"].engine_actions(fl.ns, wl_name)
            assert actions.count("Evicted") == 1, actions
        finally:
            instance.start_apiserver()

        async def stale_gone() -> bool:
            return await fl.copies(winner) == ([], [])

        await eventually(stale_gone, f"the stale copy in {winner} deleted once it is back", 120)
        assert await ready_on() == fl.cluster(other)


async def test_manager_restart_mid_dispatch_creates_no_duplicates(
    multikueue_servers: MultiKueueServers, tmp_path: Path
) -> None:
    """A restarted manager resumes from its log: the dispatcher's state is rebuilt from kueue.watch
    (no decision made twice) and the executor applies only decisions without an outcome, an
    existing copy with our origin counting as done."""
    async with fleet(multikueue_servers, tmp_path, worker_cpu={"w1": "0", "w2": "0"}) as fl:
        await fl.start_worker("w1")
        await fl.start_worker("w2")
        manager = await fl.start_manager()
        job = await fl.job("train")
        wl_name = job_workload_name(job)

        async def dispatched() -> bool:
            return any(
                d.action == MultiKueueAction.CREATE_REMOTE and d.name == wl_name for d in manager.decisions()
            )

        await eventually(dispatched, "a CreateRemote decision in the log", 90)
        await fl.stop("manager")
        manager = await fl.start_manager()

        async def both_copies() -> bool:
            found = [await fl.copies(w) for w in ("w1", "w2")]
            return found == [([wl_name], [])] * 2

        await eventually(both_copies, "one copy in each worker", 60)
        await manager.runtime.settle()
        decisions = manager.decisions()
        creates = sorted(
            d.cluster for d in decisions if d.action == MultiKueueAction.CREATE_REMOTE and d.name == wl_name
        )
        assert creates == [fl.cluster("w1"), fl.cluster("w2")]
        create_offsets = {
            i
            for i, d in enumerate(decisions)
            if d.action == MultiKueueAction.CREATE_REMOTE and d.name == wl_name
        }
        outcomes = [o for o in manager.outcomes() if o.decision in create_offsets]
        assert sorted(o.decision for o in outcomes) == sorted(create_offsets)
        assert {o.outcome for o in outcomes} <= {"applied", "unchanged"}

        # The restarted manager carries on: w2 gets room, reserves, and the check becomes Ready there.
        from tests.cluster.kube_rig import CLUSTER_QUEUES

        patch = {
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {
                                "name": f"flavor-{fl.suffix}",
                                "resources": [{"name": "cpu", "nominalQuota": "4"}],
                            }
                        ],
                    }
                ]
            }
        }
        await fl.api("w2").patch(CLUSTER_QUEUES, "", f"cq-{fl.suffix}", patch)

        async def ready_on_w2() -> bool:
            wl = await manager_workload(fl, job)
            return check_state(wl, fl.check).get("state") == "Ready" and (wl or {})["status"].get(
                "clusterName"
            ) == fl.cluster("w2")

        await eventually(ready_on_w2, "Ready on w2 after the restart", 90)


async def test_incremental_dispatcher_nominates_in_order(
    multikueue_servers: MultiKueueServers, tmp_path: Path
) -> None:
    """workloaddispatcher's incremental dispatcher: the first round nominates the first
    stepSize clusters of the MultiKueueConfig (status.nominatedClusterNames), and copies go
    only there."""
    async with fleet(
        multikueue_servers,
        tmp_path,
        worker_cpu={"w1": "0", "w2": "0"},
        dispatcher="kueue.x-k8s.io/multikueue-dispatcher-incremental",
        step=1,
    ) as fl:
        await fl.start_worker("w1")
        await fl.start_manager()
        job = await fl.job("train")
        wl_name = job_workload_name(job)

        async def nominated() -> bool:
            wl = await manager_workload(fl, job)
            return ((wl or {}).get("status") or {}).get("nominatedClusterNames") == [fl.cluster("w1")]

        await eventually(nominated, "w1 nominated first", 90)

        async def in_w1() -> bool:
            return await fl.copies("w1") == ([wl_name], [])

        await eventually(in_w1, "the copy in w1")
        await asyncio.sleep(2)
        assert await fl.copies("w2") == ([], [])


async def test_deleting_the_manager_job_removes_every_copy(
    multikueue_servers: MultiKueueServers, tmp_path: Path
) -> None:
    """wlReconciler.Reconcile for a Workload whose Job is gone: every remote copy is deleted."""
    async with fleet(multikueue_servers, tmp_path, worker_cpu={"w1": "0", "w2": "0"}) as fl:
        await fl.start_worker("w1")
        await fl.start_worker("w2")
        await fl.start_manager()
        job = await fl.job("train")
        wl_name = job_workload_name(job)

        async def both_copies() -> bool:
            found = [await fl.copies(w) for w in ("w1", "w2")]
            return found == [([wl_name], [])] * 2

        await eventually(both_copies, "a copy in each worker", 90)
        await fl.api("manager").delete(JOBS, fl.ns, "train", "Background")

        async def none_left() -> bool:
            found = [await fl.copies(w) for w in ("w1", "w2")]
            return found == [([], [])] * 2

        await eventually(none_left, "every copy deleted", 60)


async def test_garbage_collector_removes_orphaned_copies(
    multikueue_servers: MultiKueueServers, tmp_path: Path
) -> None:
    """MultiKueueGC (runGC): objects with our origin label whose manager Workload is gone are
    deleted every gcInterval (2s here); objects of another origin are left alone."""
    async with fleet(multikueue_servers, tmp_path, worker_cpu={"w1": "0", "w2": "0"}) as fl:
        await fl.start_manager()
        pod = {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}

        def orphan(name: str, origin: str) -> dict[str, Any]:
            return {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {
                    "name": name,
                    "namespace": fl.ns,
                    "labels": {"kueue.x-k8s.io/multikueue-origin": origin},
                },
                "spec": {
                    "queueName": "lq",
                    "podSets": [{"name": "main", "count": 1, "template": {"spec": pod}}],
                },
            }

        await fl.api("w1").create(WORKLOADS, fl.ns, orphan("ours", fl.origin))
        await fl.api("w1").create(WORKLOADS, fl.ns, orphan("theirs", "another-manager"))

        async def collected() -> bool:
            return await fl.get("w1", WORKLOADS, "ours") is None

        await eventually(collected, "the orphaned copy deleted", 60)
        assert await fl.get("w1", WORKLOADS, "theirs") is not None
