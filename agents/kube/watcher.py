"""List and watch a cluster's objects into watch events: the Kubernetes source of ``kueue.watch``.

Each change of a watched object becomes one :class:`WatchEvent` carrying the
cluster's name and the object's resourceVersion, handed to a
:class:`WatchSink` (the log). The watcher keeps no state of its own beyond
what the log holds (:mod:`.watch_ledger`):

- A kind the log has never seen is listed; everything listed at start is one
  batch, so the order of a listing decides nothing. Each list is followed by a
  ``WatchProgress`` marker with the list's resourceVersion.
- A kind the log has seen is watched from the resourceVersion the log records
  for it, with no relist, as long as the server still has that version.
- When it does not (410 Gone: the version is older than the server's watch
  cache, as after an API server restart), the kind is listed again and only
  the differences with the log are emitted, as one batch: objects that are
  new or changed, and deletions of those that vanished meanwhile. An object
  whose resourceVersion the log already has is never sent again.
- Bookmarks move the resume point without any object changing; they are
  recorded as ``WatchProgress`` markers.
- 429 (after its Retry-After), 5xx, refused and lost connections are retried
  with backoff for as long as they last: an API server restart only delays
  events.

Events are written by one task, in the order they were received, as many
together as have arrived while the previous write was in flight; a relist's
batch is written contiguously.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, TypeVar

from kueuestream.agents.kube.api_calls import GONE, WatchExpired, get_json, watch_lines
from kueuestream.agents.kube.client import (
    RETRY_FOREVER,
    KubeConnection,
    RetryPolicy,
    is_transient,
    pause_s,
    with_retry,
)
from kueuestream.agents.kube.resources import (
    Discovery,
    ServedKind,
    WatchedKind,
    choose_versions,
    group_version_path,
)
from kueuestream.agents.kube.watch_ledger import WatchLedger
from kueuestream.agents.log_entries import progress_marker
from kueuestream.agents.sources.watch_events import Identified, as_batch, listing_order
from kueuestream.streams.schemas import WatchEvent, WatchEventType

log = logging.getLogger(__name__)
T = TypeVar("T")

PAGE_SIZE = 500
WATCH_TIMEOUT_S = 300
# Events written together at most; more wait for the next write.
MAX_WRITE = 2000
# Events received but not yet written, at most; watches wait beyond that.
MAX_QUEUED = 20_000


class WatchSink(Protocol):
    async def emit(self, events: Sequence[WatchEvent]) -> None:
        """Write ``events`` in order, durably, before returning."""
        ...


class MissingKinds(Exception):
    """The API server serves none of the versions of a kind Kueue needs."""


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class WatchStats:
    """What the watcher did, for reports and benchmarks."""

    lists: int = 0
    relists: int = 0
    listed_objects: int = 0
    list_seconds: float = 0.0
    events: int = 0  # object events passed on
    not_news: int = 0  # events dropped because the log already had them
    bookmarks: int = 0
    reconnects: int = 0
    writes: int = 0
    per_kind_lists: dict[str, int] = field(default_factory=dict)


def _strip(obj: dict[str, Any], served: ServedKind) -> dict[str, Any]:
    # List items come without kind and apiVersion; managedFields is the API
    # server's bookkeeping, often larger than the object, and read by nobody here.
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        meta = {k: v for k, v in meta.items() if k != "managedFields"}
    return {**obj, "apiVersion": served.api_version, "kind": served.kind, "metadata": meta}


def _identity(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return (
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        str(meta.get("resourceVersion") or ""),
    )


def object_event(
    cluster: str,
    served: ServedKind,
    type_: WatchEventType,
    namespace: str,
    name: str,
    rv: str,
    obj: dict[str, Any] | None,
    now: int,
) -> WatchEvent:
    return WatchEvent(
        cluster=cluster,
        kind=served.kind,
        apiVersion=served.api_version,
        namespace=namespace,
        name=name,
        type=type_,
        resourceVersion=rv,
        object=obj,
        timestamp=now,
    )


def list_differences(
    ledger: WatchLedger, served: ServedKind, items: list[dict[str, Any]], list_rv: str, now: int
) -> list[WatchEvent]:
    """The events that bring what ``ledger`` knows of a kind to the listed ``items``; recorded in it.

    New objects are ADDED, objects at another resourceVersion MODIFIED, and
    known objects missing from the list DELETED; an object at the version the
    ledger has gives no event.
    """
    known = ledger.of_kind(served.kind)
    out: list[WatchEvent] = []
    seen: set[tuple[str, str, str]] = set()
    for obj in items:
        namespace, name, rv = _identity(obj)
        key = (served.kind, namespace, name)
        seen.add(key)
        if known.get(key) == rv:
            continue
        kind = WatchEventType.MODIFIED if key in known else WatchEventType.ADDED
        out.append(object_event(ledger.cluster, served, kind, namespace, name, rv, obj, now))
    for key in sorted(set(known) - seen):
        # Gone while nobody watched: its deletion happened at some version up to
        # the list's, which is the newest the watcher can vouch for.
        out.append(
            object_event(ledger.cluster, served, WatchEventType.DELETED, key[1], key[2], list_rv, None, now)
        )
    for event in out:
        ledger.record(event)
    return out


class Watcher:
    """Lists and watches ``kinds`` on one cluster; ``run()`` until cancelled."""

    def __init__(
        self,
        conn: KubeConnection,
        sink: WatchSink,
        ledger: WatchLedger,
        kinds: Sequence[WatchedKind],
        *,
        clock: Callable[[], int] = wall_clock_ms,
        retry: RetryPolicy = RETRY_FOREVER,
        page_size: int = PAGE_SIZE,
        watch_timeout_s: int = WATCH_TIMEOUT_S,
    ) -> None:
        self.conn = conn
        self.sink = sink
        self.ledger = ledger
        self.kinds = list(kinds)
        self.clock = clock
        self.retry = retry
        self.page_size = page_size
        self.watch_timeout_s = watch_timeout_s
        self.stats = WatchStats()
        self.discovery: Discovery | None = None
        # Set once the first listing (or the resume points) is written: from
        # then on the log holds the cluster as of the watcher's start.
        self.synced = asyncio.Event()
        self._queue: asyncio.Queue[list[WatchEvent]] = asyncio.Queue()
        self._queued = 0
        self._room = asyncio.Condition()
        self._written = 0
        self._written_cond = asyncio.Condition()
        self._enqueued = 0

    @property
    def cluster(self) -> str:
        return self.ledger.cluster

    # --- running ------------------------------------------------------------------

    async def run(self) -> None:
        """Discover, list what the log lacks, then follow every kind until cancelled."""
        writer = asyncio.create_task(self._write_loop(), name="watch-writer")
        followers: list[asyncio.Task[None]] = []
        try:
            served = await self.discover()
            fresh = [s for s in served if s.kind not in self.ledger.progress]
            if fresh:
                await self._enqueue(await self._initial_listing(fresh))
            await self.flush()
            self.synced.set()
            followers = [asyncio.create_task(self._follow(s), name=f"watch-{s.kind}") for s in served]
            await asyncio.gather(*followers, writer)
        finally:
            for task in [*followers, writer]:
                task.cancel()
            await asyncio.gather(*followers, writer, return_exceptions=True)

    async def discover(self) -> list[ServedKind]:
        """Each kind at the newest version the server serves; :class:`MissingKinds` if Kueue's are absent."""
        wanted = sorted({group_version_path(k.group, v) for k in self.kinds for v in k.versions})
        resources: dict[str, list[dict[str, Any]]] = {}
        for path in wanted:
            try:
                body = await self._call(partial(get_json, self.conn.api, path))
            except Exception as exc:
                if getattr(exc, "status", None) == 404:
                    continue  # the group or version is not served at all
                raise
            resources[path] = list(body.get("resources") or [])
        found = choose_versions(self.kinds, resources)
        self.discovery = found
        if found.missing:
            raise MissingKinds(found.missing_message())
        for absent in found.absent:
            log.warning(
                "%s: the API server serves none of %s; not watched",
                absent.kind,
                ", ".join(f"{absent.group}/{v}" for v in absent.versions),
            )
        return found.served

    async def flush(self) -> None:
        """Wait until everything received so far is written."""
        target = self._enqueued
        async with self._written_cond:
            await self._written_cond.wait_for(lambda: self._written >= target)

    # --- listing ------------------------------------------------------------------

    async def _list(self, served: ServedKind) -> tuple[list[dict[str, Any]], str]:
        """Every object of a kind and the list's resourceVersion, page by page."""
        started = time.perf_counter()
        while True:
            items: list[dict[str, Any]] = []
            token = ""
            try:
                while True:
                    query = [*served.query(), ("limit", str(self.page_size))]
                    if token:
                        query.append(("continue", token))
                    body = await self._call(partial(get_json, self.conn.api, served.path, query))
                    items += [_strip(item, served) for item in body.get("items") or []]
                    meta = body.get("metadata") or {}
                    token = str(meta.get("continue") or "")
                    if not token:
                        rv = str(meta.get("resourceVersion") or "")
                        break
            except WatchExpired:
                continue  # the continue token outlived the server's history: start over
            except Exception as exc:
                if getattr(exc, "status", None) == GONE:
                    continue
                raise
            self.stats.lists += 1
            self.stats.listed_objects += len(items)
            self.stats.list_seconds += time.perf_counter() - started
            self.stats.per_kind_lists[served.kind] = self.stats.per_kind_lists.get(served.kind, 0) + 1
            return items, rv

    async def _initial_listing(self, kinds: Sequence[ServedKind]) -> list[WatchEvent]:
        now = self.clock()
        upserts: list[WatchEvent] = []
        markers: list[WatchEvent] = []
        for served in kinds:
            items, rv = await self._list(served)
            upserts += list_differences(self.ledger, served, items, rv, now)
            markers.append(self._marker(served, rv, now))
        return [*as_batch(self._ordered(upserts), now, self.cluster), *markers]

    async def _relist(self, served: ServedKind) -> None:
        self.stats.relists += 1
        items, rv = await self._list(served)
        now = self.clock()
        changes = list_differences(self.ledger, served, items, rv, now)
        log.info("%s relisted at resourceVersion %s: %d changes", served.kind, rv, len(changes))
        batch = as_batch(self._ordered(changes), now, self.cluster)
        await self._enqueue([*batch, self._marker(served, rv, now)])

    def _marker(self, served: ServedKind, rv: str, now: int) -> WatchEvent:
        marker = progress_marker(self.cluster, served.kind, rv, now)
        self.ledger.record(marker)
        return marker

    def _ordered(self, events: list[WatchEvent]) -> list[WatchEvent]:
        # Referenced objects before those that refer to them, deletions the other way round.
        def item(e: WatchEvent) -> Identified:
            return Identified((e.kind, e.namespace, e.name), e.apiVersion, e.object or {})

        by_id = {(e.kind, e.namespace, e.name): e for e in events}
        upserts = [by_id[i.id] for i in listing_order(item(e) for e in events if e.object is not None)]
        deletes = [by_id[i.id] for i in reversed(listing_order(item(e) for e in events if e.object is None))]
        return upserts + deletes

    # --- watching -----------------------------------------------------------------

    async def _follow(self, served: ServedKind) -> None:
        attempt = 0
        while True:
            rv = self.ledger.progress.get(served.kind)
            try:
                if rv is None:
                    await self._relist(served)
                    continue
                query = [*served.query(), ("resourceVersion", rv)]
                opened = time.monotonic()
                async for raw in watch_lines(
                    self.conn.api, served.path, query, server_timeout_s=self._timeout_s()
                ):
                    attempt = 0
                    await self._on_event(served, raw)
                # The server ended the watch (its timeout): go on from where it was,
                # at once unless it ends watches as soon as they open.
                if time.monotonic() - opened < 1.0:
                    attempt += 1
                    await asyncio.sleep(self.retry.backoff_s(attempt))
            except WatchExpired:
                log.info("%s: resourceVersion %s expired (410); relisting", served.kind, rv)
                self.ledger.progress.pop(served.kind, None)
                attempt = 0
                continue
            except Exception as exc:
                if getattr(exc, "status", None) == GONE:
                    self.ledger.progress.pop(served.kind, None)
                    continue
                if not is_transient(exc):
                    raise
                attempt += 1
                self.stats.reconnects += 1
                delay = pause_s(exc, attempt, self.retry)
                log.info("%s: watch failed (%s); again in %.1fs", served.kind, _short(exc), delay)
                await asyncio.sleep(delay)

    def _timeout_s(self) -> int:
        # Spread the reconnects of the kinds, as client-go does.
        return int(self.watch_timeout_s * (1 + random.random()))

    async def _on_event(self, served: ServedKind, raw: dict[str, Any]) -> None:
        type_ = raw.get("type")
        obj = raw.get("object")
        if not isinstance(obj, dict):
            return
        if type_ == "BOOKMARK":
            self.stats.bookmarks += 1
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            if rv and rv != self.ledger.progress.get(served.kind):
                await self._enqueue([self._marker(served, rv, self.clock())])
            return
        if type_ not in ("ADDED", "MODIFIED", "DELETED"):
            return
        namespace, name, rv = _identity(obj)
        kind = WatchEventType(type_)
        body = None if kind == WatchEventType.DELETED else _strip(obj, served)
        event = object_event(self.cluster, served, kind, namespace, name, rv, body, self.clock())
        if not self.ledger.is_news(event):
            self.stats.not_news += 1
            # Still progress: the watch resumes after it.
            self.ledger.progress[served.kind] = rv
            return
        self.ledger.record(event)
        self.stats.events += 1
        await self._enqueue([event])

    # --- writing ------------------------------------------------------------------

    async def _enqueue(self, events: list[WatchEvent]) -> None:
        if not events:
            return
        async with self._room:
            await self._room.wait_for(lambda: self._queued < MAX_QUEUED)
            self._queued += len(events)
        self._enqueued += len(events)
        self._queue.put_nowait(events)

    async def _write_loop(self) -> None:
        while True:
            group = await self._queue.get()
            while not self._queue.empty() and len(group) < MAX_WRITE:
                group += self._queue.get_nowait()
            await self._call(partial(self.sink.emit, group))
            self.stats.writes += 1
            async with self._room:
                self._queued -= len(group)
                self._room.notify_all()
            async with self._written_cond:
                self._written += len(group)
                self._written_cond.notify_all()

    async def _call(self, call: Callable[[], Awaitable[T]]) -> T:
        return await with_retry(call, self.retry)


def _short(exc: BaseException) -> str:
    status = getattr(exc, "status", None)
    return f"{type(exc).__name__} {status}" if status else f"{type(exc).__name__}: {exc}"
