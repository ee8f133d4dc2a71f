from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kueuestream.streams.file_log import FileLog, LogLockedError, ReadOnlyLogError
from kueuestream.streams.log import (
    CorruptLogError,
    LogClosedError,
    Position,
    Record,
    TopicMismatchError,
    UnknownTopicError,
)
from kueuestream.streams.topics import ADMISSION, ERRORS, partition_for_key

TOPIC = "test.topic"


def segments(directory: Path, topic: str = TOPIC, partition: int = 0) -> list[Path]:
    return sorted((directory / topic / str(partition)).glob("*.log"))


def values(log: FileLog, topic: str = TOPIC, partition: int = 0, start: int = 0) -> list[bytes]:
    return [r.value for r in log.read_sync(topic, partition, start)]


def test_append_and_read(tmp_path: Path) -> None:
    with FileLog(tmp_path) as log:
        first = log.append_sync(ADMISSION, b"cq:solo", b"v0")
        rest = log.append_many_sync(
            ADMISSION, [(b"cq:solo", b"v1"), (b"cohort:ml", b"m0"), (b"cq:solo", b"v2")]
        )
        solo = partition_for_key(b"cq:solo", 6)
        ml = partition_for_key(b"cohort:ml", 6)
        assert first == Position(ADMISSION, solo, 0)
        assert rest == [
            Position(ADMISSION, solo, 1),
            Position(ADMISSION, ml, 0),
            Position(ADMISSION, solo, 2),
        ]
        assert list(log.read_sync(ADMISSION, solo)) == [
            Record(ADMISSION, solo, 0, b"cq:solo", b"v0"),
            Record(ADMISSION, solo, 1, b"cq:solo", b"v1"),
            Record(ADMISSION, solo, 2, b"cq:solo", b"v2"),
        ]
        assert [r.value for r in log.read_sync(ADMISSION, solo, 1, until=2)] == [b"v1"]
        ends = log.end_offsets_sync(ADMISSION)
        assert ends[solo] == 3 and ends[ml] == 1 and sum(ends.values()) == 4
        assert log.topics_sync() == [ADMISSION]
        assert log.append_sync(ADMISSION, b"anything", b"x", partition=5).partition == 5


def test_empty_keys_values_and_empty_batches(tmp_path: Path) -> None:
    with FileLog(tmp_path) as log:
        assert log.append_many_sync(ERRORS, []) == []
        log.append_sync(ERRORS, b"", b"")
        assert list(log.read_sync(ERRORS, 0)) == [Record(ERRORS, 0, 0, b"", b"")]


def test_reopen_continues_offsets(tmp_path: Path) -> None:
    with FileLog(tmp_path) as log:
        log.ensure_topic_sync(TOPIC, 2)
        log.append_many_sync(TOPIC, [(b"k", b"a"), (b"k", b"b")], partition=0)
    with FileLog(tmp_path) as log:
        assert log.partitions_sync(TOPIC) == 2
        assert log.end_offsets_sync(TOPIC) == {0: 2, 1: 0}
        assert log.append_sync(TOPIC, b"k", b"c", partition=0) == Position(TOPIC, 0, 2)
        assert log.append_sync(TOPIC, b"k", b"z", partition=1) == Position(TOPIC, 1, 0)
    with FileLog(tmp_path) as log:
        assert values(log) == [b"a", b"b", b"c"]
        assert values(log, partition=1) == [b"z"]


def test_a_torn_tail_is_replaced_by_a_tombstone(tmp_path: Path) -> None:
    with FileLog(tmp_path) as log:
        log.ensure_topic_sync(TOPIC, 1)
        log.append_many_sync(TOPIC, [(b"k", b"a"), (b"k", b"b")])
        log.append_sync(TOPIC, b"k", b"c")
    (segment,) = segments(tmp_path)
    with open(segment, "ab") as f:
        f.write(b"\xb1\x00\x00\x01\x00garbage")  # a batch header promising more than is there
    with FileLog(tmp_path) as log:
        assert values(log) == [b"a", b"b", b"c"]
        (cut,) = log.cut_on_open
        assert (cut.topic, cut.partition, cut.start, cut.cut) == (TOPIC, 0, 3, True)
        assert "12 damaged bytes" in cut.note and "incomplete batch" in cut.note
        assert log.append_sync(TOPIC, b"k", b"d").offset == cut.end
    with FileLog(tmp_path) as log:
        assert values(log) == [b"a", b"b", b"c", b"d"]
        assert log.cut_on_open == [] and log.lost_sync() == [cut]


def test_random_garbage_tail_is_cut(tmp_path: Path) -> None:
    with FileLog(tmp_path) as log:
        log.ensure_topic_sync(TOPIC, 1)
        log.append_sync(TOPIC, b"k", b"a")
    (segment,) = segments(tmp_path)
    with open(segment, "ab") as f:
        f.write(os.urandom(3) + b"\x00" * 4096)
    with FileLog(tmp_path) as log:
        assert values(log) == [b"a"]


def test_a_half_written_batch_disappears_whole(tmp_path: Path) -> None:
    with FileLog(tmp_path) as log:
        log.ensure_topic_sync(TOPIC, 1)
        log.append_sync(TOPIC, b"k", b"first")
        log.append_many_sync(TOPIC, [(b"k", b"x" * 100) for _ in range(10)])
    (segment,) = segments(tmp_path)
    # A crash in the middle of writing the second batch.
    os.truncate(segment, segment.stat().st_size - 500)
    with FileLog(tmp_path) as log:
        assert values(log) == [b"first"]
        # Its 10 offsets are never given to another record.
        (cut,) = log.lost_sync()
        assert cut.start == 1 and cut.end >= 11
        assert log.append_sync(TOPIC, b"k", b"next").offset == cut.end


def test_damage_before_valid_batches_is_not_truncated(tmp_path: Path) -> None:
    with FileLog(tmp_path) as log:
        log.ensure_topic_sync(TOPIC, 1)
        for value in (b"aaaa", b"bbbb", b"cccc"):
            log.append_sync(TOPIC, b"k", value)
    (segment,) = segments(tmp_path)
    data = bytearray(segment.read_bytes())
    data[data.index(b"bbbb")] ^= 0xFF  # a flipped bit in the middle batch
    segment.write_bytes(bytes(data))
    size = segment.stat().st_size
    with pytest.raises(CorruptLogError, match="valid batches follow"):
        FileLog(tmp_path)
    assert segment.stat().st_size == size


def test_segments_roll_and_reads_start_anywhere(tmp_path: Path) -> None:
    # Segments of ~10 kB, each with a few sparse index entries (one per 4 kB).
    with FileLog(tmp_path, segment_bytes=10_000) as log:
        log.ensure_topic_sync(TOPIC, 1)
        for i in range(0, 3000, 3):
            log.append_many_sync(TOPIC, [(b"k", f"v{j}".encode()) for j in range(i, i + 3)])
        assert len(segments(tmp_path)) >= 6
        expected = [f"v{j}".encode() for j in range(3000)]
        assert values(log) == expected
        for start in (0, 1, 2, 3, 4, 77, 150, 1501, 1502, 2998, 2999, 3000, 5000):
            assert values(log, start=start) == expected[start:]
        assert [r.offset for r in log.read_sync(TOPIC, 0, 1000, until=1004)] == [1000, 1001, 1002, 1003]
    with FileLog(tmp_path, segment_bytes=10_000) as log:
        assert values(log, start=1234) == expected[1234:]
        assert log.append_sync(TOPIC, b"k", b"v3000").offset == 3000


def test_corruption_in_a_sealed_segment_is_an_error(tmp_path: Path) -> None:
    with FileLog(tmp_path, segment_bytes=100) as log:
        log.ensure_topic_sync(TOPIC, 1)
        for i in range(5):
            log.append_sync(TOPIC, b"k", b"x" * 100 + bytes([i]))
    first = segments(tmp_path)[0]
    with open(first, "ab") as f:
        f.write(b"junk")
    with pytest.raises(CorruptLogError, match="sealed segment"):
        FileLog(tmp_path)


def test_a_missing_segment_is_an_error(tmp_path: Path) -> None:
    with FileLog(tmp_path, segment_bytes=100) as log:
        log.ensure_topic_sync(TOPIC, 1)
        for _ in range(4):
            log.append_sync(TOPIC, b"k", b"x" * 100)
    segments(tmp_path)[1].unlink()
    with pytest.raises(CorruptLogError, match="should start at offset"):
        FileLog(tmp_path)


def test_reads_see_the_records_present_when_called(tmp_path: Path) -> None:
    with FileLog(tmp_path) as log:
        log.ensure_topic_sync(TOPIC, 1)
        log.append_sync(TOPIC, b"k", b"a")
        reader = log.read_sync(TOPIC, 0)
        log.append_sync(TOPIC, b"k", b"b")
        assert [r.value for r in reader] == [b"a"]


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    with FileLog(tmp_path) as log:
        log.ensure_topic_sync(TOPIC, 1)
        log.append_sync(TOPIC, b"k", b"a")
        with pytest.raises(LogLockedError, match="already open for writing"):
            FileLog(tmp_path)
        with FileLog(tmp_path, read_only=True) as reader:
            assert values(reader) == [b"a"]
            with pytest.raises(ReadOnlyLogError):
                reader.append_sync(TOPIC, b"k", b"b")
    with FileLog(tmp_path) as log:  # the lock went with the first log
        assert values(log) == [b"a"]


def test_read_only_does_not_repair(tmp_path: Path) -> None:
    with FileLog(tmp_path) as log:
        log.ensure_topic_sync(TOPIC, 1)
        log.append_sync(TOPIC, b"k", b"a")
    (segment,) = segments(tmp_path)
    with open(segment, "ab") as f:
        f.write(b"\xb1torn")
    size = segment.stat().st_size
    with FileLog(tmp_path, read_only=True) as reader:
        assert values(reader) == [b"a"]
        (damage,) = reader.lost_sync()
        assert (damage.start, damage.cut) == (1, False) and "not cut yet" in str(damage)
    assert segment.stat().st_size == size


def test_topics_must_be_known_or_created(tmp_path: Path) -> None:
    with FileLog(tmp_path, partitions={ADMISSION: 3}) as log:
        with pytest.raises(UnknownTopicError, match="explicit partition count"):
            log.append_sync("typo.topic", b"k", b"v")
        with pytest.raises(UnknownTopicError):
            log.partitions_sync("typo.topic")
        assert log.partitions_sync(ADMISSION) == 3
        assert log.end_offsets_sync(ADMISSION) == {0: 0, 1: 0, 2: 0}
        assert list(log.read_sync(ADMISSION, 2)) == []
        assert log.ensure_topic_sync(TOPIC, 4) == 4
        with pytest.raises(TopicMismatchError):
            log.ensure_topic_sync(TOPIC, 5)
        with pytest.raises(ValueError, match=r"partitions 0\.\.3"):
            log.append_sync(TOPIC, b"k", b"v", partition=4)
        with pytest.raises(ValueError, match="invalid topic name"):
            log.ensure_topic_sync("../x", 1)
    # On disk, the topic's own count wins over a new default.
    with FileLog(tmp_path, partitions={TOPIC: 9}) as log:
        assert log.partitions_sync(TOPIC) == 4


def test_closed_log_refuses_work(tmp_path: Path) -> None:
    log = FileLog(tmp_path)
    log.close_sync()
    log.close_sync()
    with pytest.raises(LogClosedError):
        log.append_sync(ADMISSION, b"k", b"v")


async def test_async_interface(tmp_path: Path) -> None:
    async with FileLog(tmp_path, fsync=False) as log:
        assert await log.ensure_topic(TOPIC, 2) == 2
        positions = await log.append_many(TOPIC, [(b"k", str(i).encode()) for i in range(3000)], partition=1)
        assert positions[-1] == Position(TOPIC, 1, 2999)
        assert (await log.append(TOPIC, b"k", b"x", partition=0)).offset == 0
        got = [r.offset async for r in log.read(TOPIC, 1, 10)]
        assert got == list(range(10, 3000))
        assert await log.end_offsets(TOPIC) == {0: 1, 1: 3000}
        assert await log.partitions(TOPIC) == 2
        assert await log.topics() == [TOPIC]


def test_speed_100k_records(tmp_path: Path) -> None:
    value = b'{"kind":"Workload","name":"w","namespace":"team-a","shard":"cohort:root"}' + b"x" * 150
    records = [(f"cohort:root-{i % 50}".encode(), value) for i in range(100_000)]
    start = time.perf_counter()
    with FileLog(tmp_path) as log:
        for i in range(0, len(records), 1000):
            log.append_many_sync(ADMISSION, records[i : i + 1000])  # one fsync per partition per call
        appended = time.perf_counter()
        read = sum(1 for p in range(6) for _ in log.read_sync(ADMISSION, p))
    done = time.perf_counter()
    assert read == 100_000
    # The target is "a couple of seconds"; the bound is loose for slow CI disks.
    assert done - start < 15, f"append {appended - start:.2f}s, read {done - appended:.2f}s"


WRITER = """
import sys
from kueuestream.streams.file_log import FileLog

with FileLog(sys.argv[1]) as log:
    log.ensure_topic_sync("test.topic", 2)
    n = 0
    while True:
        size = 1 + n % 50
        batch = [(b"k", b"%d:" % (n + i) + b"x" * 20_000) for i in range(size)]
        log.append_many_sync("test.topic", batch, partition=n % 2)
        n += size
        print(n, flush=True)  # acknowledged: every record below n is durable
"""


def test_killed_writer_loses_nothing_acknowledged(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    assert proc.stdout is not None
    acknowledged = 0
    try:
        for line in proc.stdout:
            acknowledged = int(line)
            if acknowledged >= 2000:
                break
    finally:
        proc.send_signal(signal.SIGKILL)  # mid-write, most likely
        proc.wait()
    assert acknowledged >= 2000
    with FileLog(tmp_path) as log:
        records = [r for p in (0, 1) for r in log.read_sync("test.topic", p)]
        numbers = sorted(int(r.value.split(b":")[0]) for r in records)
        # Everything acknowledged is there, and what is there is whole batches, dense.
        assert numbers == list(range(len(numbers)))
        assert len(numbers) >= acknowledged
        for p in (0, 1):
            offsets = [r.offset for r in log.read_sync("test.topic", p)]
            assert offsets == list(range(len(offsets)))
