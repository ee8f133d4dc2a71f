"""The on-disk format of a file-log segment (see :mod:`kueuestream.streams.file_log`).

A segment is a sequence of batches, each framed as (big-endian)::

    magic u8 | payload length u32 | crc32(payload) u32 | payload
    payload = base offset u64 | count u32 | count x (key len u32 | value len u32 | key | value)

The CRC covers the whole batch, which is what makes a batch all-or-nothing: a
batch cut short by a crash fails its length or CRC check and is dropped whole.
The base offset in every batch lets a scan check that offsets run on without
a gap or an overlap, across batches and across segments.

A tombstone is a batch of no records that holds a range of offsets nobody may
use again, because records there were lost (cut off as a damaged tail)::

    payload = start offset u64 | 0 u32 | end offset u64 | note (UTF-8)

The next batch starts at ``end``. A reader written before tombstones existed
refuses a batch of 0 records as corrupt rather than misreading it.
"""

from __future__ import annotations

import bisect
import datetime
import mmap
import os
import struct
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kueuestream.streams.log import CorruptLogError, Record

MAGIC = 0xB1  # format 1; any other first byte of a frame is not a batch of ours
FRAME = struct.Struct(">BII")  # magic, payload length, crc32 of payload
BATCH = struct.Struct(">QI")  # base offset, record count
RECORD = struct.Struct(">II")  # key length, value length
TOMBSTONE_END = struct.Struct(">Q")  # end offset, after BATCH in a tombstone's payload
# A length field beyond this is garbage, not a batch (it also bounds one append_many).
MAX_BATCH_BYTES = 1 << 30
# One index entry per this many bytes of segment, like Kafka's index.interval.bytes:
# a read seeks to the nearest entry and scans at most this far, and the index
# stays small however many tiny batches there are.
INDEX_INTERVAL = 4096


@dataclass(frozen=True, slots=True)
class Tombstone:
    """Offsets ``[start, end)`` that held lost records (or may have) and are never used again."""

    start: int
    end: int
    note: str  # what was lost, where, when


@dataclass(slots=True)
class Segment:
    base_offset: int
    path: Path
    size: int = 0  # bytes of complete, valid batches
    end_offset: int = 0  # offset after the segment's last record or tombstone
    # Sparse index: the base offset and file position of some batches, ascending.
    index_offsets: array[int] = field(default_factory=lambda: array("q"))
    index_positions: array[int] = field(default_factory=lambda: array("q"))
    tombstones: list[Tombstone] = field(default_factory=list)
    # Damage at the tail that a read-only scan found and left in place (reads end before it).
    uncut: Tombstone | None = None
    # The tombstone this scan wrote in place of a damaged tail.
    cut: Tombstone | None = None
    # Bytes whose batches this process has checked (the scan at open): a read
    # checks the CRC only of batches beyond, so no batch is checked twice.
    verified: int = 0

    def add_to_index(self, base_offset: int, position: int) -> None:
        if not self.index_positions or position - self.index_positions[-1] >= INDEX_INTERVAL:
            self.index_offsets.append(base_offset)
            self.index_positions.append(position)

    def position_for(self, offset: int) -> int:
        """File position of an indexed batch at or before ``offset``'s batch."""
        i = bisect.bisect_right(self.index_offsets, offset) - 1
        return self.index_positions[i] if i >= 0 else 0


def encode_batch(base_offset: int, records: list[tuple[bytes, bytes]]) -> tuple[list[bytes], int]:
    """The frame of one batch (header and payload, written with one writev) and its record count."""
    chunks: list[bytes] = [BATCH.pack(base_offset, len(records))]
    pack = RECORD.pack
    for key, value in records:
        chunks += (pack(len(key), len(value)), key, value)
    payload = b"".join(chunks)
    if len(payload) > MAX_BATCH_BYTES:
        raise ValueError(
            f"a batch of {len(payload)} bytes exceeds {MAX_BATCH_BYTES}; append fewer records per call"
        )
    return [FRAME.pack(MAGIC, len(payload), zlib.crc32(payload)), payload], len(records)


def encode_tombstone(tombstone: Tombstone) -> list[bytes]:
    """The frame of a tombstone batch."""
    payload = (
        BATCH.pack(tombstone.start, 0) + TOMBSTONE_END.pack(tombstone.end) + tombstone.note.encode("utf-8")
    )
    return [FRAME.pack(MAGIC, len(payload), zlib.crc32(payload)), payload]


def _read_tombstone(buf: mmap.mmap, start: int, length: int, path: Path, pos: int) -> Tombstone:
    base, _ = BATCH.unpack_from(buf, start)
    if length < BATCH.size + TOMBSTONE_END.size:
        raise CorruptLogError(f"{path} at byte {pos}: a batch of 0 records that is not a tombstone")
    (end,) = TOMBSTONE_END.unpack_from(buf, start + BATCH.size)
    if end < base:
        raise CorruptLogError(f"{path} at byte {pos}: a tombstone ending at {end}, before its start {base}")
    note = bytes(buf[start + BATCH.size + TOMBSTONE_END.size : start + length])
    return Tombstone(base, end, note.decode("utf-8", errors="backslashreplace"))


def check_frame(buf: mmap.mmap, pos: int, size: int) -> tuple[int, int, int] | str:
    """``(payload length, base offset, count)`` of a valid batch at ``pos``, or what is wrong."""
    if pos + FRAME.size > size:
        return f"incomplete batch header ({size - pos} bytes)"
    magic, length, crc = FRAME.unpack_from(buf, pos)
    if magic != MAGIC:
        return f"bad magic byte 0x{magic:02x}"
    if not BATCH.size <= length <= MAX_BATCH_BYTES:
        return f"impossible batch length {length}"
    start = pos + FRAME.size
    if start + length > size:
        return f"incomplete batch ({size - start} of {length} bytes)"
    if zlib.crc32(buf[start : start + length]) != crc:
        return "checksum mismatch"
    base, count = BATCH.unpack_from(buf, start)
    return length, base, count


def scan_segment(path: Path, base_offset: int, *, is_last: bool, repair: bool, fsync: bool) -> Segment:
    """Validate a segment and index it; replace a damaged tail of the last one by a tombstone if ``repair``.

    Without ``repair`` the damage stays, reads end before it, and ``uncut``
    describes it.
    """
    segment = Segment(base_offset, path, end_offset=base_offset)
    size = path.stat().st_size
    if size == 0:
        return segment
    damage: Tombstone | None = None
    unpack_frame, unpack_batch, crc32 = FRAME.unpack_from, BATCH.unpack_from, zlib.crc32
    frame_size, smallest = FRAME.size, BATCH.size
    index_offsets, index_positions = segment.index_offsets, segment.index_positions
    indexed = -INDEX_INTERVAL  # the position of the last batch indexed
    with (
        open(path, "rb") as f,
        mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as buf,
        memoryview(buf) as view,
    ):
        pos = 0
        offset = base_offset
        while pos < size:
            # The checks of check_frame, inline for the batches that pass them (all but a damaged one).
            start = pos + frame_size
            if start <= size:
                magic, length, crc = unpack_frame(buf, pos)
                end = start + length
                valid = (
                    magic == MAGIC
                    and smallest <= length <= MAX_BATCH_BYTES
                    and end <= size
                    and crc32(view[start:end]) == crc
                )
            else:
                valid = False
            if not valid:
                checked = check_frame(buf, pos, size)
                problem = checked if isinstance(checked, str) else "invalid batch"
                _bad_tail(path, pos, size, problem, buf, is_last=is_last)
                damage = Tombstone(
                    offset,
                    offset + _records_that_fit(buf, pos, size, offset),
                    f"{size - pos} damaged bytes at byte {pos} of {path.name} ({problem})",
                )
                break
            base, count = unpack_batch(buf, start)
            if base != offset:
                raise CorruptLogError(
                    f"{path} at byte {pos}: batch of {count} records at offset {base}, "
                    f"expected offset {offset}"
                )
            if pos - indexed >= INDEX_INTERVAL:  # Segment.add_to_index, inline
                index_offsets.append(base)
                index_positions.append(pos)
                indexed = pos
            if count == 0:
                tombstone = _read_tombstone(buf, start, length, path, pos)
                segment.tombstones.append(tombstone)
                offset = tombstone.end
            else:
                offset = base + count
            pos = end
    segment.size = pos
    segment.verified = pos
    segment.end_offset = offset
    if damage is None:
        return segment
    if not repair:
        segment.uncut = damage
        return segment
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cut = Tombstone(damage.start, damage.end, f"{damage.note}, cut off when the log was opened at {when}")
    frame = b"".join(encode_tombstone(cut))
    with open(path, "r+b") as repaired:
        # The tombstone is durable before a byte of the damage goes, so a crash
        # in between cannot leave the offsets free for reuse.
        os.pwrite(repaired.fileno(), frame, pos)
        if fsync:
            os.fsync(repaired.fileno())
        repaired.truncate(pos + len(frame))
        if fsync:
            os.fsync(repaired.fileno())
    segment.add_to_index(cut.start, pos)
    segment.tombstones.append(cut)
    segment.cut = cut
    segment.size = pos + len(frame)
    segment.end_offset = cut.end
    return segment


def _records_that_fit(buf: mmap.mmap, pos: int, size: int, offset: int) -> int:
    """How many records the damaged batch at ``pos`` may have held, at most.

    The larger of what its header declares, when the header is plausible (our
    magic, the expected offset, a count its declared length can hold), and
    what the damaged bytes could hold. The first bounds a batch cut short (its
    header survives), the second a batch damaged in place (its bytes are all
    there), so one fault of either kind cannot make the bound too small.
    """
    by_size = max(0, (size - pos - FRAME.size - BATCH.size) // RECORD.size)
    if pos + FRAME.size + BATCH.size <= size:
        magic, length, _ = FRAME.unpack_from(buf, pos)
        base, count = BATCH.unpack_from(buf, pos + FRAME.size)
        room = length - BATCH.size
        if magic == MAGIC and base == offset and count * RECORD.size <= room <= MAX_BATCH_BYTES:
            return max(int(count), by_size)
    return by_size


def _bad_tail(path: Path, pos: int, size: int, problem: str, buf: mmap.mmap, *, is_last: bool) -> None:
    """Accept a damaged batch only as the torn tail of the last segment; raise otherwise."""
    if not is_last:
        raise CorruptLogError(f"{path} at byte {pos}: {problem} in a sealed segment")
    # A torn write leaves a prefix of the last batch. If the damaged batch's
    # length still leads to a complete, valid batch, the damage is in the
    # middle, and cutting there would drop acknowledged records.
    if pos + FRAME.size > size:
        return
    _, length, _ = FRAME.unpack_from(buf, pos)
    after = pos + FRAME.size + length
    if length <= MAX_BATCH_BYTES and after < size and not isinstance(check_frame(buf, after, size), str):
        raise CorruptLogError(
            f"{path} at byte {pos}: {problem}, but valid batches follow; "
            "this is damage, not a torn write, and is left for inspection"
        )


def read_segments(
    topic: str, partition: int, plan: list[tuple[Path, int, int, int]], from_offset: int, stop: int
) -> Iterator[Record]:
    """Records in ``[from_offset, stop)`` of the ``(path, start position, size, verified)`` segments in
    ``plan``; the CRC of a batch is checked unless it lies within the segment's first ``verified`` bytes."""
    unpack_record = RECORD.unpack_from
    unpack_batch = BATCH.unpack_from
    # What Record(...) does, without the call through its Python-level __new__.
    new_record = tuple.__new__
    for path, start, size, verified in plan:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as buf:
            pos = start
            while pos < size:
                magic, length, crc = FRAME.unpack_from(buf, pos)
                begin = pos + FRAME.size
                pos = begin + length
                if magic != MAGIC or pos > size:
                    raise CorruptLogError(f"{path}: bad batch header at byte {begin - FRAME.size}")
                base, count = unpack_batch(buf, begin)
                if base + count <= from_offset:
                    continue  # wholly before the range: skip without copying it
                if base >= stop:
                    return
                if pos > verified and zlib.crc32(buf[begin:pos]) != crc:
                    raise CorruptLogError(f"{path}: checksum mismatch at byte {begin - FRAME.size}")
                # Keys and values are copied straight out of the map, the batch never whole.
                at = begin + BATCH.size
                for offset in range(base, base + count):
                    key_len, value_len = unpack_record(buf, at)
                    at += RECORD.size
                    if offset >= stop:
                        return
                    if offset >= from_offset:
                        key = buf[at : at + key_len]
                        value = buf[at + key_len : at + key_len + value_len]
                        yield new_record(Record, (topic, partition, offset, key, value))
                    at += key_len + value_len
