"""The inputs a previous owner of a partition may have processed already, and their outputs.

A worker takes over a partition at the group's committed offset, or, right
after restoring a snapshot, wherever Faust starts it. The previous owner may
have processed the inputs after that point, up to its death, and sent their
admission records before it could commit: processing them again sends those
records a second time. Inputs before the partition's end at takeover are in
that window, so their admission records are sent only if no record with the
same origin is in ``kueue.admission`` yet; inputs after it are new.

Which records are there is read once per target partition, from the point
before which no output of the window's inputs can be (the ends a snapshot
recorded, or 0), and kept up to date with what is sent: the rebuild's check
for missing records and the window share one :class:`LogOrigins`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from kueuestream.agents.outputs import Out, Role

OriginKey = tuple[str, int, int]
# Reads the origins present in one admission partition from an offset on.
ReadOrigins = Callable[[int, int], Awaitable[set[OriginKey]]]


def origin_key(out: Out) -> OriginKey | None:
    if out.role != Role.ADMISSION or out.origin is None:
        return None
    return (out.origin.stream, *out.origin.key())


class LogOrigins:
    """The origins of the records of ``kueue.admission``, read once per partition from
    ``scan_from`` (0 where it names none) and kept up to date with what :meth:`missing` lets
    through to be sent."""

    def __init__(self, scan_from: Mapping[int, int], read: ReadOrigins) -> None:
        self.scan_from = dict(scan_from)
        self._read = read
        self._present: dict[int, set[OriginKey]] = {}

    async def missing(self, outs: Sequence[Out]) -> list[Out]:
        """``outs`` without the admission records already in the log; those kept count as present."""
        kept = []
        for out in outs:
            key = origin_key(out)
            if key is None:
                kept.append(out)
                continue
            present = self._present.get(out.partition)
            if present is None:
                present = await self._read(out.partition, self.scan_from.get(out.partition, 0))
                self._present[out.partition] = present
            if key not in present:
                present.add(key)
                kept.append(out)
        return kept


@dataclass(frozen=True)
class ResendWindow:
    """The inputs before ``until`` may have been processed already: their outputs go through
    ``origins``."""

    until: int
    origins: LogOrigins

    def covers(self, offset: int) -> bool:
        return offset < self.until
