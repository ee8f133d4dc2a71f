"""The dashboard on Kafka: a worker serves its shards' dashboard, ``kueuestream dashboard
kafka://...`` follows the topics, and both show the same queue and the same timeline."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.kube_rig import eventually, start_cli
from tests.cluster.test_metrics_endpoint import get
from tests.kafka.test_worker_metrics import QUEUES, workload
from tests.kafka.worker_rig import metrics_worker, publish, until_ready

pytestmark = pytest.mark.kafka


async def state(port: int) -> dict[str, Any]:
    code, body = await asyncio.to_thread(get, port, "/dashboard/api/state")
    assert code == 200, body
    parsed: dict[str, Any] = json.loads(body)
    return parsed


def queue(shown: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((cq for cq in shown["clusterQueues"] if cq["name"] == name), None)


async def test_a_worker_and_the_dashboard_command_show_the_queue_from_kafka(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    async with metrics_worker(kafka_bootstrap, tmp_path) as worker:
        port, broker, prefix = worker.port, worker.broker, worker.prefix
        await until_ready(worker)
        workloads = "---\n".join(workload(n) for n in ("a", "b", "c"))
        await publish(worker, tmp_path, {"queues.yaml": QUEUES, "workloads.yaml": workloads})

        async def settled(at: int) -> bool:
            cq = queue(await state(at), "team")
            return cq is not None and cq["pendingWorkloads"] == 1 and cq["resources"][0]["used"] == "2"

        await eventually(lambda: settled(port), "the worker's dashboard shows team at 2/2, one pending", 240)
        shown = queue(await state(port), "team")
        assert shown is not None
        assert [w["metadata"]["name"] for w in shown["pending"]] == ["c"]
        assert shown["pending"][0]["reason"] == "WaitingForQuota"

        code, body = await asyncio.to_thread(get, port, "/dashboard/api/workloads/ns/c")
        assert code == 200, body
        timeline = json.loads(body)["timeline"]
        assert timeline[-1]["event"] == "Waiting" and timeline[-1]["reason"] == "WaitingForQuota"

        follower = await start_cli("dashboard", broker, "--topic-prefix", prefix, "--port", "0")
        try:
            followed = await follower.announced_port("dashboard on http://", r":(\d+)/dashboard")
            await eventually(lambda: settled(followed), "the dashboard command shows team at 2/2", 120)
            assert queue(await state(followed), "team") == shown
        finally:
            await follower.stop()
