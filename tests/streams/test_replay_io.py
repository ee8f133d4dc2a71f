from __future__ import annotations

from pathlib import Path

import pytest

from kueuestream.streams.codec import encode
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.log import LogError
from kueuestream.streams.schemas import AdmissionRecord, SourceRef
from kueuestream.streams.topic_copy import DestinationNotEmptyError, copy_topic, export_topics, import_topics
from kueuestream.streams.topics import ADMISSION, DECISIONS, admission_key

SHARDS = ["cohort:root-a", "cohort:team", "cq:solo", "cohort:ml", "cq:batch"]


def fill(log: FileLog, n: int = 500) -> None:
    batch = []
    for i in range(n):
        shard = SHARDS[i % len(SHARDS)]
        record = AdmissionRecord(
            shard=shard,
            time_ms=1_700_000_000_000 + i,
            type="Upsert",
            kind="Workload",
            namespace="ns",
            name=f"w{i}",
            object={"kind": "Workload", "metadata": {"name": f"w{i}"}, "spec": {"cpu": 0.5}},
            source=SourceRef(cluster="prod", resourceVersion=str(i)),
        )
        batch.append((admission_key(shard), encode(record)))
        if len(batch) == 37:
            log.append_many_sync(ADMISSION, batch)
            batch = []
    log.append_many_sync(ADMISSION, batch)
    log.append_many_sync(DECISIONS, [(b"ns/w1", b"{}")])


def contents(log: FileLog, topic: str) -> dict[int, list[tuple[int, bytes, bytes]]]:
    return {
        p: [(r.offset, r.key, r.value) for r in log.read_sync(topic, p)]
        for p in range(log.partitions_sync(topic))
    }


async def test_export_import_round_trip(tmp_path: Path) -> None:
    with FileLog(tmp_path / "origin", partitions={ADMISSION: 4}) as origin:
        fill(origin)
        exported = await export_topics(origin, tmp_path / "export")
        assert [c.source_topic for c in exported] == [ADMISSION, DECISIONS]
        assert exported[0].records == 500 and exported[0].offsets_preserved
        assert len(exported[0].partitions) == 4

        with FileLog(tmp_path / "restored") as restored:
            imported = await import_topics(tmp_path / "export", restored)
            assert [c.records for c in imported] == [500, 1]
            assert all(c.offsets_preserved for c in imported)
            # The destination took the source's partition count, not its own default (6).
            assert restored.partitions_sync(ADMISSION) == 4
            for topic in (ADMISSION, DECISIONS):
                assert contents(restored, topic) == contents(origin, topic)


async def test_copy_refuses_a_non_empty_destination(tmp_path: Path) -> None:
    with FileLog(tmp_path / "a") as source, FileLog(tmp_path / "b") as target:
        fill(source, 20)
        await copy_topic(source, target, ADMISSION)
        with pytest.raises(DestinationNotEmptyError, match="already has records"):
            await copy_topic(source, target, ADMISSION)
        again = await copy_topic(source, target, ADMISSION, allow_nonempty=True)
        assert again.records == 20 and not again.offsets_preserved
        renamed = await copy_topic(source, target, ADMISSION, destination_topic="archive.admission")
        assert renamed.offsets_preserved
        assert contents(target, "archive.admission") == contents(source, ADMISSION)


async def test_import_needs_a_log(tmp_path: Path) -> None:
    with FileLog(tmp_path / "b") as target, pytest.raises(LogError, match="no log to import"):
        await import_topics(tmp_path / "missing", target)
