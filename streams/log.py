"""The log interface both backends implement (:mod:`.file_log`, :mod:`.kafka_log`).

A log is a set of topics, each split into a fixed number of partitions; every
partition is an append-only sequence of ``(key, value)`` records numbered by
offset. Keys and values are opaque bytes here: encoding is :mod:`kueuestream.streams.codec`'s
job, and which partition a key goes to is :func:`kueuestream.streams.topics.partition_for_key`,
the same for every backend.

Topics in :data:`kueuestream.streams.topics.TOPICS` are created on first append with their
configured partition count; any other topic must be created with
:meth:`Log.ensure_topic` first, so a typo cannot silently create a topic.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import NamedTuple, Protocol

# (key, value) pairs, as appended.
KeyedRecords = Iterable[tuple[bytes, bytes]]


class Position(NamedTuple):
    topic: str
    partition: int
    offset: int


class Record(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes

    @property
    def position(self) -> Position:
        return Position(self.topic, self.partition, self.offset)


class LogError(Exception):
    """Base of the errors raised by log backends."""


class UnknownTopicError(LogError):
    """The topic does not exist and has no configured partition count."""


class TopicMismatchError(LogError):
    """The topic exists with a different partition count than asked for."""


class CorruptLogError(LogError):
    """Stored data is damaged somewhere other than a torn tail write."""


class LogClosedError(LogError):
    """The log was used after :meth:`Log.close`."""


class Log(Protocol):
    async def ensure_topic(self, topic: str, partitions: int | None = None) -> int:
        """Create ``topic`` if missing and return its partition count.

        ``partitions=None`` means the configured default; it is an error
        (:class:`UnknownTopicError`) for a topic with none. An existing topic
        with another count than ``partitions`` raises :class:`TopicMismatchError`,
        since changing it would move keys to other partitions.
        """
        ...

    async def append(self, topic: str, key: bytes, value: bytes, *, partition: int | None = None) -> Position:
        """Append one record, to ``partition`` or else to the key's partition."""
        ...

    async def append_many(
        self, topic: str, records: KeyedRecords, *, partition: int | None = None
    ) -> list[Position]:
        """Append ``(key, value)`` records in order; positions come back in the same order.

        Records for one partition keep their relative order. Durability is per
        call (one flush/fsync or one wait for acknowledgements), which is what
        makes batching fast.
        """
        ...

    def read(
        self, topic: str, partition: int, from_offset: int = 0, *, until: int | None = None
    ) -> AsyncIterator[Record]:
        """Records of one partition from ``from_offset`` up to ``until``.

        ``until=None`` means the end offset when the read starts: a read is a
        bounded scan, for replay and export, and ends instead of waiting for
        new records.
        """
        ...

    async def end_offsets(self, topic: str) -> dict[int, int]:
        """For each partition, the offset the next record will get."""
        ...

    async def partitions(self, topic: str) -> int:
        """The partition count of ``topic`` (its configured default if not created yet)."""
        ...

    async def topics(self) -> list[str]:
        """The topics that exist, sorted."""
        ...

    async def close(self) -> None: ...
