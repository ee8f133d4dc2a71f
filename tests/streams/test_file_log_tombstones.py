"""Damage at the tail of a partition: the offsets of what was cut off are never given out again."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kueuestream.streams.file_log import FileLog
from kueuestream.streams.segment_format import BATCH, FRAME, Tombstone, encode_tombstone

TOPIC = "test.topic"


def segment_of(directory: Path, partition: int = 0) -> Path:
    (path,) = sorted((directory / TOPIC / str(partition)).glob("*.log"))
    return path


def values(log: FileLog, start: int = 0) -> list[bytes]:
    return [r.value for r in log.read_sync(TOPIC, 0, start)]


def write_batches(directory: Path, batches: list[list[bytes]]) -> tuple[int, int]:
    """The batches, one append each; the last batch's (byte position, base offset)."""
    position, base = 0, 0
    # What is checked is the format, not durability: no fsync, which keeps the property test fast.
    with FileLog(directory, fsync=False) as log:
        log.ensure_topic_sync(TOPIC, 1)
        for batch in batches:
            position = sum(p.stat().st_size for p in (directory / TOPIC / "0").glob("*.log"))
            base = log.append_many_sync(TOPIC, [(b"k", v) for v in batch])[0].offset
    return position, base


def test_a_flipped_last_byte_never_lets_its_offsets_be_reused(tmp_path: Path) -> None:
    """The reported case: flip the last byte of a segment, write again."""
    write_batches(tmp_path, [[b"a", b"b"], [b"c", b"d", b"e"]])
    segment = segment_of(tmp_path)
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF
    segment.write_bytes(bytes(data))
    with FileLog(tmp_path) as log:
        assert values(log) == [b"a", b"b"]
        (cut,) = log.cut_on_open
        assert cut.start == 2 and cut.end >= 5 and "checksum mismatch" in cut.note
        after = log.append_sync(TOPIC, b"k", b"new").offset
        assert after >= 5
    with FileLog(tmp_path) as log:
        records = [(r.offset, r.value) for r in log.read_sync(TOPIC, 0)]
        assert records == [(0, b"a"), (1, b"b"), (after, b"new")]
        # Reading from inside the lost range starts at the next record.
        assert values(log, start=3) == [b"new"]
        assert log.lost_sync() == [cut]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=4),
    value_len=st.integers(min_value=0, max_value=40),
    fault=st.one_of(
        st.tuples(st.just("truncate"), st.floats(min_value=0.0, max_value=0.999)),
        st.tuples(st.just("flip"), st.floats(min_value=0.0, max_value=0.999)),
    ),
    mask=st.integers(min_value=1, max_value=255),
)
def test_one_fault_in_the_last_batch_never_lets_an_offset_be_reused(
    sizes: list[int], value_len: int, fault: tuple[str, float], mask: int
) -> None:
    """Any one fault in the last batch: one byte changed anywhere, or cut short after its header.

    A batch cut inside its 21-byte header says nothing of how many records it
    held; there only what consumers recorded tells (see the pipeline's tests).
    """
    directory = Path(tempfile.mkdtemp())
    try:
        batches = [
            [bytes([65 + b]) * value_len + str(i).encode() for i in range(n)] for b, n in enumerate(sizes)
        ]
        position, base = write_batches(directory, batches)
        segment = segment_of(directory)
        data = bytearray(segment.read_bytes())
        end = base + len(batches[-1])
        kind, where = fault
        if kind == "truncate":
            header = FRAME.size + BATCH.size
            data = data[: position + header + int(where * (len(data) - position - header))]
        else:
            data[position + int(where * (len(data) - position))] ^= mask
        segment.write_bytes(bytes(data))
        before = [v for batch in batches[:-1] for v in batch]
        with FileLog(directory, fsync=False) as log:
            assert values(log) == before
            assert log.append_sync(TOPIC, b"k", b"next").offset >= end
        with FileLog(directory, fsync=False) as log:
            assert values(log) == [*before, b"next"]
            (lost,) = log.lost_sync()
            assert lost.start == base and lost.end >= end
    finally:
        shutil.rmtree(directory)


def test_a_crash_between_writing_the_tombstone_and_cutting_the_damage(tmp_path: Path) -> None:
    """The tombstone goes over the damage first; damage left after it is cut at the next open."""
    position, _ = write_batches(tmp_path, [[b"a"], [b"b" * 200, b"c" * 200]])
    segment = segment_of(tmp_path)
    damaged = bytearray(segment.read_bytes())
    damaged[-1] ^= 0x01
    tombstone = b"".join(encode_tombstone(Tombstone(1, 3, "cut off")))
    # What the disk holds when the tombstone was written over the damage, but the cut never happened.
    crashed = damaged[:position] + tombstone + damaged[position + len(tombstone) :]
    segment.write_bytes(bytes(crashed))
    with FileLog(tmp_path) as log:
        assert values(log) == [b"a"]
        assert log.append_sync(TOPIC, b"k", b"d").offset >= 3
        first, second = log.lost_sync()
        assert (first.start, first.end, first.note) == (1, 3, "cut off")
        assert second.start == 3


def test_skip_to_covers_offsets_a_consumer_saw_but_the_log_lost(tmp_path: Path) -> None:
    write_batches(tmp_path, [[b"a", b"b"]])
    with FileLog(tmp_path) as log:
        log.skip_to_sync(TOPIC, 0, 10, "processed by someone, not in the log")
        log.skip_to_sync(TOPIC, 0, 4, "already covered: no-op")
        assert log.end_offsets_sync(TOPIC) == {0: 10}
        assert log.append_sync(TOPIC, b"k", b"c").offset == 10
    with FileLog(tmp_path) as log:
        assert [r.offset for r in log.read_sync(TOPIC, 0)] == [0, 1, 10]
        (lost,) = log.lost_sync()
        assert str(lost) == f"{TOPIC} partition 0, offsets 2..9: processed by someone, not in the log"


def test_a_reader_from_before_tombstones_refuses_them(tmp_path: Path) -> None:
    """A tombstone is a batch of 0 records, which the earlier format refused as corrupt."""
    write_batches(tmp_path, [[b"a"]])
    with FileLog(tmp_path) as log:
        log.skip_to_sync(TOPIC, 0, 5, "gap")
    data = segment_of(tmp_path).read_bytes()
    _, length, _ = FRAME.unpack_from(data, 0)
    tombstone = data[FRAME.size + length :]
    # base offset 1, record count 0, then the end offset.
    assert tombstone[FRAME.size : FRAME.size + 12] == (1).to_bytes(8, "big") + (0).to_bytes(4, "big")
    assert tombstone[FRAME.size + 12 : FRAME.size + 20] == (5).to_bytes(8, "big")
