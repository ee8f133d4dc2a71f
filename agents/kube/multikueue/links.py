"""The manager's links to its worker clusters: one connection and one watch per MultiKueueCluster.

For every MultiKueueCluster the manager's watch brings, a link loads the
worker's kubeconfig (:mod:`.kubeconfigs`), connects, and watches the worker's
Workloads and Jobs that carry our origin label
(``kueue.x-k8s.io/multikueue-origin=<origin>``) into ``kueue.watch``, with the
cluster name ``multikueue:<MultiKueueCluster name>``, through the same
:class:`~kueuestream.agents.kube.watcher.Watcher` as the manager's own watch
(so it resumes from the resourceVersions in the log after a restart).

What the link knows of the connection goes into the log too, as a
``ClusterConnection`` watch event (``object = {connected, reason, message}``)
each time it changes: connected (``Active``/``Connected``), a kubeconfig that
cannot be loaded (``BadKubeConfig``, ``InsecureKubeConfig``), or an API server
that does not answer or refuses us (``ClientConnectionFailed``). The API
server is probed every ``probe_s`` seconds while the watch runs, so a lost
worker is seen within that time even when no watch event would tell. A link
that cannot connect tries again every ``retry_s`` seconds (a Secret created
later is found then). A connected link reads its kubeconfig again every
``retry_s`` seconds and connects anew when the content changed (a rotated
Secret or file; one that no longer loads is reported as above). A changed
MultiKueueCluster spec restarts its link, a changed origin every link; a
deleted one stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kueuestream.admission.multikueue import names
from kueuestream.admission.multikueue.names import ORIGIN_LABEL, WORKER_CLUSTER_PREFIX, worker_cluster
from kueuestream.agents.kube.api_calls import get_json
from kueuestream.agents.kube.client import KubeConnection, RetryPolicy, with_retry
from kueuestream.agents.kube.multikueue.kubeconfigs import (
    KubeconfigProblem,
    connect_kubeconfig,
    parse_kubeconfig,
    read_kubeconfig,
)
from kueuestream.agents.kube.resources import KUEUE_GROUP, WatchedKind
from kueuestream.agents.kube.rest import KubeObjects, reason_of
from kueuestream.agents.kube.watch_ledger import WatchLedger
from kueuestream.agents.kube.watcher import Watcher, WatchSink, wall_clock_ms
from kueuestream.streams import codec
from kueuestream.streams.schemas import WatchEvent, WatchEventType

log = logging.getLogger(__name__)

CLUSTER_CONNECTION = names.CLUSTER_CONNECTION_KIND
MULTIKUEUE_CLUSTER = "MultiKueueCluster"
CONNECTED = "Connected"

PROBE_TIMEOUT_S = 5.0
# A probe rides out a brief 429 (a worker's storage initialising) before reporting a failure.
PROBE_RETRY = RetryPolicy(initial_s=0.2, max_s=1.0, max_attempts=3)


def worker_kinds(origin: str) -> list[WatchedKind]:
    """What is watched in a worker: the Workloads and Jobs that our manager created there."""
    selector = f"{ORIGIN_LABEL}={origin}"
    return [
        WatchedKind(
            "Workload", KUEUE_GROUP, ("v1beta2", "v1beta1"), "workloads", True, True, label_selector=selector
        ),
        WatchedKind("Job", "batch", ("v1",), "jobs", True, True, label_selector=selector),
    ]


@dataclass(frozen=True, slots=True)
class Connection:
    """What the manager knows of its connection to one worker."""

    connected: bool
    reason: str
    message: str

    def as_object(self) -> dict[str, Any]:
        return {"connected": self.connected, "reason": self.reason, "message": self.message}


def connection_event(name: str, state: Connection, now: int) -> WatchEvent:
    """The ``ClusterConnection`` control event for MultiKueueCluster ``name``."""
    return WatchEvent(
        cluster=worker_cluster(name),
        kind=CLUSTER_CONNECTION,
        apiVersion=names.CLUSTER_CONNECTION_API_VERSION,
        name=name,
        type=WatchEventType.MODIFIED,
        object=state.as_object(),
        timestamp=now,
    )


def connections_in(events: Iterable[WatchEvent]) -> dict[str, Connection]:
    """The last recorded connection state of each worker, from the log's watch events."""
    out: dict[str, Connection] = {}
    for event in events:
        if event.kind != CLUSTER_CONNECTION or not event.cluster.startswith(WORKER_CLUSTER_PREFIX):
            continue
        obj = event.object or {}
        out[event.name] = Connection(
            bool(obj.get("connected")), str(obj.get("reason", "")), str(obj.get("message", ""))
        )
    return out


def _spec_of(manifest: dict[str, Any]) -> bytes:
    return codec.encode_json(manifest.get("spec") or {})


LedgerSource = Callable[[str], Awaitable[WatchLedger]]


class WorkerLinks:
    """Links to every worker the manager's MultiKueueClusters name; fed the manager's watch events."""

    def __init__(
        self,
        manager: KubeObjects,
        sink: WatchSink,
        ledgers: LedgerSource,
        *,
        namespace: str = names.DEFAULT_SECRETS_NAMESPACE,
        origin: str = names.DEFAULT_ORIGIN,
        known: dict[str, Connection] | None = None,
        probe_s: float = 1.0,
        retry_s: float = 5.0,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.manager = manager
        self.sink = sink
        self.ledgers = ledgers
        self.namespace = namespace
        self.origin = origin
        self.known: dict[str, Connection] = dict(known or {})
        self.probe_s = probe_s
        self.retry_s = retry_s
        self.clock = clock
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.connections: dict[str, KubeConnection] = {}
        self._specs: dict[str, bytes] = {}
        self._manifests: dict[str, dict[str, Any]] = {}
        self._objects: dict[str, KubeObjects] = {}
        self._ledgers: dict[str, WatchLedger] = {}
        self._report_lock = asyncio.Lock()

    # --- input ---------------------------------------------------------------------

    def observe(self, events: Sequence[WatchEvent]) -> None:
        """Start, restart or stop links for the manager's MultiKueueCluster events among ``events``."""
        for event in events:
            if event.kind != MULTIKUEUE_CLUSTER or event.cluster.startswith(WORKER_CLUSTER_PREFIX):
                continue
            if event.type == WatchEventType.DELETED or event.object is None:
                self._stop(event.name)
                continue
            spec = _spec_of(event.object)
            if self._specs.get(event.name) == spec and event.name in self.tasks:
                continue
            self._start(event.name, event.object, spec)

    def set_origin(self, origin: str) -> None:
        """Watch copies labelled with ``origin`` from now on: every link starts again."""
        if origin == self.origin:
            return
        self.origin = origin
        for name in sorted(self.tasks):
            self._start(name, self._manifests[name], self._specs[name])

    def _start(self, name: str, manifest: dict[str, Any], spec: bytes) -> None:
        self._stop(name)
        self._specs[name] = spec
        self._manifests[name] = manifest
        self.tasks[name] = asyncio.create_task(self._link(name, manifest), name=f"multikueue-link-{name}")

    def client(self, name: str) -> KubeObjects | None:
        """A client of worker ``name`` while its link holds a connection."""
        conn = self.connections.get(name)
        if conn is None:
            return None
        objects = self._objects.get(name)
        if objects is None or objects.api is not conn.api:
            objects = self._objects[name] = KubeObjects(conn.api)
        return objects

    def knows(self, name: str) -> bool:
        """Whether a MultiKueueCluster of that name has a link."""
        return name in self.tasks

    def _stop(self, name: str) -> None:
        self._specs.pop(name, None)
        self._manifests.pop(name, None)
        task = self.tasks.pop(name, None)
        if task is not None:
            task.cancel()

    async def close(self) -> None:
        """Stop every link and close their connections."""
        tasks = list(self.tasks.values())
        self.tasks.clear()
        self._specs.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- one link ------------------------------------------------------------------

    async def _report(self, name: str, state: Connection) -> None:
        async with self._report_lock:
            if self.known.get(name) == state:
                return
            await self.sink.emit([connection_event(name, state, self.clock())])
            self.known[name] = state
            log.info("MultiKueueCluster %s: %s %s", name, state.reason, state.message)

    async def _ledger(self, name: str) -> WatchLedger:
        ledger = self._ledgers.get(name)
        if ledger is None:
            ledger = await self.ledgers(worker_cluster(name))
            self._ledgers[name] = ledger
        return ledger

    async def _link(self, name: str, manifest: dict[str, Any]) -> None:
        while True:
            try:
                raw = await read_kubeconfig(manifest, self.manager, self.namespace)
                conn = await connect_kubeconfig(parse_kubeconfig(raw))
            except KubeconfigProblem as problem:
                await self._report(name, Connection(False, problem.reason, problem.message))
                await asyncio.sleep(self.retry_s)
                continue
            except Exception as exc:  # the manager's API server failed us: try again
                log.warning("MultiKueueCluster %s: reading its kubeconfig failed: %s", name, reason_of(exc))
                await asyncio.sleep(self.retry_s)
                continue
            self.connections[name] = conn
            try:
                rotated = await self._serve(name, conn, functools.partial(self._rotated, name, manifest, raw))
            finally:
                if self.connections.get(name) is conn:
                    del self.connections[name]
                await conn.close()
            if rotated:
                # The new kubeconfig may name another server, whose resourceVersions mean nothing
                # next to the old one's: its watch starts with a list, as upstream's new client does.
                ledger = self._ledgers.get(name)
                if ledger is not None:
                    ledger.progress.clear()
            else:
                await asyncio.sleep(self.retry_s)

    async def _probe(self, name: str, conn: KubeConnection) -> bool:
        """Whether the worker answers a list of our Workloads; the answer reported if it changed."""
        path = f"/apis/{KUEUE_GROUP}/v1beta2/workloads"
        query = [("limit", "1"), ("labelSelector", f"{ORIGIN_LABEL}={self.origin}")]
        try:
            await with_retry(lambda: get_json(conn.api, path, query, timeout_s=PROBE_TIMEOUT_S), PROBE_RETRY)
        except Exception as exc:
            await self._report(name, Connection(False, names.REASON_CONNECTION_FAILED, reason_of(exc)))
            return False
        await self._report(name, Connection(True, names.REASON_ACTIVE, CONNECTED))
        return True

    async def _rotated(self, name: str, manifest: dict[str, Any], loaded: bytes) -> bool:
        """Whether the kubeconfig now differs from ``loaded`` (upstream reloads a changed Secret too)."""
        try:
            raw = await read_kubeconfig(manifest, self.manager, self.namespace)
        except KubeconfigProblem:
            return True  # gone or unusable: the link reports why when it loads it again
        except Exception as exc:  # the manager's API server failed us: keep the worker's watch
            log.warning("MultiKueueCluster %s: reading its kubeconfig failed: %s", name, reason_of(exc))
            return False
        if raw != loaded:
            log.info("MultiKueueCluster %s: its kubeconfig changed; connecting again", name)
            return True
        return False

    async def _serve(self, name: str, conn: KubeConnection, rotated: Callable[[], Awaitable[bool]]) -> bool:
        """Watch the worker while it answers the probes; True when it stopped for a changed kubeconfig."""
        if not await self._probe(name, conn):
            return False
        watcher = Watcher(conn, self.sink, await self._ledger(name), worker_kinds(self.origin))
        task = asyncio.create_task(watcher.run(), name=f"multikueue-watch-{name}")
        loop = asyncio.get_running_loop()
        reread_at = loop.time() + self.retry_s
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=self.probe_s)
                if task.done():
                    break
                await self._probe(name, conn)
                if loop.time() >= reread_at:
                    reread_at = loop.time() + self.retry_s
                    if await rotated():
                        return True
            exc = task.exception()
            if exc is not None:
                await self._report(name, Connection(False, names.REASON_CONNECTION_FAILED, reason_of(exc)))
            return False
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
