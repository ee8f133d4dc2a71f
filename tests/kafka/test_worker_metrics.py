"""``kueuestream worker --metrics-port``: the Kueue-named series of the shards the worker owns.

Same series and values as ``run --kubeconfig`` (see tests/cluster/test_metrics_endpoint.py):
Kueue's ``ReportPendingWorkloads``, ``AdmittedWorkload`` and ``reportResourceMetrics``.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from kueuestream.agents.faust_worker.publish import publish_dir
from tests.cluster.kube_rig import eventually, start_cli
from tests.cluster.test_metrics_endpoint import get, scrape, value
from tests.cluster.test_operating_cli import port_of

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
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "queues.yaml").write_text(QUEUES)
    (manifests / "workloads.yaml").write_text("---\n".join(workload(n) for n in ("a", "b", "c")))
    ident = uuid.uuid4().hex[:8]
    prefix = f"t{ident}."
    broker = f"kafka://{kafka_bootstrap}"
    worker = await start_cli(
        "worker",
        "--broker",
        broker,
        "--topic-prefix",
        prefix,
        "--app-id",
        f"ks-{ident}",
        "--datadir",
        str(tmp_path / "faust"),
        "--no-clock",
        "--metrics-port",
        "0",
    )
    try:
        port = await port_of(worker)
        assert await asyncio.to_thread(get, port, "/healthz") == (200, "ok\n")

        async def ready() -> bool:
            return (await asyncio.to_thread(get, port, "/readyz"))[0] == 200

        # A Faust worker takes its partitions only after a rebalance, slow on a busy machine.
        await eventually(ready, "the worker assigned its partitions", 240)
        assert await asyncio.to_thread(publish_dir, str(manifests), broker, prefix=prefix) == 0
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
    finally:
        await worker.stop()
