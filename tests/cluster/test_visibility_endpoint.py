"""Kueue's visibility API on the operators' endpoint of ``run --kubeconfig``, against a real API server.

Kueue's ``pendingWorkloadsInCqREST.Get`` lists a ClusterQueue's pending
Workloads in the order of ``ClusterQueue.Snapshot`` (priority, then age);
``pendingWorkloadsInLqREST.Get`` those of one LocalQueue. Here the same
answers come from the runtime's live engines over HTTP, follow what the
cluster does, and are a 503 until the first full list is processed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from kueuestream.agents.kube.rest import WORKLOADS
from kueuestream.agents.kube.runtime import Observed, open_cluster, serve
from kueuestream.agents.kube.watch_service import WatchOptions
from kueuestream.streams.file_log import FileLog
from tests.cluster.kube_rig import cluster, eventually
from tests.cluster.test_metrics_endpoint import get
from tests.helpers import workload_manifest

pytestmark = pytest.mark.kube

API = "/apis/visibility.kueue.x-k8s.io/v1beta2"


async def test_run_serves_the_pending_workloads_of_its_queues(kube_config: str, tmp_path: Path) -> None:
    async with cluster(kube_config) as rig:
        q = await rig.quota("visibility", "1")
        observed = Observed(port=0)
        observed.endpoint.start()
        port = observed.endpoint.port
        cq_path = f"{API}/clusterqueues/{q.cluster_queue}/pendingworkloads"
        lq_path = f"{API}/namespaces/{q.namespace}/localqueues/{q.local_queue}/pendingworkloads"
        log = FileLog(tmp_path, fsync=False)
        task: asyncio.Task[None] | None = None

        async def pending(path: str) -> tuple[int, dict[str, object]]:
            code, text = await asyncio.to_thread(get, port, path)
            return code, json.loads(text)

        try:
            code, body = await pending(cq_path)
            assert (code, body["reason"]) == (503, "ServiceUnavailable")
            assert "the log is not taken in yet" in str(body["message"])

            runtime, watcher = await open_cluster(
                rig.conn, log, WatchOptions(kubeconfig="", cluster="test"), metrics=observed.series
            )
            observed.watch(runtime, watcher)
            task = asyncio.create_task(serve(runtime, watcher))
            await asyncio.wait_for(watcher.synced.wait(), 120)

            for name, priority in (("first", 0), ("low", 0), ("high", 5), ("later-low", 0)):
                wl = workload_manifest(
                    name, q.local_queue, {"cpu": "1"}, namespace=q.namespace, priority=priority, created=None
                )
                await rig.create(WORKLOADS, wl)
                # The API server stamps creation times to the second: one apart keeps their order.
                await asyncio.sleep(1.1)

            async def three_waiting() -> bool:
                code, body = await pending(cq_path)
                return code == 200 and len(body["items"]) == 3  # type: ignore[arg-type]

            await eventually(three_waiting, "three Workloads waiting behind the first")
            code, body = await pending(cq_path)
            items = body["items"]
            assert isinstance(items, list)
            assert [(i["metadata"]["name"], i["priority"], i["positionInClusterQueue"]) for i in items] == [
                ("high", 5, 0),
                ("low", 0, 1),
                ("later-low", 0, 2),
            ]
            assert all(i["reason"] == "WaitingForQuota" for i in items)
            code, body = await pending(f"{lq_path}?offset=1&limit=1")
            assert code == 200
            assert [i["metadata"]["name"] for i in body["items"]] == ["low"]  # type: ignore[attr-defined]

            # The running Workload goes: the head of the queue is admitted, the rest move up.
            await rig.api.delete(WORKLOADS, q.namespace, "first")

            async def moved_up() -> bool:
                code, body = await pending(cq_path)
                names = [i["metadata"]["name"] for i in body["items"]]  # type: ignore[attr-defined]
                return code == 200 and names == ["low", "later-low"]

            await eventually(moved_up, "the head admitted, the others moved up")

            code, body = await pending(f"{API}/clusterqueues/{q.cluster_queue}x/pendingworkloads")
            assert code == 404
            assert f"closest: {q.cluster_queue}" in str(body["message"])
        finally:
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            observed.endpoint.stop()
            log.close_sync()
