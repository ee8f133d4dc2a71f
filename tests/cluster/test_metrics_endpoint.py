"""``/metrics``, ``/healthz`` and ``/readyz`` of ``run --kubeconfig`` against the real API server.

The series are Kueue's (``pkg/metrics/metrics.go``): ``pending_workloads`` as
``ReportPendingWorkloads`` counts them, ``admitted_workloads_total`` and
``admission_wait_time_seconds`` as ``AdmittedWorkload`` records them (wait from
``workload.QueuedWaitTime``), the quota and usage gauges as
``ClusterQueue.reportResourceMetrics`` (``pkg/cache/scheduler/clusterqueue.go``)
sets them, in the resource's unit.
"""

from __future__ import annotations

import asyncio
import math
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kueuestream.agents.kube.rest import WORKLOADS
from kueuestream.agents.kube.runtime import Observed, open_cluster, serve
from kueuestream.agents.kube.watch_service import WatchOptions
from kueuestream.streams.file_log import FileLog
from tests.cluster.kube_rig import cluster, eventually
from tests.helpers import workload_manifest

pytestmark = pytest.mark.kube

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def workload(namespace: str, name: str, cpu: str, queue: str = "lq") -> dict[str, Any]:
    return workload_manifest(name, queue, {"cpu": cpu}, namespace=namespace, priority=None, created=None)


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def scrape(port: int) -> Samples:
    code, text = await asyncio.to_thread(get, port, "/metrics")
    assert code == 200
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def test_metrics_show_kueue_series_for_a_known_scenario(kube_config: str, tmp_path: Path) -> None:
    """Quota of 2 cpu, three Workloads of 1 cpu: two admitted, one inadmissible; the Kueue-named
    series say exactly that, and /readyz turns ready only once the first full list is processed."""
    async with cluster(kube_config) as rig:
        q = await rig.quota("metrics", "2")
        observed = Observed(port=0)
        observed.endpoint.start()
        port = observed.endpoint.port
        log = FileLog(tmp_path, fsync=False)
        task: asyncio.Task[None] | None = None
        try:
            assert await asyncio.to_thread(get, port, "/healthz") == (200, "ok\n")
            code, body = await asyncio.to_thread(get, port, "/readyz")
            assert code == 503 and "first full list" in body

            runtime, watcher = await open_cluster(
                rig.conn, log, WatchOptions(kubeconfig="", cluster="test"), metrics=observed.series
            )
            observed.watch(runtime, watcher)
            assert (await asyncio.to_thread(get, port, "/readyz"))[0] == 503  # not listed yet
            task = asyncio.create_task(serve(runtime, watcher))
            await asyncio.wait_for(watcher.synced.wait(), 120)
            assert await asyncio.to_thread(get, port, "/readyz") == (200, "ready\n")

            for name in ("a", "b", "c"):
                await rig.create(WORKLOADS, workload(q.namespace, name, "1", q.local_queue))
            cq = q.cluster_queue

            async def settled() -> bool:
                s = await scrape(port)
                return (
                    value(
                        s,
                        "kueue_pending_workloads",
                        cluster_queue=cq,
                        status="inadmissible",
                        replica_role="standalone",
                    )
                    == 1
                )

            await eventually(settled, "the third Workload inadmissible")

            s = await scrape(port)
            common = {"replica_role": "standalone"}
            quota_labels = {
                "cohort": "",
                "cluster_queue": cq,
                "flavor": q.flavor,
                "resource": "cpu",
                **common,
            }
            counted = {"cluster_queue": cq, "priority_class": "", **common}
            assert value(s, "kueue_admitted_workloads_total", **counted) == 2
            assert value(s, "kueue_quota_reserved_workloads_total", **counted) == 2
            assert value(s, "kueue_pending_workloads", cluster_queue=cq, status="active", **common) == 0
            assert value(s, "kueue_cluster_queue_nominal_quota", **quota_labels) == 2
            assert value(s, "kueue_cluster_queue_resource_usage", **quota_labels) == 2
            assert value(s, "kueue_cluster_queue_resource_reservation", **quota_labels) == 2
            assert value(s, "kueue_cluster_queue_borrowing_limit", **quota_labels) == math.inf
            assert value(s, "kueue_cluster_queue_lending_limit", **quota_labels) == math.inf
            wait = {"cluster_queue": cq, "priority_class": "", **common}
            assert value(s, "kueue_admission_wait_time_seconds_count", **wait) == 2
            waited = value(s, "kueue_admission_wait_time_seconds_sum", **wait)
            assert waited is not None and 0 <= waited < 120
            # Kueue's buckets: 1, then 2.5 doubling.
            assert value(s, "kueue_admission_wait_time_seconds_bucket", le="2.5", **wait) is not None
            lags = [k for k in s if k[0] == "kueuestream_pipeline_lag_records"]
            assert len(lags) == 1 + runtime.pipeline.partitions

            # The applier's status writes come back as watch events after the decisions the
            # series show, so the watch topic's lag may be 1 for a moment: it drains to 0.
            async def watch_read() -> bool:
                lag = value(
                    await scrape(port),
                    "kueuestream_pipeline_lag_records",
                    topic=runtime.names.watch,
                    partition="0",
                )
                return lag == 0

            await eventually(watch_read, "the watch topic read to its end")

            # Deleting an admitted Workload admits the waiting one: the series follow.
            await rig.api.delete(WORKLOADS, q.namespace, "a")

            async def third_admitted() -> bool:
                s = await scrape(port)
                return (
                    value(s, "kueue_admitted_workloads_total", cluster_queue=cq, priority_class="", **common)
                    == 3
                )

            await eventually(third_admitted, "the third Workload admitted")
            s = await scrape(port)
            assert value(s, "kueue_pending_workloads", cluster_queue=cq, status="inadmissible", **common) == 0
            assert value(s, "kueue_cluster_queue_resource_usage", **quota_labels) == 2
            assert await asyncio.to_thread(get, port, "/nothing") == (
                404,
                "not found: try /metrics, /healthz or /readyz\n",
            )
        finally:
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            observed.endpoint.stop()
            log.close_sync()
