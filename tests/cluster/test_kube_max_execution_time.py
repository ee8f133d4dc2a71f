"""A Job's maximum execution time on a real API server (``run --kubeconfig``).

Kueue's job framework gives the Workload the Job's
``kueue.x-k8s.io/max-exec-time-seconds`` label as
``spec.maximumExecutionTimeSeconds`` (``MaximumExecutionTimeSecondsForObject``);
its workload controller deactivates the Workload once admitted that long
(``reconcileMaxExecutionTime``), which suspends the Job and frees its quota.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cluster.kube_rig import cluster, condition, eventually, is_true, start_runtime
from tests.helpers import queued_job

pytestmark = pytest.mark.kube


async def test_a_job_out_of_time_is_suspended_and_its_quota_goes_to_the_next(
    kube_config: str, tmp_path: Path
) -> None:
    async with cluster(kube_config) as rig:
        q = await rig.quota("maxexec", "1")
        running = await start_runtime(rig.conn, tmp_path)
        try:
            capped_job = queued_job(q.namespace, "capped", q.local_queue)
            capped_job["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "2"
            capped = await rig.job(capped_job)

            async def started(job: dict[str, Any]) -> bool:
                return (await rig.read_job(job))["spec"].get("suspend") is False

            await eventually(lambda: started(capped), "the capped Job started")
            waiting = await rig.job(queued_job(q.namespace, "waiting", q.local_queue))
            workload: dict[str, Any] = {}

            async def out_of_time() -> bool:
                nonlocal workload
                workload = await rig.workload_of(capped) or {}
                evicted = condition(workload, "Evicted") or {}
                return workload.get("spec", {}).get("active") is False and evicted.get("reason") == (
                    "DeactivatedDueToMaximumExecutionTimeExceeded"
                )

            await eventually(
                out_of_time,
                "the capped Workload deactivated",
                describe=lambda: f"its Workload: {workload.get('spec')} {workload.get('status')}",
            )
            assert workload["spec"]["maximumExecutionTimeSeconds"] == 2
            await eventually(lambda: started(waiting), "the waiting Job started in its place")
            assert (await rig.read_job(capped))["spec"]["suspend"] is True
            found = await rig.workload_of(capped) or {}
            assert not is_true(found, "QuotaReserved")
            assert found["status"]["accumulatedPastExecutionTimeSeconds"] >= 2
        finally:
            await running.stop()
