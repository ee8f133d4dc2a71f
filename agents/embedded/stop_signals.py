"""SIGTERM and SIGINT as a request to stop ``kueuestream run`` between batches.

A signal only sets a flag: the batch in hand is finished (appended, fsynced,
its status files written) before the runtime looks at the flag again, and a
wait between polls ends at once.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any, Self

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Installs the handlers while in a ``with`` block (main thread only), then restores the old ones."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._previous: dict[signal.Signals, Any] = {}
        self.signal_name = ""  # of the signal that asked to stop

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if a stop is requested meanwhile."""
        self._event.wait(seconds)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signal_name = signal.Signals(signum).name
        self._event.set()

    def __enter__(self) -> Self:
        # Python only lets the main thread set handlers; elsewhere (a runtime
        # started from a worker thread) signals keep their previous meaning.
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
