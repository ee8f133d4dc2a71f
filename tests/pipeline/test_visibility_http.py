"""Kueue's visibility API over real HTTP on the operators' endpoint, from a pipeline's engines.

The paths, options and answers are those of Kueue's visibility API server
(``pkg/visibility``: ``pendingWorkloadsInCqREST.Get`` and
``pendingWorkloadsInLqREST.Get``; ``limit`` defaults to 1000, ``offset`` to 0), and
failures are Kubernetes ``Status`` objects as an API server writes them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kueuestream.admission.engine import Engine
from kueuestream.agents.audit.pending import pending_summary
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.metrics.http_endpoint import MetricsEndpoint
from kueuestream.agents.metrics.visibility import Unavailable, serve_visibility
from kueuestream.agents.sources.watch_events import listing_events
from kueuestream.streams.file_log import FileLog
from tests.helpers import (
    T0,
    cluster_queue_manifest,
    created_at,
    flavor_manifest,
    http_get,
    local_queue_manifest,
    workload_manifest,
)

API = "/apis/visibility.kueue.x-k8s.io/v1beta2"


def _get(port: int, path: str) -> tuple[int, str, dict[str, Any]]:
    status, content_type, body = http_get(port, path)
    return status, content_type, json.loads(body)


@pytest.fixture
def engines(tmp_path: Path) -> Iterator[list[Engine]]:
    """One ClusterQueue of 1 cpu, busy; five Workloads waiting in two LocalQueues."""
    docs: list[dict[str, Any]] = [
        flavor_manifest("default"),
        cluster_queue_manifest("gpu-pool", [(["cpu"], [("default", {"cpu": 1})])]),
        local_queue_manifest("main", "gpu-pool", "alpha"),
        local_queue_manifest("main", "gpu-pool", "beta"),
        workload_manifest("running", "main", {"cpu": "1"}, namespace="alpha", priority=9),
    ]
    docs += [
        workload_manifest(f"w{i}", "main", {"cpu": "1"}, namespace=ns, priority=prio, created=created_at(i))
        for i, (ns, prio) in enumerate([("alpha", 0), ("beta", 0), ("alpha", 3), ("beta", 1), ("alpha", 0)])
    ]
    with FileLog(tmp_path / "log", fsync=False) as log:
        pipeline = EmbeddedPipeline(log)
        for ts, batch in ((T0, docs[:5]), (T0 + 1000, docs[5:])):
            events, refused = listing_events(batch, ts)
            assert not refused
            pipeline.submit(events)
            pipeline.pump()
        states = pipeline.admission.states
        yield [states[p].shards[s].engine for p in sorted(states) for s in sorted(states[p].shards)]


@pytest.fixture
def endpoint(engines: list[Engine]) -> Iterator[MetricsEndpoint]:
    served = MetricsEndpoint(CollectorRegistry(), lambda: True, host="127.0.0.1").start()

    def read(fn: Any) -> Any:
        return fn(engines, " here")

    serve_visibility(served, read)
    try:
        yield served
    finally:
        served.stop()


def _names(body: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in body["items"]]


def test_a_cluster_queue_answers_its_pending_workloads_in_order(
    endpoint: MetricsEndpoint, engines: Sequence[Engine]
) -> None:
    code, content_type, body = _get(endpoint.port, f"{API}/clusterqueues/gpu-pool/pendingworkloads")
    assert (code, content_type) == (200, "application/json")
    assert body == pending_summary(engines, cluster_queue="gpu-pool")
    assert (body["kind"], body["apiVersion"]) == (
        "PendingWorkloadsSummary",
        "visibility.kueue.x-k8s.io/v1beta2",
    )
    assert _names(body) == ["w2", "w3", "w0", "w1", "w4"]
    assert [(i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in body["items"]] == [
        (0, 0),
        (1, 0),
        (2, 1),
        (3, 1),
        (4, 2),
    ]
    assert body["items"][0]["reason"] == "WaitingForQuota"


def test_limit_offset_and_a_local_queue(endpoint: MetricsEndpoint) -> None:
    code, _, body = _get(endpoint.port, f"{API}/clusterqueues/gpu-pool/pendingworkloads?limit=2&offset=1")
    assert code == 200
    assert _names(body) == ["w3", "w0"]
    code, _, body = _get(endpoint.port, f"{API}/namespaces/alpha/localqueues/main/pendingworkloads?offset=1")
    assert code == 200
    assert [
        (i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in body["items"]
    ] == [
        ("w0", 2, 1),
        ("w4", 4, 2),
    ]
    # limit=0 is Kueue's default of 1000; a negative one is bounded to none.
    assert len(_get(endpoint.port, f"{API}/clusterqueues/gpu-pool/pendingworkloads?limit=0")[2]["items"]) == 5
    assert _get(endpoint.port, f"{API}/clusterqueues/gpu-pool/pendingworkloads?limit=-3")[2]["items"] == []


def test_an_unknown_queue_is_a_404_status_naming_the_closest(endpoint: MetricsEndpoint) -> None:
    code, content_type, body = _get(endpoint.port, f"{API}/clusterqueues/gpu-pol/pendingworkloads")
    assert (code, content_type) == (404, "application/json")
    assert (body["kind"], body["status"], body["reason"], body["code"]) == (
        "Status",
        "Failure",
        "NotFound",
        404,
    )
    assert body["message"] == (
        'clusterqueue.visibility.kueue.x-k8s.io "gpu-pol" not found here; closest: gpu-pool'
    )
    assert body["details"] == {
        "name": "gpu-pol",
        "group": "visibility.kueue.x-k8s.io",
        "kind": "clusterqueue",
    }
    code, _, body = _get(endpoint.port, f"{API}/namespaces/gamma/localqueues/main/pendingworkloads")
    assert code == 404
    assert "LocalQueue" not in body["message"] and '"gamma/main" not found' in body["message"]
    assert "closest: alpha/main, beta/main" in body["message"]


def test_bad_options_and_paths(endpoint: MetricsEndpoint) -> None:
    code, _, body = _get(endpoint.port, f"{API}/clusterqueues/gpu-pool/pendingworkloads?limit=ten")
    assert (code, body["reason"]) == (400, "BadRequest")
    assert (
        body["message"] == "limit='ten' is not an integer; give limit as a whole number, for example limit=10"
    )
    code, _, body = _get(endpoint.port, f"{API}/clusterqueues/gpu-pool")
    assert code == 404
    assert body["message"].startswith(
        f"no such path {API}/clusterqueues/gpu-pool; the visibility API answers "
    )


def test_engines_that_cannot_answer_yet_are_a_503() -> None:
    served = MetricsEndpoint(CollectorRegistry(), lambda: False, host="127.0.0.1").start()

    def read(fn: Any) -> Any:
        raise Unavailable("not ready: the first full list is not processed yet")

    serve_visibility(served, read)
    try:
        code, _, body = _get(served.port, f"{API}/clusterqueues/gpu-pool/pendingworkloads")
    finally:
        served.stop()
    assert (code, body["reason"]) == (503, "ServiceUnavailable")
    assert body["message"] == (
        "pending workloads cannot be listed now: not ready: the first full list is not processed yet"
    )
