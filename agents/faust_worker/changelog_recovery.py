"""Faust's table recovery, told where each changelog's last readable record is.

On every assignment Faust restores the Tables from their changelogs and waits
until it has read each changelog partition up to its last offset, end offset
minus one. With ``processing_guarantee="exactly_once"`` the changelogs are
written in transactions, so the last offset of a partition is a commit marker
(or an aborted transaction), which a ``read_committed`` consumer never gets.
faust-streaming 0.15.3 then waits for its changelog queue to stay empty for
two rounds of 5 s before it notices (``Recovery._slurp_changelogs``,
``detect_aborted_tx``), so every restart and every rebalance stopped the
worker for about 10 s before it processed anything.

Here the highwater of each active changelog partition is the offset of its
last record a ``read_committed`` reader gets
(:meth:`~kueuestream.streams.kafka_log.KafkaLog.last_visible_offsets`), so
recovery ends when that record has been applied. Should reading the tails
fail, Faust's own highwaters stay, and with them its wait.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from faust.tables import TableManager
from faust.tables.recovery import Recovery
from faust.types import TP

from kueuestream.streams.log import LogError

log = logging.getLogger(__name__)

# (topic, partition) -> end offset, to (topic, partition) -> last readable offset (-1: none).
TailReader = Callable[[Mapping[tuple[str, int], int]], Awaitable[dict[tuple[str, int], int]]]


class TailAwareRecovery(Recovery):
    """Faust's :class:`Recovery`, with highwaters at the last readable changelog record
    as its :class:`TailAwareTableManager`'s ``tails`` reads them."""

    async def _build_highwaters(
        self, consumer: Any, tps: set[TP], destination: Counter[TP], title: str
    ) -> None:
        await super()._build_highwaters(consumer, tps, destination, title)
        tails = getattr(self.tables, "tails", None)
        if tails is None or not self.app.in_transaction:
            return
        # Faust's highwater is the end offset minus one; an empty partition has -1.
        ends = {(tp.topic, tp.partition): hw + 1 for tp, hw in destination.items() if hw >= 0}
        if not ends:
            return
        try:
            last = await tails(ends)
        except LogError as exc:
            log.warning("%s changelog partitions: keeping Faust's highwaters (%s)", title, exc)
            return
        moved = 0
        for tp in sorted(destination):
            key = (tp.topic, tp.partition)
            if key in last and last[key] != destination[tp]:
                destination[tp] = last[key]
                moved += 1
        log.info(
            "%s changelog partitions: %d of %d end past their last readable record", title, moved, len(ends)
        )


class TailAwareTableManager(TableManager):
    """Faust's :class:`TableManager`, recovering with :class:`TailAwareRecovery`."""

    tails: TailReader | None = None

    @property
    def recovery(self) -> Recovery:
        if self._recovery is None:
            self._recovery = TailAwareRecovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery
