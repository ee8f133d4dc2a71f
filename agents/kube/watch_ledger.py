"""What a watcher has passed on, by cluster: each object's resourceVersion and each kind's progress.

It is folded from ``kueue.watch`` when a watcher starts and kept up to date as
it receives events, so the log is the watcher's only state:

- ``progress[kind]`` is where the watch of a kind resumes: the resourceVersion
  of the last record about that kind, an object's event or a ``WatchProgress``
  marker (written after a list and on bookmarks). Within one kind, records are
  written in the order the server sent them, so the last one is the newest.
- ``objects[(kind, namespace, name)]`` is the resourceVersion of each object
  that exists as far as the log knows. An event that would not change it (the
  same version again, a deletion of an object never seen) is not news and is
  not passed on; after a relist, the difference between the list and these is
  exactly the events that were missed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

from kueuestream.agents.log_entries import WATCH_PROGRESS, control_kind
from kueuestream.streams import codec
from kueuestream.streams.log import Log
from kueuestream.streams.schemas import WatchEvent, WatchEventType

ObjKey = tuple[str, str, str]  # kind, namespace, name


@dataclass(slots=True)
class WatchLedger:
    cluster: str
    objects: dict[ObjKey, str] = field(default_factory=dict)
    progress: dict[str, str] = field(default_factory=dict)

    def is_news(self, event: WatchEvent) -> bool:
        """Whether passing ``event`` on would change what the log says about its object."""
        key = (event.kind, event.namespace, event.name)
        known = self.objects.get(key)
        if event.type == WatchEventType.DELETED:
            return known is not None
        return known is None or known != event.resourceVersion

    def record(self, event: WatchEvent) -> None:
        """Take in one record of this cluster's watch log (or one about to be written)."""
        if event.cluster != self.cluster:
            return
        kind = control_kind(event.object)
        if kind == WATCH_PROGRESS:
            if event.resourceVersion:
                self.progress[event.name] = event.resourceVersion
            return
        if kind:
            return  # batch markers say nothing about objects
        key = (event.kind, event.namespace, event.name)
        if event.type == WatchEventType.DELETED:
            self.objects.pop(key, None)
        else:
            self.objects[key] = event.resourceVersion
        if event.resourceVersion:
            self.progress[event.kind] = event.resourceVersion

    def of_kind(self, kind: str) -> dict[ObjKey, str]:
        return {key: rv for key, rv in self.objects.items() if key[0] == kind}

    @classmethod
    def fold(cls, cluster: str, events: Iterable[WatchEvent]) -> WatchLedger:
        ledger = cls(cluster)
        for event in events:
            ledger.record(event)
        return ledger


async def watch_events_in(log: Log, topic: str) -> AsyncIterator[WatchEvent]:
    """Every well-formed watch event of ``topic`` (partition 0, the only one), oldest first.

    A record that does not decode was refused by ingest when it was read; it
    says nothing about what a watcher passed on.
    """
    async for record in log.read(topic, 0):
        try:
            yield codec.decode(record.value, WatchEvent)
        except codec.DecodeError:
            continue


async def ledger_from_log(log: Log, topic: str, cluster: str) -> WatchLedger:
    ledger = WatchLedger(cluster)
    async for event in watch_events_in(log, topic):
        ledger.record(event)
    return ledger
