"""Jobs through Kueue's job integration, against a real API server (``kueuestream run --kubeconfig``).

No controller-manager runs here: Jobs get no pods, so a test marks a Job
Complete itself, as the Job controller would.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kueuestream.admission.jobs import workload_name
from kueuestream.agents.kube.rest import CLUSTER_QUEUES
from tests.cluster.kube_rig import (
    PRIORITY_CLASSES,
    cluster,
    condition,
    eventually,
    is_true,
    start_runtime,
    unique,
)
from tests.helpers import queued_job

pytestmark = pytest.mark.kube

REPO = Path(__file__).resolve().parents[2]

SPOT = [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]


async def test_a_job_runs_through_kueue_and_frees_its_quota_when_complete(
    kube_config: str, tmp_path: Path
) -> None:
    """JobReconciler.ReconcileGenericJob: Workload created for the Job (jobframework.ConstructWorkload),
    admitted, Job started with the flavor's node labels and tolerations (Job.RunWithPodSetsInfo);
    Job complete -> Workload Finished (workload/finish.Finish) -> the next Job admitted."""
    async with cluster(kube_config) as rig:
        q = await rig.quota("run", "1", node_labels={"instance": "spot"}, tolerations=SPOT)
        running = await start_runtime(rig.conn, tmp_path)
        try:
            first = await rig.job(queued_job(q.namespace, "first", q.local_queue))
            wl_name = workload_name("Job", "first", first["metadata"]["uid"])

            async def first_started() -> bool:
                current = await rig.read_job(first)
                return current["spec"].get("suspend") is False

            await eventually(first_started, "the first Job unsuspended")
            wl = await rig.workload_of(first)
            assert wl is not None and wl["metadata"]["name"] == wl_name
            [owner] = wl["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
                "Job",
                "first",
                first["metadata"]["uid"],
                True,
            )
            assert wl["spec"]["queueName"] == q.local_queue
            assert is_true(wl, "QuotaReserved") and is_true(wl, "Admitted")
            admission = wl["status"]["admission"]
            assert admission["clusterQueue"] == q.cluster_queue
            assert admission["podSetAssignments"][0]["flavors"] == {"cpu": q.flavor}
            pod = (await rig.read_job(first))["spec"]["template"]
            assert pod["spec"]["nodeSelector"] == {"instance": "spot"}
            assert pod["spec"]["tolerations"] == SPOT
            assert pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "main"

            second = await rig.job(queued_job(q.namespace, "second", q.local_queue))

            async def second_pending() -> bool:
                found = await rig.workload_of(second)
                cond = condition(found, "QuotaReserved")
                return cond is not None and cond["status"] == "False"

            await eventually(second_pending, "the second Job's Workload pending for quota")
            assert (await rig.read_job(second))["spec"]["suspend"] is True

            await rig.complete(first)

            async def first_finished() -> bool:
                return is_true(await rig.workload_of(first), "Finished")

            await eventually(first_finished, "the first Workload Finished")
            finished = condition(await rig.workload_of(first), "Finished")
            assert finished is not None and finished["reason"] == "Succeeded"

            async def second_started() -> bool:
                return (await rig.read_job(second))["spec"].get("suspend") is False

            await eventually(second_started, "the second Job unsuspended once the first completed")

            # The finished Workload lets go of Kueue's finalizer, so it can be deleted.
            async def finalizer_dropped() -> bool:
                found = await rig.workload_of(first)
                return found is not None and not found["metadata"].get("finalizers")

            await eventually(finalizer_dropped, "the finished Workload's finalizer removed")
        finally:
            await running.stop()


async def test_a_failed_job_finishes_its_workload_as_failed(kube_config: str, tmp_path: Path) -> None:
    """Job.Finished: a Failed condition finishes the Workload with reason Failed and the Job's message."""
    async with cluster(kube_config) as rig:
        q = await rig.quota("fail", "1")
        running = await start_runtime(rig.conn, tmp_path)
        try:
            created = await rig.job(queued_job(q.namespace, "doomed", q.local_queue))

            async def started() -> bool:
                return (await rig.read_job(created))["spec"].get("suspend") is False

            await eventually(started, "the Job unsuspended")
            await rig.complete(created, succeeded=False)

            async def failed() -> bool:
                return is_true(await rig.workload_of(created), "Finished")

            await eventually(failed, "the Workload Finished")
            finished = condition(await rig.workload_of(created), "Finished")
            assert finished is not None and (finished["reason"], finished["message"]) == (
                "Failed",
                "BackoffLimitExceeded",
            )
        finally:
            await running.stop()


async def test_eviction_suspends_the_job_and_restores_its_template(kube_config: str, tmp_path: Path) -> None:
    """JobReconciler "handle eviction": Job.Stop suspends and restores the pod template
    (Job.RestorePodSetsInfo), the reservation is cleared (UnsetQuotaReservationWithCondition),
    and only then does the preemptor get the quota."""
    async with cluster(kube_config) as rig:
        q = await rig.quota("evict", "1", node_labels={"instance": "on-demand"}, preemption="LowerPriority")
        high = unique("high")
        await rig.create(
            PRIORITY_CLASSES,
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": high},
                "value": 1000,
            },
        )
        running = await start_runtime(rig.conn, tmp_path)
        try:
            low = await rig.job(queued_job(q.namespace, "low", q.local_queue, node_selector={"disk": "ssd"}))
            original = (await rig.read_job(low))["spec"]["template"]

            async def low_started() -> bool:
                return (await rig.read_job(low))["spec"].get("suspend") is False

            await eventually(low_started, "the low-priority Job unsuspended")
            started = (await rig.read_job(low))["spec"]["template"]
            assert started["spec"]["nodeSelector"] == {"disk": "ssd", "instance": "on-demand"}

            urgent = await rig.job(queued_job(q.namespace, "urgent", q.local_queue, priority_class=high))

            async def urgent_started() -> bool:
                return (await rig.read_job(urgent))["spec"].get("suspend") is False

            await eventually(urgent_started, "the high-priority Job unsuspended")
            stopped = await rig.read_job(low)
            assert stopped["spec"]["suspend"] is True
            assert stopped["spec"]["template"]["spec"]["nodeSelector"] == original["spec"]["nodeSelector"]
            assert stopped["spec"]["template"]["metadata"].get("labels") == original["metadata"].get("labels")
            assert "kueue.x-k8s.io/stopping" not in (stopped["metadata"].get("annotations") or {})
            victim = await rig.workload_of(low)
            assert is_true(victim, "Evicted") and is_true(victim, "Preempted")
            assert not is_true(victim, "QuotaReserved") and "admission" not in victim["status"]
            requeued = condition(victim, "Requeued")
            assert requeued is not None and (requeued["status"], requeued["reason"]) == ("True", "Preempted")
        finally:
            await running.stop()


async def test_quota_raised_live_admits_the_waiting_job(kube_config: str, tmp_path: Path) -> None:
    """A ClusterQueue's nominal quota changed in the cluster is taken in at once."""
    async with cluster(kube_config) as rig:
        q = await rig.quota("live", "1")
        running = await start_runtime(rig.conn, tmp_path)
        try:
            jobs = [await rig.job(queued_job(q.namespace, f"j{i}", q.local_queue)) for i in range(2)]

            async def started() -> int:
                return sum([(await rig.read_job(j))["spec"].get("suspend") is False for j in jobs])

            async def one_started() -> bool:
                return await started() == 1

            await eventually(one_started, "one of two Jobs unsuspended")
            cq = await rig.get(CLUSTER_QUEUES, "", q.cluster_queue)
            assert cq is not None
            groups = cq["spec"]["resourceGroups"]
            groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = "2"
            await rig.api.patch(CLUSTER_QUEUES, "", q.cluster_queue, {"spec": {"resourceGroups": groups}})

            async def both_started() -> bool:
                return await started() == 2

            await eventually(both_started, "both Jobs unsuspended after the quota was raised")
        finally:
            await running.stop()


async def test_a_restart_resumes_without_deciding_again(kube_config: str, tmp_path: Path) -> None:
    """Stopped and started again on the same log: earlier Jobs are left as they are, no decision
    is made twice, and a Job created while it was down runs."""
    async with cluster(kube_config) as rig:
        q = await rig.quota("restart", "2")
        running = await start_runtime(rig.conn, tmp_path)
        first = await rig.job(queued_job(q.namespace, "before", q.local_queue))

        async def first_started() -> bool:
            return (await rig.read_job(first))["spec"].get("suspend") is False

        try:
            await eventually(first_started, "the first Job unsuspended")
            await running.runtime.settle()
            decided_before = running.decisions_by_partition()
            lists_before = running.watcher.stats.lists
        finally:
            await running.stop()

        second = await rig.job(queued_job(q.namespace, "while-down", q.local_queue))
        again = await start_runtime(rig.conn, tmp_path)
        try:

            async def second_started() -> bool:
                return (await rig.read_job(second))["spec"].get("suspend") is False

            await eventually(second_started, "the Job created while stopped unsuspended")
            await again.runtime.settle()
            decided_after = again.decisions_by_partition()
            new = []
            for before, after in zip(decided_before, decided_after, strict=True):
                assert after[: len(before)] == before
                new += after[len(before) :]
            wl_first = workload_name("Job", "before", first["metadata"]["uid"])
            assert [d for d in new if d.ref.name == wl_first] == []
            assert again.watcher.stats.relists == 0
            assert again.watcher.stats.lists == 0 and lists_before > 0
            ids = [(o.cause.shard, o.cause.offset, o.index) for o in again.outcomes()]
            assert len(ids) == len(set(ids)), "a decision was written twice"
        finally:
            await again.stop()


async def test_a_job_created_running_is_suspended_until_admitted(kube_config: str, tmp_path: Path) -> None:
    """Without a webhook a Job created with suspend: false is suspended once seen (step "job is
    unsuspended" of ReconcileGenericJob), and started when its Workload is admitted."""
    async with cluster(kube_config) as rig:
        q = await rig.quota("unsusp", "0")
        running = await start_runtime(rig.conn, tmp_path)
        try:
            body = queued_job(q.namespace, "eager", q.local_queue)
            body["spec"]["suspend"] = False
            eager = await rig.job(body)

            async def suspended() -> bool:
                return (await rig.read_job(eager))["spec"].get("suspend") is True

            await eventually(suspended, "the running Job suspended")
            found = await rig.workload_of(eager)
            assert found is not None and not is_true(found, "Admitted")
        finally:
            await running.stop()


async def test_an_api_server_restart_mid_stream_loses_nothing(kube_config: str, tmp_path: Path) -> None:
    """scripts/kube.sh restart-apiserver while Jobs go through: every watch drops and must resume,
    calls in flight fail and are retried; every Job still runs and nothing is decided twice."""
    async with cluster(kube_config) as rig:
        q = await rig.quota("restart-api", "4")
        running = await start_runtime(rig.conn, tmp_path)
        try:
            jobs = [await rig.job(queued_job(q.namespace, f"before-{i}", q.local_queue)) for i in range(2)]
            restart = await asyncio.create_subprocess_exec(
                "bash",
                str(REPO / "scripts" / "kube.sh"),
                "restart-apiserver",
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            _, err = await asyncio.wait_for(restart.communicate(), 180)
            assert restart.returncode == 0, err.decode()[-2000:]
            jobs += [await rig.job(queued_job(q.namespace, f"after-{i}", q.local_queue)) for i in range(2)]

            async def all_started() -> bool:
                return all([(await rig.read_job(j))["spec"].get("suspend") is False for j in jobs])

            await eventually(all_started, "every Job unsuspended after the API server restart", 120)
            await running.runtime.settle()
            mine = [d for d in running.decisions() if d.ref.namespace == q.namespace]
            admitted = [d.ref.name for d in mine if d.action.value == "Admitted"]
            assert sorted(admitted) == sorted(set(admitted)) and len(admitted) == 4
            ids = [(o.cause.shard, o.cause.offset, o.index) for o in running.outcomes()]
            assert len(ids) == len(set(ids)), "a decision was written twice"
        finally:
            await running.stop()
