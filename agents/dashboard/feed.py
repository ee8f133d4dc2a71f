"""The dashboard's current state, shared between whoever holds the engines and the HTTP threads.

The owner of the engines (the log follower of ``kueuestream dashboard``, a
worker, ``run``) calls :meth:`DashboardFeed.publish` from the thread that
changes them; the HTTP threads only ever read the JSON it made, so a page
never sees an engine half-way through a batch. Each publish that changes the
state bumps the version and wakes the server-sent-event streams.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from kueuestream.admission.engine import Engine
from kueuestream.agents.dashboard.history import History
from kueuestream.agents.dashboard.snapshot import snapshot
from kueuestream.streams.schemas import DecisionRecord

SLOW_SECONDS = 0.05

log = logging.getLogger(__name__)

Explain = Callable[[str, str], dict[str, object]]
"""``(namespace, name) -> explain JSON``, raising as
:func:`~kueuestream.agents.audit.explain.explain_json` does."""


class DashboardFeed:
    def __init__(self, source: str, explain: Explain | None = None) -> None:
        self.source = source
        self.explain = explain
        self.history = History()
        self._changed = threading.Condition()
        self._version = 0
        self._body = b""
        self._closed = False
        self._next_build = 0.0
        self._last: dict[str, Any] = {"nowMs": 0, "roots": [], "clusterQueues": [], "cohorts": []}
        # Decisions were counted, or engines changed, since the state was last taken.
        self.stale = False
        self.publish((), ())

    def publish(
        self, engines: Iterable[Engine], decisions: Iterable[DecisionRecord], error: str = ""
    ) -> None:
        """Count ``decisions`` (in the order made) and take the engines' state.

        Taking the state of a large backlog takes a while; when that was over
        :data:`SLOW_SECONDS`, it is taken again only once twice that long has
        passed, so the pipeline keeps at least two thirds of its time. Until
        then the feed is :attr:`stale`, and the owner publishes again (with no
        decisions) at its next pause.
        """
        began = time.monotonic()
        try:
            self.history.add(decisions)
            if began < self._next_build and not error:
                self.stale = True
                return
            self.stale = False
            state = snapshot(engines)
            self._last = state
        except Exception as exc:  # the page is never a reason for the pipeline to stop
            log.exception("the dashboard could not take the engines' state")
            state = dict(self._last)
            error = f"the dashboard could not take the engines' state: {type(exc).__name__}: {exc}"
        state = dict(state)
        state["source"] = self.source
        state["error"] = error
        state["chart"] = self.history.chart()
        state["recent"] = self.history.recent()
        state["totals"] = dict(self.history.totals)
        with self._changed:
            state["version"] = self._version
            if orjson.dumps(state) != self._body:
                self._version += 1
                state["version"] = self._version
                self._body = orjson.dumps(state)
                self._changed.notify_all()
        done = time.monotonic()
        took = done - began
        self._next_build = done + 2 * took if took > SLOW_SECONDS else 0.0

    def current(self) -> tuple[int, bytes]:
        with self._changed:
            return self._version, self._body

    def wait(self, after: int, timeout: float) -> tuple[int, bytes] | None:
        """The state once its version is past ``after``; None on timeout or once closed."""
        with self._changed:
            self._changed.wait_for(lambda: self._version > after or self._closed, timeout)
            if self._version > after:
                return self._version, self._body
            return None

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """End every event stream."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
