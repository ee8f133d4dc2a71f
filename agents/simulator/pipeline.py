"""The pipeline as the simulator drives it: embedded, over a local log.

The agents (ingest, admission, applier) run through
:class:`kueuestream.agents.embedded.pipeline.EmbeddedPipeline`. The simulator's
manifests become watch events stamped with virtual time, so the log it leaves
behind replays like any other.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kueuestream.admission.events import Decision
from kueuestream.agents.embedded.memory_log import SyncLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.log_entries import CLOCK_TICK, batch_marker
from kueuestream.agents.sources.watch_events import as_batch, identify, watch_event
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.schemas import DecisionRecord, WatchEventType


class _Driver:
    def __init__(self, log: SyncLog, names: TopicNames | None = None) -> None:
        self._decisions: list[Decision] = []
        self._seen: set[tuple[str, str, str]] = set()
        self.pipeline = EmbeddedPipeline(log, names=names, on_decision=self._collect)

    def _collect(self, record: DecisionRecord) -> None:
        self._decisions.append(record.to_decision())

    def submit(self, time_ms: int, manifests: Sequence[dict[str, Any]]) -> list[Decision]:
        events = []
        for manifest in manifests:
            found = identify(manifest)
            if isinstance(found, str):
                raise ValueError(f"the simulator made an object it cannot name: {found}")
            kind = WatchEventType.MODIFIED if found.id in self._seen else WatchEventType.ADDED
            self._seen.add(found.id)
            events.append(watch_event(found, kind, time_ms))
        self.pipeline.submit(
            as_batch(events, time_ms) if events else [batch_marker(CLOCK_TICK, "local", time_ms)]
        )
        self.pipeline.pump()
        out, self._decisions = self._decisions, []
        return out

    def next_wakeup_ms(self) -> int | None:
        return self.pipeline.next_wakeup_ms()

    def close(self) -> None:
        self.pipeline.close()


class EmbeddedSimPipeline(_Driver):
    """Over a file log in ``log_dir``, written without fsync: a simulation is re-run, not recovered."""

    def __init__(self, log_dir: str | Path) -> None:
        path = Path(log_dir)
        if path.exists():
            shutil.rmtree(path)
        super().__init__(FileLog(path, fsync=False))
