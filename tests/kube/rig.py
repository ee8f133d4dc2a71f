"""What the watcher tests share: objects on the real API server, and a watcher over a real log.

Every name is unique per test (``unique``), namespaced objects go into a
namespace of the test's own: the API server outlives tests and sessions, and
without a namespace controller a namespace is never really deleted.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kueuestream.agents.kube.api_calls import request_json
from kueuestream.agents.kube.client import KubeConnection, connect, with_retry
from kueuestream.agents.kube.crd_install import install_crds
from kueuestream.agents.kube.log_sink import LogSink
from kueuestream.agents.kube.resources import kinds_to_watch
from kueuestream.agents.kube.watch_ledger import WatchLedger, ledger_from_log
from kueuestream.agents.kube.watcher import Watcher
from kueuestream.agents.log_entries import control_kind
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.schemas import WatchEvent
from tests.helpers import cluster_queue_manifest, flavor_manifest, local_queue_manifest

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
WATCH_TOPIC = TopicNames().watch
# Bound on waiting for something the watcher should see within a second or so.
TIMEOUT_S = 30.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@asynccontextmanager
async def cluster(kube_config: str, context: str | None = None) -> AsyncIterator[KubeConnection]:
    """A connection to the test API server, with our CRDs installed."""
    async with await connect(kube_config, context) as conn:
        await install_crds(conn)
        yield conn


async def call(conn: KubeConnection, method: str, path: str, body: Any = None, **kw: Any) -> Any:
    return await with_retry(lambda: request_json(conn.api, method, path, body=body, **kw))


async def create(conn: KubeConnection, path: str, body: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = await call(conn, "POST", path, body)
    return result


async def merge_patch(conn: KubeConnection, path: str, patch: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = await call(
        conn, "PATCH", path, patch, content_type="application/merge-patch+json"
    )
    return result


async def delete(conn: KubeConnection, path: str) -> None:
    await call(conn, "DELETE", path)


async def namespace(conn: KubeConnection, prefix: str = "watch") -> str:
    name = unique(prefix)
    await create(
        conn, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


def flavor(name: str) -> dict[str, Any]:
    return flavor_manifest(name)


def cluster_queue(name: str, flavor_name: str, cpu: str) -> dict[str, Any]:
    """A ClusterQueue of ``cpu`` cpus in flavor ``flavor_name``."""
    return cluster_queue_manifest(name, [(["cpu"], [(flavor_name, {"cpu": cpu})])])


def local_queue(ns: str, name: str, cq: str) -> dict[str, Any]:
    return local_queue_manifest(name, cq, ns)


def read_log(directory: Path) -> list[WatchEvent]:
    """Every watch event in the log under ``directory``, in log order."""
    with FileLog(directory, read_only=True) as log:
        return [codec.decode(r.value, WatchEvent) for r in log.read_sync(WATCH_TOPIC, 0)]


def object_events(events: list[WatchEvent], names: set[str]) -> list[tuple[str, str, str]]:
    """(type, kind, name) of the object events about ``names``, in order."""
    return [(e.type.value, e.kind, e.name) for e in events if not control_kind(e.object) and e.name in names]


@dataclass
class RunningWatcher:
    watcher: Watcher
    log: FileLog
    task: asyncio.Task[None]

    async def stop(self) -> None:
        await self.watcher.flush()
        self.task.cancel()
        with suppress(asyncio.CancelledError):
            await self.task
        await self.log.close()


async def start_watcher(conn: KubeConnection, directory: Path, **kw: Any) -> RunningWatcher:
    """A watcher of the whole test cluster into the file log at ``directory``, once it has synced."""
    log = FileLog(directory)
    ledger: WatchLedger = await ledger_from_log(log, WATCH_TOPIC, "test")
    watcher = Watcher(conn, LogSink(log, WATCH_TOPIC), ledger, kinds_to_watch(), **kw)
    task = asyncio.create_task(watcher.run())
    synced = asyncio.create_task(watcher.synced.wait())
    done, _ = await asyncio.wait({task, synced}, timeout=120, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        synced.cancel()
        task.result()  # raises what stopped it
    if synced not in done:
        task.cancel()
        raise TimeoutError("the watcher did not sync within 120s")
    return RunningWatcher(watcher, log, task)


async def eventually(check: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:g}s: {what}")
        await asyncio.sleep(0.05)
