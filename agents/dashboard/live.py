"""The dashboard of a process whose engines change as it runs: a worker, ``run --kubeconfig``.

The process notes its decisions as it makes them and calls :meth:`LiveDashboard.publish`
from the thread (or event loop) that changes the engines, after each batch or
on a timer; nothing is published while nothing moved.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kueuestream.admission.engine import Engine
from kueuestream.agents.dashboard.feed import DashboardFeed
from kueuestream.streams.schemas import DecisionRecord


class LiveDashboard:
    def __init__(self, feed: DashboardFeed) -> None:
        self.feed = feed
        self._decisions: list[DecisionRecord] = []
        self._seen: tuple[tuple[int, int, int], ...] = ()

    def note(self, decisions: Sequence[DecisionRecord]) -> None:
        """Decisions just made, in the order made."""
        self._decisions += decisions

    def publish(self, engines: Iterable[Engine]) -> None:
        """Show the engines now, unless nothing was decided and no engine moved since the last time."""
        engines = list(engines)
        # The engines held, their clocks and cycles: what changes with any record applied.
        seen = tuple((id(e), e.now_ms, e.cycles) for e in engines)
        if not self._decisions and seen == self._seen and not self.feed.stale:
            return
        decisions, self._decisions = self._decisions, []
        self._seen = seen
        self.feed.publish(engines, decisions)
