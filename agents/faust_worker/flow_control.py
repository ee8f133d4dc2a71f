"""Faust's flow control, fetching again the records a resume empties out of the streams' buffers.

Faust (faust-streaming 0.15.3) resumes its flow control when a rebalance's
table recovery starts and again when it completes, and each resume empties
every stream's buffer. The last resume comes after the consumer has been
sought to the group's committed offsets and the streams' partitions resumed,
so what it empties are records of the new assignment, fetched from those
offsets: Faust's read offsets are already past them and the consumer fetches
on from after them, so no stream ever gets them. Seen in the snapshot tests
as a restarted worker whose agent got a partition's first record at the
partition's end; when the records emptied out are a partition's last,
nothing follows them and the partition waits with a live worker until the
stall watch ends it.

:class:`RefetchingFlowControl` empties the buffers as Faust does, then seeks
each partition of the agents' topics whose records it emptied back to the
first of them, so they are fetched and handed to the streams again (the
Tables' changelogs are Faust's recovery's to read, from offsets it seeks
itself). Records a stream got between the resume and the seek come again
after them; the agents take any offset but the one they expect next as the
log's records out of order and rebuild the partition from the log up to it
(``Runtime.catch_up``, ``Runtime.ingest_catch_up``), so each record still
counts once, in order.
Records from before the rebalance that the resume at the recovery's start
empties are sought past by Faust's own seek to the committed offsets, which
comes after it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from faust.types import TP
from mode.utils.queues import FlowControlEvent

log = logging.getLogger(__name__)

Seek = Callable[[TP, int], Awaitable[None]]


class RefetchingFlowControl(FlowControlEvent):
    def __init__(self, seek: Seek, topics: Iterable[str], **kwargs: Any) -> None:
        """``seek`` moves the consumer; ``topics`` are those whose emptied records are fetched again."""
        super().__init__(**kwargs)
        self._seek = seek
        self._topics = frozenset(topics)
        self._refetching: set[asyncio.Task[None]] = set()

    def resume(self) -> None:
        emptied = {tp: offsets for tp, offsets in self.buffered().items() if tp.topic in self._topics}
        super().resume()
        for tp, offsets in sorted(emptied.items()):
            first = min(offsets)
            log.info(
                "%s[%d]: %d record(s) from offset %d emptied out of a stream's buffer as the flow "
                "resumed; fetching them again",
                tp.topic,
                tp.partition,
                len(offsets),
                first,
            )
            task = asyncio.ensure_future(self._refetch(tp, first))
            self._refetching.add(task)
            task.add_done_callback(self._refetching.discard)

    def buffered(self) -> dict[TP, list[int]]:
        """The offsets of the records in the buffers a resume empties, per partition."""
        out: dict[TP, list[int]] = {}
        for queue in list(self._queues):
            for item in list(getattr(queue, "_queue", ())):
                message = getattr(item, "message", None)
                if message is not None:
                    out.setdefault(TP(message.topic, message.partition), []).append(message.offset)
        return out

    async def _refetch(self, tp: TP, offset: int) -> None:
        try:
            await self._seek(tp, offset)
        except Exception as exc:  # revoked meanwhile: its next owner reads it from the committed offset
            log.warning("%s[%d]: could not seek back to offset %d: %r", tp.topic, tp.partition, offset, exc)
