"""The synchronous log the embedded runtime drives, and an in-memory one.

:class:`kueuestream.streams.file_log.FileLog` implements :class:`SyncLog`; ``MemoryLog``
does too, for runs that need no durability (``kueuestream admit``, what-if
runs, benchmarks of the handlers alone).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from kueuestream.streams.log import KeyedRecords, Position, Record, UnknownTopicError
from kueuestream.streams.topics import partition_counts, partition_for_key


class SyncLog(Protocol):
    def ensure_topic_sync(self, topic: str, partitions: int | None = None) -> int: ...

    def partitions_sync(self, topic: str) -> int: ...

    def end_offsets_sync(self, topic: str) -> dict[int, int]: ...

    def append_many_sync(
        self, topic: str, records: KeyedRecords, *, partition: int | None = None
    ) -> list[Position]: ...

    def read_sync(
        self, topic: str, partition: int, from_offset: int = 0, *, until: int | None = None
    ) -> Iterator[Record]: ...

    def close_sync(self) -> None: ...


class MemoryLog:
    def __init__(self, partitions: Mapping[str, int] | None = None) -> None:
        self._defaults = partition_counts(partitions)
        self._topics: dict[str, list[list[tuple[bytes, bytes]]]] = {}

    def ensure_topic_sync(self, topic: str, partitions: int | None = None) -> int:
        if topic not in self._topics:
            count = partitions if partitions is not None else self._defaults.get(topic)
            if count is None:
                raise UnknownTopicError(
                    f"unknown topic {topic}: create it with an explicit partition count first"
                )
            self._topics[topic] = [[] for _ in range(count)]
        return len(self._topics[topic])

    def partitions_sync(self, topic: str) -> int:
        return self.ensure_topic_sync(topic)

    def end_offsets_sync(self, topic: str) -> dict[int, int]:
        self.ensure_topic_sync(topic)
        return {p: len(records) for p, records in enumerate(self._topics[topic])}

    def append_many_sync(
        self, topic: str, records: KeyedRecords, *, partition: int | None = None
    ) -> list[Position]:
        count = self.ensure_topic_sync(topic)
        parts = self._topics[topic]
        positions = []
        for key, value in records:
            p = partition if partition is not None else partition_for_key(key, count)
            positions.append(Position(topic, p, len(parts[p])))
            parts[p].append((key, value))
        return positions

    def read_sync(
        self, topic: str, partition: int, from_offset: int = 0, *, until: int | None = None
    ) -> Iterator[Record]:
        self.ensure_topic_sync(topic)
        records = self._topics[topic][partition]
        # Like FileLog: the range is fixed by the call, not by the first next().
        stop = len(records) if until is None else min(until, len(records))
        return (Record(topic, partition, o, *records[o]) for o in range(from_offset, stop))

    def close_sync(self) -> None:
        self._topics.clear()
