"""The pipeline as the simulator drives it: embedded over a local log, or over Kafka.

Both run the same agents (ingest, admission, applier) through
:class:`kueuestream.agents.embedded.pipeline.EmbeddedPipeline`; only the log differs. The
simulator's manifests become watch events stamped with virtual time, so the
log it leaves behind replays like any other.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import uuid
from collections.abc import Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from kueuestream.admission.events import Decision
from kueuestream.agents.embedded.memory_log import SyncLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.log_entries import CLOCK_TICK, batch_marker
from kueuestream.agents.sources.watch_events import as_batch, identify, watch_event
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.kafka_log import KafkaLog
from kueuestream.streams.kafka_settings import KafkaTarget
from kueuestream.streams.log import KeyedRecords, Position, Record
from kueuestream.streams.schemas import DecisionRecord, WatchEventType

T = TypeVar("T")


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


class _SyncKafkaLog:
    """KafkaLog's async calls made synchronous on a private event-loop thread."""

    def __init__(self, broker: KafkaTarget) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._log = KafkaLog(broker)
        try:
            self._run(self._log.start())
        except BaseException:
            self._stop_loop()
            raise

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def ensure_topic_sync(self, topic: str, partitions: int | None = None) -> int:
        return self._run(self._log.ensure_topic(topic, partitions))

    def partitions_sync(self, topic: str) -> int:
        return self._run(self._log.partitions(topic))

    def end_offsets_sync(self, topic: str) -> dict[int, int]:
        return self._run(self._log.end_offsets(topic))

    def append_many_sync(
        self, topic: str, records: KeyedRecords, *, partition: int | None = None
    ) -> list[Position]:
        return self._run(self._log.append_many(topic, list(records), partition=partition))

    def read_sync(
        self, topic: str, partition: int, from_offset: int = 0, *, until: int | None = None
    ) -> Iterator[Record]:
        async def collect() -> list[Record]:
            return [r async for r in self._log.read(topic, partition, from_offset, until=until)]

        return iter(self._run(collect()))

    def close_sync(self) -> None:
        try:
            self._run(self._log.close())
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


class KafkaSimPipeline(_Driver):
    """Over topics of a real Kafka broker, named apart so runs never mix."""

    def __init__(self, broker: KafkaTarget) -> None:
        self.prefix = f"sim-{uuid.uuid4().hex[:8]}."
        names = TopicNames(self.prefix)
        log = _SyncKafkaLog(broker)
        # Kafka knows the partition counts of the bare topic names only: create the prefixed ones first.
        try:
            for topic, count in names.partition_counts().items():
                log.ensure_topic_sync(topic, count)
        except BaseException:
            log.close_sync()
            raise
        super().__init__(log, names)
