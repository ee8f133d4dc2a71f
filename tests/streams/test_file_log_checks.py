"""A batch's CRC is checked once in a process: by the scan at open, or when read if appended since."""

from __future__ import annotations

from pathlib import Path

import pytest

from kueuestream.streams.file_log import FileLog
from kueuestream.streams.log import CorruptLogError

TOPIC = "test.topic"


def flip_last_byte(directory: Path) -> None:
    (segment,) = sorted((directory / TOPIC / "0").glob("*.log"))
    damaged = bytearray(segment.read_bytes())
    damaged[-1] ^= 0x01
    segment.write_bytes(bytes(damaged))


def test_a_batch_appended_after_open_is_checked_when_read(tmp_path: Path) -> None:
    with FileLog(tmp_path) as log:
        log.ensure_topic_sync(TOPIC, 1)
        log.append_sync(TOPIC, b"k", b"appended")
        flip_last_byte(tmp_path)  # no scan saw this batch
        with pytest.raises(CorruptLogError, match="checksum mismatch"):
            list(log.read_sync(TOPIC, 0))


def test_damage_a_scan_found_ends_the_read_before_it(tmp_path: Path) -> None:
    with FileLog(tmp_path) as log:
        log.ensure_topic_sync(TOPIC, 1)
        log.append_sync(TOPIC, b"k", b"good")
        log.append_sync(TOPIC, b"k", b"damaged")
    flip_last_byte(tmp_path)
    with FileLog(tmp_path, read_only=True) as reader:
        assert [r.value for r in reader.read_sync(TOPIC, 0)] == [b"good"]
        (damage,) = reader.lost_sync()
        assert damage.start == 1 and "checksum mismatch" in damage.note


def test_a_read_only_log_opens_only_the_topics_named(tmp_path: Path) -> None:
    with FileLog(tmp_path) as log:
        log.ensure_topic_sync(TOPIC, 1)
        log.ensure_topic_sync("other.topic", 1)
        log.append_sync(TOPIC, b"k", b"kept")
        log.append_sync("other.topic", b"k", b"damaged")
    (other,) = sorted((tmp_path / "other.topic" / "0").glob("*.log"))
    other.write_bytes(other.read_bytes()[:-1] + b"\x00junk")
    with FileLog(tmp_path, read_only=True, topics=[TOPIC]) as reader:
        assert reader.topics_sync() == [TOPIC]
        assert [r.value for r in reader.read_sync(TOPIC, 0)] == [b"kept"]
        assert reader.lost_sync() == []
    with pytest.raises(ValueError, match="read-only"):
        FileLog(tmp_path, topics=[TOPIC])
