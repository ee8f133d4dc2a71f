from __future__ import annotations

import random

import pytest
from aiokafka.partitioner import murmur2 as aiokafka_murmur2

from kueuestream.streams import topics
from kueuestream.streams.topics import (
    BROADCAST,
    murmur2,
    partition_for_key,
    partition_for_shard,
    partitions_for_shard,
    shard_for_root,
    shard_root,
)

# From Kafka's UtilsTest.testMurmur2 (signed Java ints).
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("data", "expected"), JAVA_MURMUR2.items())
def test_murmur2_matches_the_java_client(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected & 0xFFFFFFFF


def test_murmur2_matches_aiokafka() -> None:
    rng = random.Random(7)
    for size in range(64):
        data = rng.randbytes(size)
        assert murmur2(data) == aiokafka_murmur2(data)


def test_shard_partitions_are_fixed() -> None:
    # These must never change: they decide where existing logs keep each shard.
    expected = {"cohort:root-a": 4, "cohort:team": 1, "cq:solo": 5, "cohort:ml": 3, "cq:batch": 0}
    for shard, partition in expected.items():
        assert partition_for_shard(shard, 6) == partition
        assert partitions_for_shard(shard, 6) == (partition,)
    assert partition_for_key(b"21", 7) == (3321034988 & 0x7FFFFFFF) % 7


def test_broadcast_goes_everywhere() -> None:
    assert partitions_for_shard(BROADCAST, 6) == (0, 1, 2, 3, 4, 5)
    with pytest.raises(ValueError, match="broadcast"):
        partition_for_shard(BROADCAST, 6)


def test_shard_names() -> None:
    assert shard_for_root("research") == "cohort:research"
    assert shard_for_root("solo", "ClusterQueue") == "cq:solo"
    assert shard_root("cohort:research") == ("Cohort", "research")
    assert shard_root("cq:solo") == ("ClusterQueue", "solo")
    with pytest.raises(ValueError):
        shard_for_root("")
    with pytest.raises(ValueError):
        shard_root("research")


def test_broadcast_kinds() -> None:
    for kind in ("Configuration", "ResourceFlavor", "DeviceClass", "ResourceSlice", "WorkloadPriorityClass"):
        assert topics.is_broadcast_kind(kind)
    for kind in ("Cohort", "ClusterQueue", "LocalQueue", "Workload"):
        assert not topics.is_broadcast_kind(kind)


def test_keys() -> None:
    assert topics.watch_key("prod", "ResourceFlavor", "", "f") == b"prod/ResourceFlavor//f"
    assert topics.watch_key("prod", "Workload", "ns", "w") == b"prod/Workload/ns/w"
    assert topics.admission_key("cq:solo") == b"cq:solo"
    assert topics.decision_key("ns", "w") == b"ns/w"


def test_topic_defaults_and_overrides() -> None:
    assert topics.DEFAULT_PARTITIONS[topics.ADMISSION] == 6
    assert set(topics.DEFAULT_PARTITIONS) == {
        "kueue.watch",
        "kueue.admission",
        "kueue.decisions",
        "kueue.applied",
        "kueue.errors",
        "kueue.multikueue",
        "kueue.multikueue.applied",
    }
    counts = topics.partition_counts({topics.ADMISSION: 12, "my.topic": 2})
    assert counts[topics.ADMISSION] == 12 and counts["my.topic"] == 2
    with pytest.raises(ValueError, match="positive"):
        topics.partition_counts({topics.ADMISSION: 0})
    with pytest.raises(ValueError, match="invalid topic name"):
        topics.validate_topic_name("../etc")
