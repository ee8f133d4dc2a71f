"""The embedded log: append-only segment files on the local disk.

Layout under the log directory (default ``./.kueuestream``)::

    .lock                               held (flock) by the one writer
    <topic>/topic.json                  {"format": 1, "partitions": N}
    <topic>/<partition>/<base>.log      segments, <base> = first offset, 20 digits

A segment is a sequence of batches (format in :mod:`kueuestream.streams.segment_format`).
One ``append_many`` call writes one batch per partition it touches, and a
batch is all-or-nothing: after a crash either every record of an
``append_many`` call to a partition is there or none is.

Durability: each call ends with one ``fsync`` per partition it wrote
(``fsync=True``, the default), so an append that returned survives a power
loss, and the cost of the fsync is shared by the whole batch.

On open every segment is scanned, which validates every CRC and rebuilds the
in-memory offset index; reads check the CRC only of batches appended since.
A damaged batch at the very end of a partition's last segment (a torn write
from a crash, or damage to the last batch) is replaced
by a tombstone (the only write the log ever does outside an append): the
offsets its records may have had are never used again, so a consumer that
recorded one of them as processed cannot mistake a later record for it.
:meth:`FileLog.tombstones_sync` lists them. Damage anywhere else would mean
losing records followed by others, so it raises
:class:`~kueuestream.streams.log.CorruptLogError` instead of being "repaired".

Offsets: a partition's records are numbered 0, 1, 2, ... in append order, and
numbering continues where it stopped after a restart. They are dense except
across a tombstone, which no record is ever read from.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import re
import threading
from collections.abc import AsyncIterator, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Self

import orjson

from kueuestream.streams.log import (
    CorruptLogError,
    KeyedRecords,
    LogClosedError,
    LogError,
    Position,
    Record,
    TopicMismatchError,
    UnknownTopicError,
)
from kueuestream.streams.segment_format import (
    Segment,
    Tombstone,
    encode_batch,
    encode_tombstone,
    read_segments,
    scan_segment,
)
from kueuestream.streams.topics import partition_counts, partition_for_key, validate_topic_name

log = logging.getLogger(__name__)

DEFAULT_DIRECTORY = Path(".kueuestream")
DEFAULT_SEGMENT_BYTES = 128 * 1024 * 1024

FORMAT_VERSION = 1  # of the log directory, written into every topic.json
# An async read yields to the event loop this often, so a long replay does not
# starve the other tasks.
_YIELD_EVERY = 1024

_SEGMENT_NAME = re.compile(r"(\d{20})\.log")
_LOCK_NAME = ".lock"
_TOPIC_META = "topic.json"


class LogLockedError(LogError):
    """Another FileLog (in this or another process) has the directory open for writing."""


class ReadOnlyLogError(LogError):
    """A write was attempted on a log opened with ``read_only=True``."""


@dataclass(frozen=True, slots=True)
class LostRange:
    """Offsets of one partition whose records are lost (see :mod:`kueuestream.streams.segment_format`).

    ``cut`` is False for damage a read-only open found and left in place: the
    next writable open replaces it with a tombstone.
    """

    topic: str
    partition: int
    start: int
    end: int
    note: str
    cut: bool = True

    def __str__(self) -> str:
        if self.end <= self.start:
            offsets = f"no offset (at {self.start})"
        elif self.end == self.start + 1:
            offsets = f"offset {self.start}"
        else:
            offsets = f"offsets {self.start}..{self.end - 1}"
        return f"{self.topic} partition {self.partition}, {offsets}: {self.note}"


@dataclass(slots=True)
class _Partition:
    directory: Path
    segments: list[Segment] = field(default_factory=list)
    next_offset: int = 0
    fd: int | None = None  # O_APPEND descriptor of the last segment, opened on first write


@dataclass(slots=True)
class _Topic:
    name: str
    directory: Path
    partitions: list[_Partition]


class FileLog:
    """The embedded :class:`~kueuestream.streams.log.Log`; sync methods plus async wrappers.

    ``partitions`` overrides the default partition counts of
    :mod:`kueuestream.streams.topics` for topics created by this log; a topic that already
    exists on disk keeps its own count. ``read_only=True`` opens without the
    writer lock and without repairing a torn tail (it is treated as the end), so
    a log can be inspected while its writer runs; it sees the records present
    when it was opened. ``topics``, with ``read_only=True``, opens only the
    topics named (the others are neither scanned nor listed).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] = DEFAULT_DIRECTORY,
        *,
        fsync: bool = True,
        partitions: Mapping[str, int] | None = None,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        read_only: bool = False,
        topics: Collection[str] | None = None,
    ) -> None:
        if segment_bytes < 1:
            raise ValueError(f"segment_bytes must be positive, got {segment_bytes}")
        if topics is not None and not read_only:
            raise ValueError("only a read-only log can be opened with some of its topics")
        self._only = None if topics is None else frozenset(topics)
        self.directory = Path(directory)
        self.fsync = fsync
        self.read_only = read_only
        self._segment_bytes = segment_bytes
        self._default_partitions = partition_counts(partitions)
        self._topics: dict[str, _Topic] = {}
        # Appends and read snapshots from several threads must not interleave.
        self._lock = threading.RLock()
        self._lock_fd: int | None = None
        self._closed = False
        # Set when a write or fsync failed: what reached the disk is unknown, so
        # only reopening (which rescans) can tell.
        self._broken: str | None = None
        # Partitions appended to with fsync=False since the last persist_sync().
        self._unsynced: dict[int, _Partition] = {}
        if not read_only:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock_fd = _acquire_lock(self.directory / _LOCK_NAME)
        try:
            self._load()
        except BaseException:
            self._release_lock()
            raise

    # --- opening -------------------------------------------------------------

    def _load(self) -> None:
        if not self.directory.is_dir():
            return  # read-only on a directory not created yet: an empty log
        for entry in sorted(self.directory.iterdir()):
            meta = entry / _TOPIC_META
            # A topic directory without topic.json is a creation cut short before
            # any record was written: it does not exist yet.
            if not entry.is_dir() or not meta.is_file():
                continue
            if self._only is not None and entry.name not in self._only:
                continue
            count = _read_topic_meta(meta)
            self._topics[entry.name] = _Topic(
                name=entry.name,
                directory=entry,
                partitions=[self._load_partition(entry / str(p)) for p in range(count)],
            )

    def _load_partition(self, directory: Path) -> _Partition:
        partition = _Partition(directory)
        if not directory.is_dir():
            return partition
        bases = sorted(
            int(m.group(1))
            for m in (_SEGMENT_NAME.fullmatch(p.name) for p in directory.iterdir())
            if m is not None
        )
        for i, base in enumerate(bases):
            if partition.segments and base != partition.next_offset:
                raise CorruptLogError(
                    f"{directory}: segment {base:020d}.log should start at offset "
                    f"{partition.next_offset}; records are missing or duplicated"
                )
            segment = scan_segment(
                directory / f"{base:020d}.log",
                base,
                is_last=i == len(bases) - 1,
                repair=not self.read_only,
                fsync=self.fsync,
            )
            partition.segments.append(segment)
            partition.next_offset = segment.end_offset
        return partition

    # --- topics --------------------------------------------------------------

    def ensure_topic_sync(self, topic: str, partitions: int | None = None) -> int:
        with self._lock:
            self._check_open()
            existing = self._topics.get(topic)
            if existing is not None:
                count = len(existing.partitions)
                if partitions is not None and partitions != count:
                    raise TopicMismatchError(
                        f"topic {topic} has {count} partitions in {self.directory}, not {partitions}"
                    )
                return count
            validate_topic_name(topic)
            count = partitions if partitions is not None else self._default_partitions.get(topic, 0)
            if count < 1:
                raise UnknownTopicError(
                    f"unknown topic {topic}: create it with an explicit partition count first"
                )
            self._check_writable()
            directory = self.directory / topic
            directory.mkdir(exist_ok=True)
            _write_topic_meta(directory / _TOPIC_META, count, fsync=self.fsync)
            if self.fsync:
                _fsync_directory(self.directory)
            self._topics[topic] = _Topic(
                topic, directory, [_Partition(directory / str(p)) for p in range(count)]
            )
            return count

    def partitions_sync(self, topic: str) -> int:
        with self._lock:
            self._check_open()
            existing = self._topics.get(topic)
            if existing is not None:
                return len(existing.partitions)
            count = self._default_partitions.get(topic)
            if count is None:
                raise UnknownTopicError(f"unknown topic {topic} in {self.directory}")
            return count

    def topics_sync(self) -> list[str]:
        with self._lock:
            self._check_open()
            return sorted(self._topics)

    def end_offsets_sync(self, topic: str) -> dict[int, int]:
        with self._lock:
            count = self.partitions_sync(topic)
            existing = self._topics.get(topic)
            if existing is None:
                return dict.fromkeys(range(count), 0)
            return {p: part.next_offset for p, part in enumerate(existing.partitions)}

    def lost_sync(self) -> list[LostRange]:
        """Every range of lost records the log knows of: its tombstones, and damage not cut yet."""
        with self._lock:
            self._check_open()
            lost: list[LostRange] = []
            for name in sorted(self._topics):
                for p, part in enumerate(self._topics[name].partitions):
                    for segment in part.segments:
                        lost += [LostRange(name, p, t.start, t.end, t.note) for t in segment.tombstones]
                        if (t := segment.uncut) is not None:
                            note = f"{t.note}, not cut yet"
                            lost.append(LostRange(name, p, t.start, t.end, note, cut=False))
            return lost

    @property
    def cut_on_open(self) -> list[LostRange]:
        """The damaged tails this open replaced by tombstones."""
        return [
            LostRange(name, p, segment.cut.start, segment.cut.end, segment.cut.note)
            for name, topic in sorted(self._topics.items())
            for p, part in enumerate(topic.partitions)
            for segment in part.segments
            if segment.cut is not None
        ]

    def skip_to_sync(self, topic: str, partition: int, offset: int, note: str) -> None:
        """Never give a record an offset below ``offset``: a tombstone covers the ones skipped.

        For a consumer that recorded an offset as processed which the log no
        longer holds (its damaged tail was cut off with too short a tombstone).
        """
        with self._lock:
            self._check_open()
            self._check_writable()
            count = self.ensure_topic_sync(topic)
            if not 0 <= partition < count:
                raise ValueError(f"topic {topic} has partitions 0..{count - 1}, not {partition}")
            part = self._topics[topic].partitions[partition]
            if offset <= part.next_offset:
                return
            tombstone = Tombstone(part.next_offset, offset, note)
            try:
                self._write_batch(part, encode_tombstone(tombstone), offset)
                if self.fsync:
                    assert part.fd is not None
                    os.fdatasync(part.fd)
            except OSError as exc:
                self._broken = f"write to {self.directory / topic} failed: {exc}"
                raise LogError(f"{self._broken}; reopen the log to recover") from exc
            part.segments[-1].tombstones.append(tombstone)

    # --- appending -----------------------------------------------------------

    def append_sync(self, topic: str, key: bytes, value: bytes, *, partition: int | None = None) -> Position:
        return self.append_many_sync(topic, ((key, value),), partition=partition)[0]

    def append_many_sync(
        self,
        topic: str,
        records: KeyedRecords,
        *,
        partition: int | None = None,
    ) -> list[Position]:
        batch = [(_as_bytes(key, "key"), _as_bytes(value, "value")) for key, value in records]
        with self._lock:
            self._check_open()
            self._check_writable()
            count = self.ensure_topic_sync(topic)
            if partition is not None and not 0 <= partition < count:
                raise ValueError(f"topic {topic} has partitions 0..{count - 1}, not {partition}")
            by_partition: dict[int, list[int]] = {}
            for i, (key, _) in enumerate(batch):
                p = partition if partition is not None else partition_for_key(key, count)
                by_partition.setdefault(p, []).append(i)
            parts = self._topics[topic].partitions
            positions: list[Position] = [Position(topic, 0, 0)] * len(batch)
            # Encode every batch before writing any, so a batch that is too big
            # fails the call without having written the others.
            frames = {
                p: encode_batch(parts[p].next_offset, [batch[i] for i in indices])
                for p, indices in sorted(by_partition.items())
            }
            written: list[_Partition] = []
            try:
                for p, (frame, count_in_batch) in frames.items():
                    base = self._write_batch(parts[p], frame, parts[p].next_offset + count_in_batch)
                    written.append(parts[p])
                    for j, i in enumerate(by_partition[p]):
                        positions[i] = Position(topic, p, base + j)
                if self.fsync:
                    for part in written:
                        assert part.fd is not None
                        # fdatasync also persists the new file size, which is all
                        # the metadata an append changes; it skips the mtime.
                        os.fdatasync(part.fd)
                else:
                    self._unsynced.update((id(part), part) for part in written)
            except OSError as exc:
                self._broken = f"write to {self.directory / topic} failed: {exc}"
                raise LogError(f"{self._broken}; reopen the log to recover") from exc
            return positions

    def persist_sync(self) -> None:
        """Make every append so far durable: one fdatasync per partition written since the last call.

        With ``fsync=False`` an append returns before its records reach the
        disk; this is the group commit that makes a whole group of appends
        durable together.
        """
        with self._lock:
            self._check_open()
            self._check_writable()
            parts, self._unsynced = list(self._unsynced.values()), {}
            try:
                for part in parts:
                    if part.fd is not None:
                        os.fdatasync(part.fd)
            except OSError as exc:
                self._broken = f"fsync of {self.directory} failed: {exc}"
                raise LogError(f"{self._broken}; reopen the log to recover") from exc

    def _write_batch(self, part: _Partition, frame: list[bytes], end: int) -> int:
        """Write one encoded batch or tombstone, ending at ``end``, to the last segment; its base offset."""
        base = part.next_offset
        segment = self._writable_segment(part)
        assert part.fd is not None
        try:
            _write_all(part.fd, frame)
        except OSError:
            # Cut off the partial batch so it cannot sit in front of later ones
            # (a later reopen would rightly call that corruption).
            with contextlib.suppress(OSError):
                os.ftruncate(part.fd, segment.size)
            raise
        position = segment.size
        segment.size += sum(len(chunk) for chunk in frame)
        segment.end_offset = end
        segment.add_to_index(base, position)
        part.next_offset = end
        return base

    def _writable_segment(self, part: _Partition) -> Segment:
        """The last segment with its append descriptor open, rolled over when full."""
        if part.segments and part.segments[-1].size >= self._segment_bytes:
            if part.fd is not None:
                # Sealed segments are fsynced once even with fsync=False, so
                # damage after a crash can only be in the last segment.
                os.fsync(part.fd)
                os.close(part.fd)
                part.fd = None
            part.segments.append(_new_segment(part))
        if not part.segments:
            part.directory.mkdir(parents=True, exist_ok=True)
            part.segments.append(_new_segment(part))
        segment = part.segments[-1]
        if part.fd is None:
            existed = segment.path.exists()
            part.fd = os.open(segment.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            if not existed and self.fsync:
                # The new file's directory entry must be durable too.
                _fsync_directory(part.directory)
                _fsync_directory(part.directory.parent)
        return segment

    # --- reading -------------------------------------------------------------

    def read_sync(
        self, topic: str, partition: int, from_offset: int = 0, *, until: int | None = None
    ) -> Iterator[Record]:
        """Records of one partition in ``[from_offset, until)``; ``until`` defaults to the end now.

        The range is fixed when this is called (not when iteration starts), so
        records appended meanwhile are not read, and never half-read.
        """
        if from_offset < 0:
            raise ValueError(f"from_offset must be >= 0, got {from_offset}")
        plan, stop = self._read_plan(topic, partition, from_offset, until)
        return read_segments(topic, partition, plan, from_offset, stop)

    def _read_plan(
        self, topic: str, partition: int, from_offset: int, until: int | None
    ) -> tuple[list[tuple[Path, int, int, int]], int]:
        """Each segment to read as ``(path, start position, size, verified bytes)``, and the stop offset."""
        with self._lock:
            count = self.partitions_sync(topic)
            if not 0 <= partition < count:
                raise ValueError(f"topic {topic} has partitions 0..{count - 1}, not {partition}")
            existing = self._topics.get(topic)
            if existing is None:
                return [], 0
            part = existing.partitions[partition]
            stop = part.next_offset if until is None else min(until, part.next_offset)
            plan: list[tuple[Path, int, int, int]] = []
            for segment in part.segments:
                if segment.end_offset <= from_offset or segment.size == 0:
                    continue
                if segment.base_offset >= stop:
                    break
                start = segment.position_for(from_offset) if not plan else 0
                plan.append((segment.path, start, segment.size, segment.verified))
            return plan, stop

    # --- lifecycle -------------------------------------------------------------

    def close_sync(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for topic in self._topics.values():
                for part in topic.partitions:
                    if part.fd is not None:
                        os.close(part.fd)
                        part.fd = None
            self._release_lock()

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor drops the flock
            self._lock_fd = None

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"the log at {self.directory} is closed")

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyLogError(f"the log at {self.directory} was opened read-only")
        if self._broken is not None:
            raise LogError(f"{self._broken}; reopen the log to recover")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close_sync()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close_sync()

    # --- the async Log interface --------------------------------------------------
    #
    # These run the sync methods inline rather than in a thread: appends must hit
    # the disk in call order, and a single-process runtime awaits each append
    # anyway, so a thread would add a hop and a lock but no concurrency.

    async def ensure_topic(self, topic: str, partitions: int | None = None) -> int:
        return self.ensure_topic_sync(topic, partitions)

    async def append(self, topic: str, key: bytes, value: bytes, *, partition: int | None = None) -> Position:
        return self.append_sync(topic, key, value, partition=partition)

    async def append_many(
        self, topic: str, records: KeyedRecords, *, partition: int | None = None
    ) -> list[Position]:
        return self.append_many_sync(topic, records, partition=partition)

    async def read(
        self, topic: str, partition: int, from_offset: int = 0, *, until: int | None = None
    ) -> AsyncIterator[Record]:
        for n, record in enumerate(self.read_sync(topic, partition, from_offset, until=until), 1):
            yield record
            if n % _YIELD_EVERY == 0:
                await asyncio.sleep(0)

    async def end_offsets(self, topic: str) -> dict[int, int]:
        return self.end_offsets_sync(topic)

    async def partitions(self, topic: str) -> int:
        return self.partitions_sync(topic)

    async def topics(self) -> list[str]:
        return self.topics_sync()

    async def close(self) -> None:
        self.close_sync()


# --- files -----------------------------------------------------------------------


def _new_segment(part: _Partition) -> Segment:
    base = part.next_offset
    return Segment(base, part.directory / f"{base:020d}.log", end_offset=base)


def _as_bytes(data: bytes, what: str) -> bytes:
    if type(data) is bytes:
        return data
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"record {what} must be bytes, got {type(data).__name__}")


def _write_all(fd: int, chunks: list[bytes]) -> None:
    # writev can stop short (a signal, a full disk); carry on from where it stopped.
    pending = [memoryview(c) for c in chunks]
    while pending:
        written = os.writev(fd, pending)
        while written and pending:
            if written >= len(pending[0]):
                written -= len(pending[0])
                pending.pop(0)
            else:
                pending[0] = pending[0][written:]
                written = 0


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _acquire_lock(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise LogLockedError(
                f"{path.parent} is already open for writing by another FileLog "
                "(this or another process); open it with read_only=True to inspect it"
            ) from exc
        raise
    return fd


def _read_topic_meta(path: Path) -> int:
    try:
        meta = orjson.loads(path.read_bytes())
        count = meta["partitions"]
        version = meta.get("format", FORMAT_VERSION)
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptLogError(f"{path}: unreadable topic metadata: {exc}") from exc
    if version != FORMAT_VERSION:
        raise CorruptLogError(f"{path}: log format {version}, this version reads {FORMAT_VERSION}")
    if type(count) is not int or count < 1:
        raise CorruptLogError(f"{path}: partition count must be a positive int, got {count!r}")
    return count


def _write_topic_meta(path: Path, partitions: int, *, fsync: bool) -> None:
    # Written whole then renamed into place, so it is never seen half-written.
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(orjson.dumps({"format": FORMAT_VERSION, "partitions": partitions}))
        if fsync:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if fsync:
        _fsync_directory(path.parent)


if TYPE_CHECKING:
    from kueuestream.streams.log import Log

    # mypy checks here that FileLog has every method of the Log protocol.
    _conforms: type[Log] = FileLog
