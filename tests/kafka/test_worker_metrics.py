"""``kueuestream worker --metrics-port``: the Kueue-named series of the shards the worker owns.

Same series and values as ``run --kubeconfig`` (see tests/cluster/test_metrics_endpoint.py):
Kueue's ``ReportPendingWorkloads``, ``AdmittedWorkload`` and ``reportResourceMetrics``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.cluster.kube_rig import eventually
from tests.cluster.test_metrics_endpoint import get, scrape, value
from tests.kafka.worker_rig import metrics_worker, publish, until_ready

pytestmark = pytest.mark.kafka

V = "kueue.x-k8s.io/v1beta2"
QUEUES = f"""apiVersion: {V}
kind: ResourceFlavor
metadata: {{name: default}}
---
apiVersion: {V}
kind: ClusterQueue
metadata: {{name: team}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: default, resources: [{{name: cpu, nominalQuota: 2}}]}}]
---
apiVersion: {V}
kind: LocalQueue
metadata: {{name: lq, namespace: ns}}
spec: {{clusterQueue: team}}
"""


def workload(name: str) -> str:
    return f"""apiVersion: {V}
kind: Workload
metadata: {{name: {name}, namespace: ns}}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template: {{spec: {{containers: [{{name: c, resources: {{requests: {{cpu: "1"}}}}}}]}}}}
"""


async def test_a_worker_serves_the_series_of_its_shards(kafka_bootstrap: str, tmp_path: Path) -> None:
    async with metrics_worker(kafka_bootstrap, tmp_path) as worker:
        port = worker.port
        assert await asyncio.to_thread(get, port, "/healthz") == (200, "ok\n")
        await until_ready(worker)
        workloads = "---\n".join(workload(n) for n in ("a", "b", "c"))
        await publish(worker, tmp_path, {"queues.yaml": QUEUES, "workloads.yaml": workloads})
        common = {"cluster_queue": "team", "replica_role": "standalone"}

        async def settled() -> bool:
            s = await scrape(port)
            return value(s, "kueue_pending_workloads", status="inadmissible", **common) == 1

        await eventually(settled, "the third Workload inadmissible", 240)
        s = await scrape(port)
        quota = {"cohort": "", "flavor": "default", "resource": "cpu", **common}
        assert value(s, "kueue_admitted_workloads_total", priority_class="", **common) == 2
        assert value(s, "kueue_pending_workloads", status="active", **common) == 0
        assert value(s, "kueue_cluster_queue_nominal_quota", **quota) == 2
        assert value(s, "kueue_cluster_queue_resource_usage", **quota) == 2

        async def no_lag() -> bool:
            s = await scrape(port)
            lags = {k: v for k, v in s.items() if k[0] == "kueuestream_pipeline_lag_records"}
            return bool(lags) and all(v == 0 for v in lags.values())

        await eventually(no_lag, "no admission lag reported")
