"""LimitRanges and RuntimeClasses on a real API server, watched by ``run --kubeconfig``.

Kueue's workload controller watches both and reads a Workload's pods as the
API server would admit them (``workload.AdjustResources``): the Workload made
for a Job whose container asks for nothing is charged its namespace's
``defaultRequest`` plus its RuntimeClass's pod overhead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kueuestream.agents.kube.rest import Resource
from tests.cluster.kube_rig import cluster, condition, eventually, is_true, start_runtime, unique
from tests.helpers import queued_job

pytestmark = pytest.mark.kube

LIMIT_RANGES = Resource("", "v1", "limitranges", "LimitRange")
RUNTIME_CLASSES = Resource("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass")


def bare_job(namespace: str, name: str, runtime_class: str = "") -> dict[str, Any]:
    job = queued_job(namespace, name, "lq")
    pod = job["spec"]["template"]["spec"]
    del pod["containers"][0]["resources"]
    if runtime_class:
        pod["runtimeClassName"] = runtime_class
    return job


async def test_defaults_and_overhead_from_the_cluster_are_charged(kube_config: str, tmp_path: Path) -> None:
    async with cluster(kube_config) as rig:
        q = await rig.quota("limits", "2")
        await rig.create(
            LIMIT_RANGES,
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": {"name": "defaults", "namespace": q.namespace},
                "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "1"}}]},
            },
        )
        sandbox = unique("sandbox")
        await rig.create(
            RUNTIME_CLASSES,
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": sandbox},
                "handler": "kata",
                "overhead": {"podFixed": {"cpu": "250m"}},
            },
        )
        running = await start_runtime(rig.conn, tmp_path)
        try:
            first = await rig.job(bare_job(q.namespace, "sandboxed", sandbox))
            admitted: dict[str, Any] = {}

            async def first_admitted() -> bool:
                nonlocal admitted
                admitted = await rig.workload_of(first) or {}
                return is_true(admitted, "QuotaReserved")

            await eventually(
                first_admitted,
                "the sandboxed Job's Workload admitted",
                describe=lambda: f"its Workload: {admitted.get('status')}",
            )
            # Only now: made in the same second, the two would tie on creation time and the
            # smaller one might go first, leaving no room for the sandboxed one.
            second = await rig.job(bare_job(q.namespace, "plain"))
            [assignment] = admitted["status"]["admission"]["podSetAssignments"]
            assert assignment["resourceUsage"] == {"cpu": "1250m"}

            async def second_waits() -> bool:
                cond = condition(await rig.workload_of(second), "QuotaReserved")
                return cond is not None and cond["status"] == "False" and "more needed" in cond["message"]

            await eventually(
                second_waits,
                "the plain Job's Workload waiting for quota",
                describe=lambda: f"the first Workload's status: {admitted.get('status')}",
            )
            cond = condition(await rig.workload_of(second), "QuotaReserved")
            assert cond is not None
            # 1 cpu asked for (the default request), 750m left.
            assert cond["message"].endswith(
                f"insufficient unused quota for cpu in flavor {q.flavor}, 250m more needed"
            )
        finally:
            await running.stop()
