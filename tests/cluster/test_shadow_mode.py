"""Shadow mode against the real API server: the test plays Kueue, writing Workload status itself.

Kueue writes an admitted Workload's ``status.admission`` and its ``QuotaReserved``
and ``Admitted`` conditions (``workload.SetQuotaReservation`` and
``workload.SyncAdmittedCondition`` in ``pkg/workload``), and a pending one's
``QuotaReserved=False`` with reason ``Pending`` (``workload.UnsetQuotaReservationWithCondition``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from kueuestream.agents.kube.rest import WORKLOADS
from kueuestream.agents.kube.runtime import Observed, open_cluster, serve
from kueuestream.agents.kube.shadow import ShadowComparison, ShadowDifferences
from kueuestream.agents.kube.watch_service import WatchOptions
from kueuestream.streams.file_log import FileLog
from tests.cluster.kube_rig import Quota, Rig, cluster, eventually
from tests.cluster.test_metrics_endpoint import scrape, value, workload

pytestmark = pytest.mark.kube
NOW = "2026-01-01T00:00:00Z"


def admitted(cluster_queue: str, flavor: str) -> dict[str, Any]:
    """The status Kueue writes when it admits a one-pod-set, 1 cpu Workload."""
    return {
        "admission": {
            "clusterQueue": cluster_queue,
            "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": flavor}, "resourceUsage": {"cpu": "1"}, "count": 1}
            ],
        },
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": f"Quota reserved in ClusterQueue {cluster_queue}",
                "lastTransitionTime": NOW,
            },
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "The workload is admitted",
                "lastTransitionTime": NOW,
            },
        ],
    }


async def write_status(rig: Rig, q: Quota, name: str, status: dict[str, Any]) -> None:
    live = await rig.get(WORKLOADS, q.namespace, name)
    assert live is not None
    body = {"metadata": {"resourceVersion": live["metadata"]["resourceVersion"]}, "status": status}
    await rig.api.patch(WORKLOADS, q.namespace, name, body, subresource="status")


async def test_shadow_reports_only_where_the_other_writer_disagrees(kube_config: str, tmp_path: Path) -> None:
    """Agreement gives no difference; a different flavor, and an admission where we keep the
    Workload pending, are reported by Workload and field, in the table, the JSON report and the
    metric; nothing is written to the cluster by us."""
    async with cluster(kube_config) as rig:
        q = await rig.quota("shadow", "1")
        lines: list[str] = []
        report_file = tmp_path / "report.json"
        shadow = ShadowComparison(lines.append, report_file)
        observed = Observed(port=0)
        observed.registry.register(ShadowDifferences(shadow))
        observed.endpoint.start()
        port = observed.endpoint.port
        log = FileLog(tmp_path / "log", fsync=False)
        task: asyncio.Task[None] | None = None
        try:
            runtime, watcher = await open_cluster(
                rig.conn, log, WatchOptions(kubeconfig="", cluster="test"), shadow=shadow
            )
            task = asyncio.create_task(serve(runtime, watcher))
            await asyncio.wait_for(watcher.synced.wait(), 120)
            key_a, key_b = (q.namespace, "a"), (q.namespace, "b")

            # The API server holds other tests' Workloads too: look at this test's only.
            def mine(report: dict[str, Any]) -> list[dict[str, Any]]:
                return [w for w in report["workloads"] if w["namespace"] == q.namespace]

            def differing_here() -> dict[tuple[str, str], dict[str, tuple[str, str]]]:
                return {k: v for k, v in shadow.differing.items() if k[0] == q.namespace}

            def elsewhere(field: str) -> int:
                return sum(field in v for k, v in shadow.differing.items() if k[0] != q.namespace)

            await rig.create(WORKLOADS, workload(q.namespace, "a", "1", q.local_queue))

            async def decided(key: tuple[str, str]) -> bool:
                return key in shadow.ours

            await eventually(lambda: decided(key_a), "our decision about a")
            assert shadow.ours[key_a].admitted
            # Kueue agrees: admitted in the same ClusterQueue on the same flavor.
            await write_status(rig, q, "a", admitted(q.cluster_queue, q.flavor))

            async def compared(key: tuple[str, str]) -> bool:
                return key in shadow.theirs

            await eventually(lambda: compared(key_a), "Kueue's status of a seen")
            assert differing_here() == {}
            report = orjson.loads(report_file.read_bytes())
            assert mine(report) == [] and key_a in shadow.compared

            # Kueue moves it to another flavor: one difference, flavors.
            await write_status(rig, q, "a", admitted(q.cluster_queue, "other-flavor"))

            async def differs(key: tuple[str, str]) -> bool:
                return key in shadow.differing

            await eventually(lambda: differs(key_a), "the flavor difference of a")
            assert shadow.differing[key_a] == {"flavors": (f"main: cpu={q.flavor}", "main: cpu=other-flavor")}
            report = orjson.loads(report_file.read_bytes())
            assert mine(report) == [
                {
                    "namespace": q.namespace,
                    "name": "a",
                    "differences": [
                        {
                            "field": "flavors",
                            "ours": f"main: cpu={q.flavor}",
                            "kueue": "main: cpu=other-flavor",
                        }
                    ],
                }
            ]
            assert any(
                f"{q.namespace}/a" in line and "flavors" in line and "other-flavor" in line for line in lines
            )

            # b does not fit: we keep it pending; Kueue admits it.
            await rig.create(WORKLOADS, workload(q.namespace, "b", "1", q.local_queue))
            await eventually(lambda: decided(key_b), "our decision about b")
            assert not shadow.ours[key_b].admitted and shadow.ours[key_b].reason == "WaitingForQuota"
            await write_status(rig, q, "b", admitted(q.cluster_queue, q.flavor))
            await eventually(lambda: differs(key_b), "the difference about b")
            assert shadow.differing[key_b] == {
                "admitted": ("false", "true"),
                "clusterQueue": ("-", q.cluster_queue),
                "flavors": ("-", f"main: cpu={q.flavor}"),
                "reason": ("WaitingForQuota", "-"),
            }
            s = await scrape(port)
            assert value(s, "kueuestream_shadow_differences", kind="flavors") == 2 + elsewhere("flavors")
            assert value(s, "kueuestream_shadow_differences", kind="admitted") == 1 + elsewhere("admitted")
            assert value(s, "kueuestream_shadow_differences", kind="reason") == 1 + elsewhere("reason")

            # Kueue comes back to our flavor for a: a agrees again.
            await write_status(rig, q, "a", admitted(q.cluster_queue, q.flavor))

            async def agrees(key: tuple[str, str]) -> bool:
                return key not in shadow.differing

            await eventually(lambda: agrees(key_a), "a agreeing again")
            assert any(line.startswith("agrees") and f"{q.namespace}/a" in line for line in lines)
            report = orjson.loads(report_file.read_bytes())
            assert [w["name"] for w in mine(report)] == ["b"] and list(differing_here()) == [key_b]

            assert runtime.objects.writes == 0
            assert runtime.side.jobs.counters.workloads_created == 0
        finally:
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            observed.endpoint.stop()
            log.close_sync()
