"""Watch events into ``kueue.watch`` of a log (Kafka, or the embedded file log)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kueuestream.streams import codec
from kueuestream.streams.log import Log
from kueuestream.streams.schemas import WatchEvent
from kueuestream.streams.topics import watch_key


class LogSink:
    """Appends watch events to the one partition of the watch topic, keyed by object."""

    def __init__(self, log: Log, topic: str) -> None:
        self.log = log
        self.topic = topic
        # Called before every append; raises to forbid it (a replica that lost its Lease).
        self.guard: Callable[[], None] | None = None

    async def emit(self, events: Sequence[WatchEvent]) -> None:
        if self.guard is not None:
            self.guard()
        records = [(watch_key(e.cluster, e.kind, e.namespace, e.name), codec.encode(e)) for e in events]
        await self.log.append_many(self.topic, records, partition=0)
