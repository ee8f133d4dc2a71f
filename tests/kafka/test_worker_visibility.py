"""``kueuestream worker --metrics-port``: Kueue's visibility API for the shards the worker holds;
and ``kueuestream pending`` reading the same from the Kafka log.

Kueue's ``pendingWorkloadsInCqREST.Get`` (pkg/visibility/storage) over HTTP,
from the engines of the partitions this worker holds; a ClusterQueue it does
not hold is a 404 that says which partitions it looked in.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from kueuestream.agents.audit.pending import pending_json
from kueuestream.streams.kafka_settings import kafka_settings
from tests.cluster.kube_rig import eventually
from tests.cluster.test_metrics_endpoint import get
from tests.kafka.test_worker_metrics import QUEUES
from tests.kafka.worker_rig import metrics_worker, publish, until_ready

pytestmark = pytest.mark.kafka

V = "kueue.x-k8s.io/v1beta2"
API = "/apis/visibility.kueue.x-k8s.io/v1beta2"


def workload(name: str, priority: int, created: str) -> str:
    return f"""apiVersion: {V}
kind: Workload
metadata: {{name: {name}, namespace: ns, creationTimestamp: "{created}"}}
spec:
  queueName: lq
  priority: {priority}
  podSets:
  - name: main
    count: 1
    template: {{spec: {{containers: [{{name: c, resources: {{requests: {{cpu: "2"}}}}}}]}}}}
"""


async def test_a_worker_lists_the_pending_workloads_of_its_shards(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    shapes = [("runs", 9, "00"), ("old", 0, "01"), ("urgent", 5, "03"), ("new", 0, "02")]
    docs = [workload(name, prio, f"2026-01-01T00:00:{sec}Z") for name, prio, sec in shapes]
    path = f"{API}/clusterqueues/team/pendingworkloads"
    async with metrics_worker(kafka_bootstrap, tmp_path) as worker:
        broker, prefix = worker.broker, worker.prefix

        async def pending(where: str) -> tuple[int, dict[str, object]]:
            code, text = await asyncio.to_thread(get, worker.port, where)
            return code, json.loads(text)

        code, body = await pending(path)
        assert (code, body["reason"]) == (503, "ServiceUnavailable")
        await until_ready(worker)
        await publish(worker, tmp_path, {"queues.yaml": QUEUES, "workloads.yaml": "---\n".join(docs)})

        async def three_waiting() -> bool:
            code, body = await pending(path)
            return code == 200 and len(body["items"]) == 3  # type: ignore[arg-type]

        await eventually(three_waiting, "three Workloads waiting behind the running one", 240)
        code, body = await pending(path)
        items = body["items"]
        assert isinstance(items, list)
        assert [
            (i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in items
        ] == [
            ("urgent", 0, 0),
            ("old", 1, 1),
            ("new", 2, 2),
        ]
        # The same answer from the log, as `kueuestream pending kafka://...` reads it.
        from_log = await asyncio.to_thread(
            pending_json, broker, cluster_queue="team", prefix=prefix, kafka=kafka_settings(broker)
        )
        assert from_log == body
        code, body = await pending(f"{API}/clusterqueues/elsewhere/pendingworkloads")
        assert code == 404
        message = str(body["message"])
        assert message.startswith(
            'clusterqueue.visibility.kueue.x-k8s.io "elsewhere" not found in the shards'
        )
        assert (
            f"of {prefix}kueue.admission); the other partitions are other workers'; closest: team" in message
        )
