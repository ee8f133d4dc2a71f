"""``run --kubeconfig --metrics-port``'s dashboard against the real API server: the ClusterQueue as
the cluster's Workloads fill it, live, and a waiting Workload's timeline read from the run's log."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from kueuestream.agents.kube.rest import WORKLOADS
from kueuestream.agents.kube.runtime import Observed, open_cluster, serve
from kueuestream.agents.kube.watch_service import WatchOptions
from kueuestream.streams.file_log import FileLog
from tests.cluster.kube_rig import cluster, eventually
from tests.cluster.test_metrics_endpoint import get, workload

pytestmark = pytest.mark.kube


async def queue(port: int, name: str) -> dict[str, Any] | None:
    code, body = await asyncio.to_thread(get, port, "/dashboard/api/state")
    assert code == 200, body
    state = json.loads(body)
    return next((cq for cq in state["clusterQueues"] if cq["name"] == name), None)


async def test_run_serves_its_dashboard(kube_config: str, tmp_path: Path) -> None:
    async with cluster(kube_config) as rig:
        q = await rig.quota("dashboard", "2")
        observed = Observed(port=0)
        observed.endpoint.start()
        port = observed.endpoint.port
        log = FileLog(tmp_path, fsync=False)
        task: asyncio.Task[None] | None = None
        try:
            runtime, watcher = await open_cluster(
                rig.conn, log, WatchOptions(kubeconfig="", cluster="test"), metrics=observed.series
            )
            observed.watch(runtime, watcher)
            task = asyncio.create_task(serve(runtime, watcher))
            await asyncio.wait_for(watcher.synced.wait(), 120)
            for name in ("a", "b", "c"):
                await rig.create(WORKLOADS, workload(q.namespace, name, "1", q.local_queue))
            cq = q.cluster_queue

            async def settled() -> bool:
                shown = await queue(port, cq)
                return shown is not None and shown["pendingWorkloads"] == 1

            await eventually(settled, "the dashboard shows the third Workload pending")
            shown = await queue(port, cq)
            assert shown is not None
            assert [(r["flavor"], r["resource"], r["used"], r["nominal"]) for r in shown["resources"]] == [
                (q.flavor, "cpu", "2", "2")
            ]
            (waiting,) = shown["pending"]
            assert waiting["reason"] == "WaitingForQuota"
            name = waiting["metadata"]["name"]
            code, body = await asyncio.to_thread(get, port, f"/dashboard/api/workloads/{q.namespace}/{name}")
            assert code == 200, body
            assert json.loads(body)["timeline"][-1]["reason"] == "WaitingForQuota"

            # An admitted Workload deleted: the waiting one is admitted, and the page says so.
            admitted = next(n for n in ("a", "b", "c") if n != name)
            await rig.api.delete(WORKLOADS, q.namespace, admitted)

            async def admitted_now() -> bool:
                _, body = await asyncio.to_thread(get, port, "/dashboard/api/state")
                recent = json.loads(body)["recent"]
                return any(r["kind"] == "admitted" and r["name"] == name for r in recent)

            await eventually(admitted_now, f"the dashboard shows {name} admitted")
            shown = await queue(port, cq)
            assert shown is not None and shown["pendingWorkloads"] == 0
        finally:
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            log.close_sync()
            observed.endpoint.stop()
