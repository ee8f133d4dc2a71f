"""The watcher against a real kube-apiserver, into a real (file) log.

- the first start lists everything as one batch, with each object's own
  resourceVersion, as the decoder reads it; quota objects then changed live
  reach the log as they change, and the pipeline reading that log admits a
  Workload once its ClusterQueue's quota is raised;
- a restarted watcher resumes from the resourceVersions in the log, with no
  list at all, and sends what changed while it was down, once;
- after ``restart-apiserver`` the old resourceVersions are gone (410): the
  watcher relists and sends exactly the differences, never an object the log
  already has at that version;
- an API server restart while the watcher runs loses nothing;
- discovery picks the newest served version, and names what is missing.

Upstream: Kueue's controllers are controller-runtime informers
(client-go ``Reflector.ListAndWatch``: list, then watch from the list's
resourceVersion, relist on "too old resource version", bookmarks on); the
watcher follows the same protocol, with the log as its store.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from kueuestream.admission.decode import decode
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.kube.api_calls import explain
from kueuestream.agents.kube.client import connect
from kueuestream.agents.kube.resources import KINDS_WATCHED, WatchedKind
from kueuestream.agents.kube.watch_ledger import WatchLedger
from kueuestream.agents.kube.watcher import MissingKinds, Watcher
from kueuestream.agents.log_entries import BATCH_BEGIN, BATCH_END, WATCH_BATCH, WATCH_PROGRESS, control_kind
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.schemas import DecisionRecord, WatchEvent
from tests.kube.rig import (
    KUEUE,
    call,
    cluster,
    cluster_queue,
    create,
    delete,
    eventually,
    flavor,
    local_queue,
    merge_patch,
    namespace,
    object_events,
    read_log,
    start_watcher,
    unique,
)

pytestmark = pytest.mark.kube

REPO = Path(__file__).resolve().parents[2]


def no_duplicates(events: list[WatchEvent]) -> None:
    """No object event is in the log twice: same object, same version, same change."""
    keys = Counter(
        (e.kind, e.namespace, e.name, e.resourceVersion, e.type) for e in events if not control_kind(e.object)
    )
    assert [k for k, n in keys.items() if n > 1] == []


def workload(ns: str, name: str, queue: str, cpu: str) -> dict[str, object]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"namespace": ns, "name": name},
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
                            ],
                        }
                    },
                }
            ],
        },
    }


def restart_apiserver() -> None:
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "kube.sh"), "restart-apiserver"],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]


async def test_listing_then_live_quota_changes_reach_the_log_and_the_pipeline(
    kube_config: str, tmp_path: Path
) -> None:
    async with cluster(kube_config) as conn:
        ns = await namespace(conn)
        rf, cq, lq, wl = unique("rf"), unique("cq"), unique("lq"), unique("wl")
        await create(conn, f"{KUEUE}/resourceflavors", flavor(rf))
        made_cq = await create(conn, f"{KUEUE}/clusterqueues", cluster_queue(cq, rf, "4"))
        await create(conn, f"{KUEUE}/namespaces/{ns}/localqueues", local_queue(ns, lq, cq))

        running = await start_watcher(conn, tmp_path)
        try:
            listed = read_log(tmp_path)
            ours = {rf, cq, lq, ns}
            # Referenced objects first: the namespace, the flavor, the queue, then its LocalQueue.
            assert object_events(listed, ours) == [
                ("ADDED", "Namespace", ns),
                ("ADDED", "ResourceFlavor", rf),
                ("ADDED", "ClusterQueue", cq),
                ("ADDED", "LocalQueue", lq),
            ]
            # ... inside one batch, followed by where each kind's watch starts.
            kinds = [(e.kind, e.name) for e in listed if control_kind(e.object)]
            assert kinds[0] == (WATCH_BATCH, BATCH_BEGIN)
            assert (WATCH_BATCH, BATCH_END) in kinds
            assert {name for kind, name in kinds if kind == WATCH_PROGRESS} == {k.kind for k in KINDS_WATCHED}
            cq_event = next(e for e in listed if e.name == cq)
            assert cq_event.cluster == "test"
            assert cq_event.resourceVersion == made_cq["metadata"]["resourceVersion"]
            assert cq_event.apiVersion == "kueue.x-k8s.io/v1beta2"
            assert cq_event.object is not None and "managedFields" not in cq_event.object["metadata"]
            assert decode(cq_event.object).errors == []

            # A Workload too big for the queue, then the quota raised and a flavor
            # that nobody uses deleted: each change reaches the log once, in order.
            await create(conn, f"{KUEUE}/namespaces/{ns}/workloads", workload(ns, wl, lq, "5"))
            raised = await merge_patch(
                conn,
                f"{KUEUE}/clusterqueues/{cq}",
                {"spec": {"resourceGroups": cluster_queue(cq, rf, "6")["spec"]["resourceGroups"]}},
            )
            spare = unique("rf")
            await create(conn, f"{KUEUE}/resourceflavors", flavor(spare))
            await delete(conn, f"{KUEUE}/resourceflavors/{spare}")

            want = [
                ("ADDED", "Workload", wl),
                ("MODIFIED", "ClusterQueue", cq),
                ("ADDED", "ResourceFlavor", spare),
                ("DELETED", "ResourceFlavor", spare),
            ]

            def live() -> list[tuple[str, str, str]]:
                return object_events(read_log(tmp_path), {wl, cq, spare})[1:]

            try:
                await eventually(lambda: live() == want, f"the live changes in the log: {want}")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; the log holds {live()}") from None
        finally:
            await running.stop()

    events = read_log(tmp_path)
    no_duplicates(events)
    modified = next(e for e in events if e.name == cq and e.type.value == "MODIFIED")
    assert modified.resourceVersion == raised["metadata"]["resourceVersion"]
    quota = modified.object["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]  # type: ignore[index]
    assert quota["nominalQuota"] == "6"

    # The pipeline reading this very log: pending at 4 CPUs; the quota raised to 6 retries
    # it a batch period later (Kueue's requeuer), when the pipeline's clock ticks.
    decisions: list[DecisionRecord] = []
    pipeline = EmbeddedPipeline(FileLog(tmp_path), on_decision=decisions.append)
    try:
        pipeline.pump()
        assert [d.action.value for d in decisions if d.ref.name == wl] == ["Pending"]
        pipeline.advance_clock()
    finally:
        pipeline.close()
    assert [d.action.value for d in decisions if d.ref.name == wl] == ["Pending", "Admitted"]


async def test_restarted_watcher_resumes_from_the_log_without_a_list(
    kube_config: str, tmp_path: Path
) -> None:
    async with cluster(kube_config) as conn:
        rf, kept, changed, added = unique("rf"), unique("cq"), unique("cq"), unique("cq")
        await create(conn, f"{KUEUE}/resourceflavors", flavor(rf))
        await create(conn, f"{KUEUE}/clusterqueues", cluster_queue(kept, rf, "1"))
        await create(conn, f"{KUEUE}/clusterqueues", cluster_queue(changed, rf, "1"))
        first = await start_watcher(conn, tmp_path)
        await first.stop()
        before = len(read_log(tmp_path))

        # While nobody watches.
        await merge_patch(
            conn, f"{KUEUE}/clusterqueues/{changed}", {"spec": {"queueingStrategy": "StrictFIFO"}}
        )
        await create(conn, f"{KUEUE}/clusterqueues", cluster_queue(added, rf, "1"))
        await delete(conn, f"{KUEUE}/resourceflavors/{rf}")

        second = await start_watcher(conn, tmp_path)
        try:
            want = [
                ("MODIFIED", "ClusterQueue", changed),
                ("ADDED", "ClusterQueue", added),
                ("DELETED", "ResourceFlavor", rf),
            ]
            await eventually(
                lambda: (
                    sorted(object_events(read_log(tmp_path)[before:], {rf, kept, changed, added}))
                    == sorted(want)
                ),
                f"the changes made while it was down: {want}",
            )
            assert second.watcher.stats.lists == 0  # resumed: nothing listed
            assert second.watcher.stats.relists == 0
        finally:
            await second.stop()
    no_duplicates(read_log(tmp_path))


async def test_410_after_apiserver_restart_relists_exactly_the_differences(
    kube_config: str, tmp_path: Path
) -> None:
    async with cluster(kube_config) as conn:
        rf, kept, changed, gone, added = unique("rf"), unique("cq"), unique("cq"), unique("cq"), unique("cq")
        await create(conn, f"{KUEUE}/resourceflavors", flavor(rf))
        for name in (kept, changed, gone):
            await create(conn, f"{KUEUE}/clusterqueues", cluster_queue(name, rf, "1"))
        first = await start_watcher(conn, tmp_path)
        await first.stop()
        before = len(read_log(tmp_path))

        await merge_patch(
            conn, f"{KUEUE}/clusterqueues/{changed}", {"spec": {"queueingStrategy": "StrictFIFO"}}
        )
        await delete(conn, f"{KUEUE}/clusterqueues/{gone}")
        await create(conn, f"{KUEUE}/clusterqueues", cluster_queue(added, rf, "1"))

    # The watch cache starts over: every resourceVersion in the log is too old now.
    restart_apiserver()

    async with cluster(kube_config) as conn:
        second = await start_watcher(conn, tmp_path)
        try:
            want = [
                ("MODIFIED", "ClusterQueue", changed),
                ("ADDED", "ClusterQueue", added),
                ("DELETED", "ClusterQueue", gone),
            ]
            names = {rf, kept, changed, gone, added}
            await eventually(
                lambda: sorted(object_events(read_log(tmp_path)[before:], names)) == sorted(want),
                f"exactly the differences: {want}",
            )
            await eventually(
                lambda: second.watcher.stats.per_kind_lists.get("ClusterQueue") == 1,
                "ClusterQueues relisted once after 410",
            )
            await second.watcher.flush()
            after = read_log(tmp_path)[before:]
            # Nothing else about these objects: the unchanged ones were not sent again.
            assert sorted(object_events(after, names)) == sorted(want)
        finally:
            await second.stop()
    no_duplicates(read_log(tmp_path))


async def test_apiserver_restart_mid_stream_loses_nothing(kube_config: str, tmp_path: Path) -> None:
    async with cluster(kube_config) as conn:
        rf = unique("rf")
        await create(conn, f"{KUEUE}/resourceflavors", flavor(rf))
        running = await start_watcher(conn, tmp_path)
        try:
            await asyncio.to_thread(restart_apiserver)
            # Made while the watches are down or just reconnecting. A relist
            # sees each object as it is by then, so what must arrive is every
            # object at the version of its last write, not every step.
            queues = [unique("cq") for _ in range(5)]
            final = {}
            for name in queues:
                made = await create(conn, f"{KUEUE}/clusterqueues", cluster_queue(name, rf, "1"))
                final[name] = made["metadata"]["resourceVersion"]
            changed = await merge_patch(
                conn, f"{KUEUE}/clusterqueues/{queues[0]}", {"spec": {"queueingStrategy": "StrictFIFO"}}
            )
            final[queues[0]] = changed["metadata"]["resourceVersion"]

            def latest() -> dict[str, str]:
                return {e.name: e.resourceVersion for e in read_log(tmp_path) if e.name in final}

            await eventually(lambda: latest() == final, "every object at its last version", timeout_s=90)
            last = next(e for e in reversed(read_log(tmp_path)) if e.name == queues[0])
            assert last.object is not None and last.object["spec"]["queueingStrategy"] == "StrictFIFO"
            stats = running.watcher.stats
            assert stats.reconnects + stats.relists > 0  # it did lose its watches
        finally:
            await running.stop()
    no_duplicates(read_log(tmp_path))


async def test_bookmarks_move_the_resume_point_of_quiet_kinds(kube_config: str, tmp_path: Path) -> None:
    """Kinds nobody changes still resume from recent versions: their bookmarks are recorded."""
    async with cluster(kube_config) as conn:
        # Short watches: the API server sends bookmarks before it ends them.
        running = await start_watcher(conn, tmp_path, watch_timeout_s=2)
        try:
            listed_at = dict(running.watcher.ledger.progress)
            synced = len(read_log(tmp_path))

            def bookmarked() -> dict[str, int]:
                # Only Namespaces change here: any other kind's newer marker is a bookmark.
                out: dict[str, int] = {}
                for e in read_log(tmp_path)[synced:]:
                    if e.kind == WATCH_PROGRESS and e.name != "Namespace":
                        out[e.name] = max(out.get(e.name, 0), int(e.resourceVersion))
                return {k: rv for k, rv in out.items() if rv > int(listed_at[k])}

            async def moving() -> None:
                while True:
                    await namespace(conn, "tick")  # the cluster's version moves on
                    # A consistent list makes the API server catch its cache up
                    # with etcd, which is what lets a quiet kind's bookmarks move.
                    await call(conn, "GET", "/apis/scheduling.k8s.io/v1/priorityclasses")
                    await asyncio.sleep(0.5)

            ticking = asyncio.create_task(moving())
            try:
                await eventually(lambda: bool(bookmarked()), "a newer resume point from a bookmark", 60)
            finally:
                ticking.cancel()
            assert running.watcher.stats.bookmarks > 0
        finally:
            await running.stop()
    resumed = WatchLedger.fold("test", read_log(tmp_path))
    for kind, rv in bookmarked().items():
        assert int(resumed.progress[kind]) >= rv > int(listed_at[kind])


async def test_discovery_takes_the_newest_served_version_and_names_what_is_missing(kube_config: str) -> None:
    async with cluster(kube_config) as conn:

        def watcher(kinds: list[WatchedKind]) -> Watcher:
            return Watcher(conn, _NoSink(), WatchLedger("test"), kinds)

        served = await watcher(list(KINDS_WATCHED)).discover()
        versions = {s.kind: s.api_version for s in served}
        assert versions["ClusterQueue"] == "kueue.x-k8s.io/v1beta2"
        # This server serves resource.k8s.io v1, v1beta2 and v1beta1: v1 wins.
        assert versions["DeviceClass"] == "resource.k8s.io/v1"
        assert versions["Job"] == "batch/v1"
        # A version the server lacks falls back to the next one.
        older_first = WatchedKind(
            "ClusterQueue", "kueue.x-k8s.io", ("v9", "v1beta2"), "clusterqueues", False, True
        )
        [fallback] = await watcher([older_first]).discover()
        assert fallback.api_version == "kueue.x-k8s.io/v1beta2"

        missing = WatchedKind("Topology", "kueue.x-k8s.io", ("v1beta2", "v1beta1"), "topologies", False, True)
        with pytest.raises(
            MissingKinds, match=r"Topology \(kueue.x-k8s.io/v1beta2 or kueue.x-k8s.io/v1beta1\)"
        ):
            await watcher([missing]).discover()
        optional = WatchedKind("Gadget", "example.com", ("v1",), "gadgets", False, False)
        assert await watcher([optional]).discover() == []


async def test_a_user_without_rights_gets_the_request_and_the_reason(kube_config: str) -> None:
    async with cluster(kube_config):
        pass  # the CRDs, installed as the admin
    async with await connect(kube_config, "kueuestream-controller") as conn:
        watcher = Watcher(
            conn, _NoSink(), WatchLedger("test"), [k for k in KINDS_WATCHED if k.kind == "Workload"]
        )
        with pytest.raises(ApiException) as denied:
            await watcher.run()
    message = explain(denied.value)
    assert "403" in message and "GET /apis/kueue.x-k8s.io/v1beta2/workloads" in message
    assert "cannot list resource" in message


class _NoSink:
    async def emit(self, events: object) -> None:
        raise AssertionError(f"nothing should be written here: {events}")
