"""The origins an admission partition has applied, so a copy of a record is applied once.

A record's origin is the input that produced it: a stream, the input's offset
in it and the record's index among that input's records
(:class:`kueuestream.agents.log_entries.Origin`). A copy comes from a runtime
that produced an input's records again: after a crash, the inputs it had not
acknowledged; after a rebuild, the records of the inputs since the last
snapshot found missing from the log. Either way the copy's input lies a
bounded distance behind the newest input the partition has applied; a record
that is not a copy but was repaired can also come after later ones, so a
high-water mark alone would drop it.

So each stream keeps the exact set of origins applied within
:data:`HORIZON` input offsets of its newest, and counts any origin further
back as applied (a copy). That keeps a partition's snapshot, which carries
these sets, from growing with the length of history. The rule depends only on
the records, in order, so a replay makes the same choice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Input offsets behind a stream's newest within which origins are told apart. Copies
# lie within an unacknowledged window or a snapshot interval (thousands of inputs).
HORIZON = 100_000
# An origin's key: its input offset above, its index (below 2**20) in the low bits.
_INDEX_BITS = 20


@dataclass(slots=True)
class SeenOrigins:
    """The origins of one stream applied, within ``horizon`` input offsets of the newest."""

    horizon: int = HORIZON
    newest: int = -1
    keys: set[int] = field(default_factory=set)
    # The newest input offset when keys were last pruned.
    _pruned_at: int = 0

    def first_time(self, offset: int, index: int) -> bool:
        """Note the origin; False when it was applied before or lies beyond the horizon."""
        if offset <= self.newest - self.horizon:
            return False
        key = offset << _INDEX_BITS | index
        if key in self.keys:
            return False
        self.keys.add(key)
        if offset > self.newest:
            self.newest = offset
            if offset - self._pruned_at >= self.horizon // 4:
                self._prune()
        return True

    def _prune(self) -> None:
        floor = (self.newest - self.horizon + 1) << _INDEX_BITS
        self.keys = {key for key in self.keys if key >= floor}
        self._pruned_at = self.newest
