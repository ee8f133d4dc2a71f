"""Following a log for ``kueuestream dashboard``: the engines rebuilt from it, kept current.

The follower reads ``kueue.admission`` the way ``replay`` does (every
partition, in order, through :class:`~kueuestream.agents.admission.AdmissionHandler`),
so the engines it holds are the ones the runtime that wrote the log held. It
then keeps reading what is appended, every ``poll_seconds``: an embedded log
folder is opened read-only again whenever a segment of ``kueue.admission``
changed size (a read-only open sees the records present when it was opened);
Kafka stays connected. The records the runtime appended itself (requeues,
handovers, stops) are in the log and are read like any other; what the
handler would append is dropped, since the log already has it.

A log that cannot be read (damaged, gone, a broker that went away) is shown
as the state's ``error`` and tried again at the next poll; the state already
read stays on the page.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from kueuestream.admission.engine import Engine
from kueuestream.agents.admission import AdmissionHandler
from kueuestream.agents.audit.replay import is_kafka, open_log
from kueuestream.agents.dashboard.feed import DashboardFeed
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams.kafka_settings import KafkaSettings
from kueuestream.streams.kafka_urls import redact_text
from kueuestream.streams.log import Log, LogError
from kueuestream.streams.schemas import DecisionRecord

POLL_SECONDS = 0.5

Signature = tuple[tuple[str, int, int], ...]
T = TypeVar("T")


class LogFollower:
    def __init__(
        self,
        spec: str,
        feed: DashboardFeed,
        *,
        prefix: str = "",
        kafka: KafkaSettings | None = None,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.spec = spec
        self.feed = feed
        self.names = TopicNames(prefix)
        self.kafka = kafka
        self.poll_seconds = poll_seconds
        self.handler: AdmissionHandler | None = None
        self.next: dict[int, int] = {}
        self.error = ""
        self.read_once = False
        self._signature: Signature | None = None
        # Held while records are fed and while another thread reads the engines.
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dashboard-follower", daemon=True)

    # --- reading ---------------------------------------------------------------------

    def engines(self) -> list[Engine]:
        if self.handler is None:
            return []
        states = self.handler.states
        return [states[p].shards[s].engine for p in sorted(states) for s in sorted(states[p].shards)]

    async def read_new(self, log: Log) -> list[DecisionRecord]:
        """Feed every record appended since the last read; the decisions they made."""
        topic = self.names.admission
        if topic not in await log.topics():
            return []
        count = await log.partitions(topic)
        if self.handler is None:
            self.handler = AdmissionHandler(partitions=count, admission_topic=topic, job_controller=False)
        ends = await log.end_offsets(topic)
        decisions: list[DecisionRecord] = []
        for p in range(count):
            start, end = self.next.get(p, 0), ends.get(p, 0)
            if end <= start:
                continue
            async for record in log.read(topic, p, start, until=end):
                with self.lock:
                    decisions += self.handler.feed(p, record.offset, record.value).decisions
            self.next[p] = end
        return decisions

    def _folder_signature(self) -> Signature:
        """Size and change time of every file of the folder's ``kueue.admission``."""
        root = Path(self.spec) / self.names.admission
        if not root.is_dir():
            return ()
        files = sorted(p for p in root.rglob("*") if p.is_file())
        return tuple((str(p), (st := p.stat()).st_size, st.st_mtime_ns) for p in files)

    async def poll(self) -> None:
        """Read what is new once (an embedded folder: only if it changed) and publish it."""
        if not is_kafka(self.spec):
            if not Path(self.spec).is_dir():
                raise LogError(f"no embedded log at {self.spec} (expected a directory, or kafka://HOST:PORT)")
            signature = self._folder_signature()
            if signature == self._signature and not self.error:
                self._published([])
                return
            async with open_log(self.spec) as log:
                decisions = await self.read_new(log)
            self._signature = signature
        else:
            async with open_log(self.spec, self.kafka) as log:
                decisions = await self.read_new(log)
        self._published(decisions)

    def _published(self, decisions: list[DecisionRecord], error: str = "") -> None:
        if decisions or error != self.error or not self.read_once or self.feed.stale:
            self.error = error
            self.read_once = self.read_once or not error
            with self.lock:
                self.feed.publish(self.engines(), decisions, error)

    def read(self, fn: Callable[[Sequence[Engine]], T]) -> T:
        """``fn(engines)``, with the engines still while it runs (for the HTTP threads)."""
        with self.lock:
            return fn(self.engines())

    # --- following -------------------------------------------------------------------

    def start(self) -> LogFollower:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        asyncio.run(self._follow())

    async def _follow(self) -> None:
        while not self._stop.is_set():
            try:
                if is_kafka(self.spec):
                    async with open_log(self.spec, self.kafka) as log:
                        while not self._stop.is_set():
                            self._published(await self.read_new(log))
                            await self._pause()
                    continue
                await self.poll()
            except Exception as exc:  # shown on the page; the follower keeps trying
                self.report(exc)
            await self._pause()

    async def step(self) -> None:
        """:meth:`poll`, with a log that cannot be read shown as the state's ``error``."""
        try:
            await self.poll()
        except (LogError, OSError) as exc:
            self.report(exc)

    def report(self, exc: Exception) -> None:
        self._published([], f"cannot read the log {redact_text(self.spec)}: {redact_text(str(exc))}")

    async def _pause(self) -> None:
        await asyncio.to_thread(self._stop.wait, self.poll_seconds)
