"""Copying topics between logs: ``kueuestream export`` and ``import``.

A copy keeps each record in its partition, in order, with its key and value,
so the copy's partitions are the source's partitions record for record. It
keeps offsets too when the source's offsets are dense from 0 (a file log that
never cut off a damaged tail, or a Kafka topic written without transactions
and never truncated by retention)
and the destination starts empty; the report says whether that held, because
decisions name their input by offset (:class:`kueuestream.streams.schemas.Cause`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kueuestream.streams.file_log import FileLog
from kueuestream.streams.log import Log, LogError
from kueuestream.streams.topics import TOPICS

DEFAULT_BATCH = 1000


class DestinationNotEmptyError(LogError):
    """The destination topic already has records; copying would interleave them."""


@dataclass(frozen=True, slots=True)
class PartitionCopy:
    partition: int
    records: int
    first_offset: int | None  # source offset of the first record copied
    end_offset: int  # source end offset the copy stopped at
    offsets_preserved: bool  # every record got the same offset in the destination


@dataclass(frozen=True, slots=True)
class TopicCopy:
    source_topic: str
    destination_topic: str
    partitions: tuple[PartitionCopy, ...]

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def offsets_preserved(self) -> bool:
        return all(p.offsets_preserved for p in self.partitions)


async def copy_topic(
    source: Log,
    destination: Log,
    topic: str,
    *,
    destination_topic: str | None = None,
    allow_nonempty: bool = False,
    batch_size: int = DEFAULT_BATCH,
) -> TopicCopy:
    """Copy every record of ``topic`` that exists now, partition by partition.

    The destination topic is created with the source's partition count (an
    existing one must have the same count). It must be empty unless
    ``allow_nonempty``: appending to a topic that has records shifts every
    offset, which breaks the offsets decisions refer to.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    target = destination_topic or topic
    count = await source.partitions(topic)
    await destination.ensure_topic(target, count)
    if not allow_nonempty:
        filled = {p: n for p, n in (await destination.end_offsets(target)).items() if n}
        if filled:
            raise DestinationNotEmptyError(
                f"destination topic {target} already has records (end offsets {filled}); "
                "copy into an empty log or pass allow_nonempty"
            )
    ends = await source.end_offsets(topic)
    copies: list[PartitionCopy] = []
    for partition in range(count):
        copies.append(
            await _copy_partition(source, destination, topic, target, partition, ends[partition], batch_size)
        )
    return TopicCopy(topic, target, tuple(copies))


async def _copy_partition(
    source: Log,
    destination: Log,
    topic: str,
    target: str,
    partition: int,
    end: int,
    batch_size: int,
) -> PartitionCopy:
    records = 0
    first: int | None = None
    preserved = True
    batch: list[tuple[bytes, bytes]] = []
    source_offsets: list[int] = []

    async def flush() -> None:
        nonlocal preserved
        positions = await destination.append_many(target, batch, partition=partition)
        preserved = preserved and [p.offset for p in positions] == source_offsets
        batch.clear()
        source_offsets.clear()

    async for record in source.read(topic, partition, 0, until=end):
        if first is None:
            first = record.offset
        batch.append((record.key, record.value))
        source_offsets.append(record.offset)
        records += 1
        if len(batch) >= batch_size:
            await flush()
    if batch:
        await flush()
    return PartitionCopy(partition, records, first, end, preserved)


async def export_topics(
    source: Log,
    directory: str | os.PathLike[str],
    topics: Sequence[str] | None = None,
    *,
    fsync: bool = True,
) -> list[TopicCopy]:
    """Copy ``topics`` (default: the pipeline's topics that exist) into a new file log."""
    names = list(topics) if topics is not None else await _pipeline_topics(source)
    with FileLog(directory, fsync=fsync) as target:
        return [await copy_topic(source, target, name) for name in names]


async def import_topics(
    directory: str | os.PathLike[str],
    destination: Log,
    topics: Sequence[str] | None = None,
    *,
    allow_nonempty: bool = False,
) -> list[TopicCopy]:
    """Copy ``topics`` (default: all) of the file log in ``directory`` into ``destination``."""
    if not Path(directory).is_dir():
        raise LogError(f"no log to import at {directory}")
    with FileLog(directory, read_only=True) as source:
        names = list(topics) if topics is not None else source.topics_sync()
        return [await copy_topic(source, destination, name, allow_nonempty=allow_nonempty) for name in names]


async def _pipeline_topics(source: Log) -> list[str]:
    existing = set(await source.topics())
    return [spec.name for spec in TOPICS if spec.name in existing]
