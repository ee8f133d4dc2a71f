"""The manager's links to its workers, against three real API servers.

A MultiKueueCluster (given as the manager's watch event) makes the link load
the worker's kubeconfig from a Secret of the manager's namespace (or a Path),
and every change of the connection is one ``ClusterConnection`` event with
upstream's reasons (``clustersReconciler.Reconcile`` / ``loadClientConfig`` /
``validateKubeconfig`` in pkg/controller/admissionchecks/multikueue/multikueuecluster.go):

- Secret missing, key missing: ``BadKubeConfig``, naming the Secret and key;
- content that is not a kubeconfig: ``InsecureKubeConfig``, without quoting it;
- a good kubeconfig: ``Active``/``Connected``, then the worker's Workloads and
  Jobs with our origin label stream in with the cluster ``multikueue:<name>``
  (and objects without the label do not);
- the worker's API server stops: ``ClientConnectionFailed``; back: ``Active``;
- the Secret rotated: the link connects with its new content (upstream's
  Secret handler reconciles the clusters that name it and reloads a changed
  kubeconfig); content that no longer loads is reported.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kueuestream.agents.kube.client import KubeConnection, connect
from kueuestream.agents.kube.crd_install import install_crds
from kueuestream.agents.kube.multikueue.links import (
    CLUSTER_CONNECTION,
    ORIGIN_LABEL,
    WorkerLinks,
)
from kueuestream.agents.kube.rest import KubeObjects
from kueuestream.agents.kube.watch_ledger import WatchLedger
from kueuestream.agents.log_entries import control_kind
from kueuestream.streams.schemas import WatchEvent, WatchEventType
from tests.conftest import MultiKueueServers
from tests.kube.rig import KUEUE, create, eventually, merge_patch, namespace, unique

pytestmark = pytest.mark.kube


class ListSink:
    def __init__(self) -> None:
        self.events: list[WatchEvent] = []

    async def emit(self, events: Sequence[WatchEvent]) -> None:
        self.events += events

    def connections(self, name: str) -> list[dict[str, Any]]:
        return [e.object or {} for e in self.events if e.kind == CLUSTER_CONNECTION and e.name == name]


def mk_cluster_event(name: str, location: str, location_type: str = "Secret") -> WatchEvent:
    manifest = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueCluster",
        "metadata": {"name": name},
        "spec": {"clusterSource": {"kubeConfig": {"locationType": location_type, "location": location}}},
    }
    return WatchEvent(
        cluster="manager",
        kind="MultiKueueCluster",
        apiVersion="kueue.x-k8s.io/v1beta2",
        name=name,
        type=WatchEventType.ADDED,
        object=manifest,
        timestamp=1,
    )


async def secret(conn: KubeConnection, ns: str, name: str, data: dict[str, bytes]) -> None:
    encoded = {k: base64.b64encode(v).decode() for k, v in data.items()}
    await create(
        conn,
        f"/api/v1/namespaces/{ns}/secrets",
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": encoded},
    )


def links_for(manager: KubeConnection, sink: ListSink, ns: str) -> WorkerLinks:
    async def ledger(cluster: str) -> WatchLedger:
        return WatchLedger(cluster)

    return WorkerLinks(
        KubeObjects(manager.api), sink, ledger, namespace=ns, origin="test-origin", probe_s=0.3, retry_s=0.3
    )


async def test_bad_kubeconfigs_give_clear_reasons(multikueue_servers: MultiKueueServers) -> None:
    async with await connect(multikueue_servers.manager.kubeconfig) as manager:
        ns = await namespace(manager, "mk-links")
        await secret(manager, ns, "no-key", {"config": b"whatever"})
        await secret(manager, ns, "garbage", {"kubeconfig": b"token: s3cr3t: [unclosed"})
        await secret(manager, ns, "not-a-config", {"kubeconfig": b"just a string with token s3cr3t"})
        sink = ListSink()
        links = links_for(manager, sink, ns)
        try:
            links.observe(
                [
                    mk_cluster_event("missing", "absent-secret"),
                    mk_cluster_event("nokey", "no-key"),
                    mk_cluster_event("garbage", "garbage"),
                    mk_cluster_event("notconfig", "not-a-config"),
                    mk_cluster_event("nofile", "/nonexistent/kubeconfig", "Path"),
                ]
            )
            names = ("missing", "nokey", "garbage", "notconfig", "nofile")
            await eventually(lambda: all(sink.connections(n) for n in names), "a report for each cluster")
        finally:
            await links.close()
    first = {n: sink.connections(n)[0] for n in names}
    assert all(state["connected"] is False for state in first.values())
    assert first["missing"]["reason"] == "BadKubeConfig"
    assert f'secrets "absent-secret" not found in namespace "{ns}"' in first["missing"]["message"]
    assert first["nokey"]["reason"] == "BadKubeConfig"
    assert 'key "kubeconfig" not found in secret "no-key"' in first["nokey"]["message"]
    assert first["garbage"]["reason"] == "InsecureKubeConfig"
    assert "not valid YAML at line 1" in first["garbage"]["message"]
    assert first["notconfig"]["reason"] == "InsecureKubeConfig"
    assert "expected a Config with a list of clusters" in first["notconfig"]["message"]
    assert first["nofile"]["reason"] == "BadKubeConfig"
    assert "open /nonexistent/kubeconfig" in first["nofile"]["message"]
    # The content never reaches the log, and an unchanged failure is reported once.
    assert not any("s3cr3t" in str(e.object) for e in sink.events)
    assert all(len(sink.connections(n)) == 1 for n in names)


async def test_good_kubeconfig_streams_worker_and_reports_loss(
    multikueue_servers: MultiKueueServers, tmp_path: Path
) -> None:
    worker_instance = multikueue_servers.worker1
    kubeconfig = worker_instance.kubeconfig.read_bytes()
    async with (
        await connect(multikueue_servers.manager.kubeconfig) as manager,
        await connect(worker_instance.kubeconfig) as worker,
    ):
        await install_crds(worker)
        ns = await namespace(manager, "mk-links")
        await secret(manager, ns, "worker1", {"kubeconfig": kubeconfig})
        worker_ns = await namespace(worker, "mk-remote")
        labelled, unlabelled = unique("copy"), unique("other")
        sink = ListSink()
        links = links_for(manager, sink, ns)
        try:
            links.observe([mk_cluster_event("w1", "worker1")])
            await eventually(lambda: bool(sink.connections("w1")), "connected")
            connected = {"connected": True, "reason": "Active", "message": "Connected"}
            assert sink.connections("w1")[0] == connected

            for name, labels in ((labelled, {ORIGIN_LABEL: "test-origin"}), (unlabelled, {})):
                await create(worker, f"{KUEUE}/namespaces/{worker_ns}/workloads", workload(name, labels))

            def seen(name: str) -> list[WatchEvent]:
                return [e for e in sink.events if e.name == name and not control_kind(e.object)]

            await eventually(lambda: bool(seen(labelled)), "the labelled Workload streamed")
            event = seen(labelled)[0]
            assert (event.cluster, event.kind, event.namespace) == ("multikueue:w1", "Workload", worker_ns)
            await asyncio.sleep(1.0)
            assert not seen(unlabelled)

            worker_instance.stop_apiserver()
            try:
                await eventually(lambda: len(sink.connections("w1")) >= 2, "the loss reported")
                lost = sink.connections("w1")[1]
                assert lost["connected"] is False and lost["reason"] == "ClientConnectionFailed"
            finally:
                worker_instance.start_apiserver()
            await eventually(lambda: len(sink.connections("w1")) >= 3, "the return reported", 60)
            assert sink.connections("w1")[2]["connected"] is True
        finally:
            await links.close()


def workload(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                }
            ],
        },
    }


async def test_a_new_origin_restarts_the_watches(multikueue_servers: MultiKueueServers) -> None:
    """The Configuration's multiKueue.origin changed: the links watch the copies of the new origin."""
    async with (
        await connect(multikueue_servers.manager.kubeconfig) as manager,
        await connect(multikueue_servers.worker2.kubeconfig) as worker,
    ):
        await install_crds(worker)
        ns = await namespace(manager, "mk-links")
        await secret(
            manager, ns, "worker2", {"kubeconfig": multikueue_servers.worker2.kubeconfig.read_bytes()}
        )
        worker_ns = await namespace(worker, "mk-remote")
        sink = ListSink()
        links = links_for(manager, sink, ns)
        try:
            links.observe([mk_cluster_event("w2", "worker2")])
            await eventually(lambda: bool(sink.connections("w2")), "connected")
            links.set_origin("second-origin")
            name = unique("later")
            await create(
                worker,
                f"{KUEUE}/namespaces/{worker_ns}/workloads",
                workload(name, {ORIGIN_LABEL: "second-origin"}),
            )
            await eventually(
                lambda: any(e.name == name and e.cluster == "multikueue:w2" for e in sink.events),
                "the new origin's copy streamed",
            )
        finally:
            await links.close()


async def test_a_rotated_secret_connects_to_its_new_content(multikueue_servers: MultiKueueServers) -> None:
    """The Secret now holds worker2's kubeconfig: worker2's copies stream under the same cluster name."""
    async with (
        await connect(multikueue_servers.manager.kubeconfig) as manager,
        await connect(multikueue_servers.worker1.kubeconfig) as worker1,
        await connect(multikueue_servers.worker2.kubeconfig) as worker2,
    ):
        for worker in (worker1, worker2):
            await install_crds(worker)
        ns = await namespace(manager, "mk-links")
        first = multikueue_servers.worker1.kubeconfig.read_bytes()
        await secret(manager, ns, "rotating", {"kubeconfig": first})
        ns1, ns2 = await namespace(worker1, "mk-remote"), await namespace(worker2, "mk-remote")
        before, after = unique("before"), unique("after")
        labels = {ORIGIN_LABEL: "test-origin"}
        sink = ListSink()
        links = links_for(manager, sink, ns)

        def seen(name: str) -> list[WatchEvent]:
            return [e for e in sink.events if e.name == name and not control_kind(e.object)]

        async def rotate(content: bytes) -> None:
            data = {"kubeconfig": base64.b64encode(content).decode()}
            await merge_patch(manager, f"/api/v1/namespaces/{ns}/secrets/rotating", {"data": data})

        try:
            links.observe([mk_cluster_event("rot", "rotating")])
            await create(worker1, f"{KUEUE}/namespaces/{ns1}/workloads", workload(before, labels))
            await eventually(lambda: bool(seen(before)), "worker1's copy streamed")
            assert seen(before)[0].namespace == ns1

            await rotate(multikueue_servers.worker2.kubeconfig.read_bytes())
            await create(worker2, f"{KUEUE}/namespaces/{ns2}/workloads", workload(after, labels))
            await eventually(lambda: bool(seen(after)), "worker2's copy streamed after the rotation")
            event = seen(after)[0]
            assert (event.cluster, event.namespace) == ("multikueue:rot", ns2)

            await rotate(b"not a kubeconfig")
            await eventually(lambda: sink.connections("rot")[-1]["connected"] is False, "the bad content")
            assert sink.connections("rot")[-1]["reason"] == "InsecureKubeConfig"
        finally:
            await links.close()
