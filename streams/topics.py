"""Topic names, partition counts, record keys, shard names and the partitioner.

Topics and their keys::

    kueue.watch       cluster/kind/namespace/name   WatchEvent
    kueue.admission   shard                          AdmissionRecord
    kueue.decisions   namespace/name (the workload)  DecisionRecord
    kueue.applied     namespace/name (the workload)  AppliedRecord
    kueue.errors      origin (topic or file)         ErrorRecord
    kueue.multikueue  manager Workload ns/name, or   MultiKueueDecision
                      the cluster or check name
    kueue.multikueue.applied  (same as above)        MultiKueueApplied

Shards. A shard is one cohort tree, named after its root: ``cohort:<root>`` for
a tree rooted at a Cohort, ``cq:<name>`` for a ClusterQueue that has no cohort
(it is a tree of its own). Cohort and ClusterQueue names live in different
namespaces in Kueue, hence the prefixes. Which root an object belongs to (a
ClusterQueue through its cohort chain, a LocalQueue or Workload through its
ClusterQueue) is decided by the ingest agent's routing table, not here.

Objects every shard needs (see :data:`BROADCAST_KINDS`) go to the
:data:`BROADCAST` shard: such a record is appended once to every partition of
``kueue.admission`` (:func:`partitions_for_shard`), so each shard reads it in
its own total order, between its own records. Cohort and ClusterQueue
definitions are not broadcast; they belong to the shard of their tree root.

The partitioner is Kafka's default one (murmur2 of the key, sign bit cleared,
modulo the partition count), reimplemented here. A shard must land on the same
partition in every process and every run, which rules out Python's ``hash()``
(salted per process); murmur2 rather than another fixed hash such as crc32
because then a record produced by any standard Kafka client (aiokafka, Faust,
the Java client) with the same key lands where this module says, so the two
can never disagree about where a shard lives.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

WATCH = "kueue.watch"
ADMISSION = "kueue.admission"
DECISIONS = "kueue.decisions"
APPLIED = "kueue.applied"
ERRORS = "kueue.errors"
MULTIKUEUE = "kueue.multikueue"
MULTIKUEUE_APPLIED = "kueue.multikueue.applied"

# Kafka keeps data forever with retention.ms=-1; the watch and admission logs
# are the source of truth for replay and the decisions the audit trail, so
# none of them may expire under a broker-wide default.
_KEEP_FOREVER: Mapping[str, str] = MappingProxyType({"retention.ms": "-1", "retention.bytes": "-1"})


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    key: str  # what the record key is, for humans
    kafka_config: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


TOPICS: tuple[TopicSpec, ...] = (
    # One partition: ingest keeps a cluster-wide routing table (ClusterQueue ->
    # cohort root, LocalQueue -> ClusterQueue, claim templates) and must see all
    # watch events in one total order for its output to be reproducible.
    # Ingest is light; the parallelism is in kueue.admission.
    TopicSpec(WATCH, 1, "cluster/kind/namespace/name", _KEEP_FOREVER),
    TopicSpec(ADMISSION, 6, "shard", _KEEP_FOREVER),
    # Applying is per workload and independent, so it scales like admission.
    TopicSpec(DECISIONS, 6, "namespace/name of the workload", _KEEP_FOREVER),
    TopicSpec(APPLIED, 6, "namespace/name of the workload"),
    # Rare, and read by people: one partition keeps them in the order they happened.
    TopicSpec(ERRORS, 1, "origin topic or file"),
    # One partition each: the dispatcher reads kueue.watch in one order, and its
    # executor applies decisions in the order they were made.
    TopicSpec(
        MULTIKUEUE, 1, "namespace/name of the manager Workload, or the cluster or check name", _KEEP_FOREVER
    ),
    TopicSpec(MULTIKUEUE_APPLIED, 1, "as kueue.multikueue"),
)

TOPIC_SPECS: Mapping[str, TopicSpec] = MappingProxyType({spec.name: spec for spec in TOPICS})
DEFAULT_PARTITIONS: Mapping[str, int] = MappingProxyType({spec.name: spec.partitions for spec in TOPICS})


def partition_counts(overrides: Mapping[str, int] | None = None) -> dict[str, int]:
    """The default partition counts with ``overrides`` applied (and checked)."""
    counts = dict(DEFAULT_PARTITIONS)
    for topic, count in (overrides or {}).items():
        validate_topic_name(topic)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"topic {topic}: partition count must be a positive int, got {count!r}")
        counts[topic] = count
    return counts


_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def validate_topic_name(topic: str) -> str:
    """Kafka's rule for topic names; the file log also uses them as directory names."""
    if not _TOPIC_NAME.fullmatch(topic) or topic in {".", ".."}:
        raise ValueError(
            f"invalid topic name {topic!r}: use 1-249 characters from [A-Za-z0-9._-], not '.' or '..'"
        )
    return topic


# --- keys -----------------------------------------------------------------


def watch_key(cluster: str, kind: str, namespace: str, name: str) -> bytes:
    # "/" cannot occur in Kubernetes names or kinds, so the key is unambiguous
    # even with the empty namespace of a cluster-scoped object.
    return f"{cluster}/{kind}/{namespace}/{name}".encode()


def admission_key(shard: str) -> bytes:
    return shard.encode()


def decision_key(namespace: str, name: str) -> bytes:
    """Key of ``kueue.decisions`` and ``kueue.applied``: the workload."""
    return f"{namespace}/{name}".encode()


def multikueue_key(namespace: str, name: str) -> bytes:
    """Key of ``kueue.multikueue`` and its applied topic: ``ns/name`` of a Workload, or a bare name."""
    return f"{namespace}/{name}".encode() if namespace else name.encode()


def error_key(origin: str) -> bytes:
    """Key of ``kueue.errors``: the topic or file the bad input came from."""
    return origin.encode()


# --- shards -----------------------------------------------------------------

BROADCAST = "*"

# Cluster-wide objects every shard needs to decide on its own workloads.
BROADCAST_KINDS: frozenset[str] = frozenset(
    {
        "Configuration",
        "ResourceFlavor",
        "DeviceClass",
        "ResourceSlice",
        "WorkloadPriorityClass",
        "Namespace",
        "RuntimeClass",
    }
)

COHORT_SHARD_PREFIX = "cohort:"
CLUSTER_QUEUE_SHARD_PREFIX = "cq:"


def is_broadcast_kind(kind: str) -> bool:
    return kind in BROADCAST_KINDS


def shard_for_root(root_name: str, root_kind: Literal["Cohort", "ClusterQueue"] = "Cohort") -> str:
    """The shard of the cohort tree whose root is ``root_name``.

    A tree is rooted at a Cohort (``cohort:<name>``), or is a lone ClusterQueue
    without a cohort (``root_kind="ClusterQueue"``, ``cq:<name>``).
    """
    if not root_name:
        raise ValueError("a shard root needs a name")
    if root_kind == "Cohort":
        return COHORT_SHARD_PREFIX + root_name
    if root_kind == "ClusterQueue":
        return CLUSTER_QUEUE_SHARD_PREFIX + root_name
    raise ValueError(f"a shard root is a Cohort or a ClusterQueue, not {root_kind!r}")


def shard_root(shard: str) -> tuple[Literal["Cohort", "ClusterQueue"], str]:
    """Inverse of :func:`shard_for_root`: ``(root kind, root name)``."""
    if shard.startswith(COHORT_SHARD_PREFIX) and len(shard) > len(COHORT_SHARD_PREFIX):
        return "Cohort", shard[len(COHORT_SHARD_PREFIX) :]
    if shard.startswith(CLUSTER_QUEUE_SHARD_PREFIX) and len(shard) > len(CLUSTER_QUEUE_SHARD_PREFIX):
        return "ClusterQueue", shard[len(CLUSTER_QUEUE_SHARD_PREFIX) :]
    raise ValueError(f"{shard!r} is not a shard name (cohort:<root> or cq:<name>)")


# --- partitioner ----------------------------------------------------------------

_MASK32 = 0xFFFFFFFF
_SEED = 0x9747B28C
_M = 0x5BD1E995


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (``org.apache.kafka.common.utils.Utils.murmur2``), unsigned 32 bits."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    words = length // 4
    for k in struct.unpack_from(f"<{words}I", data):
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = length & ~3
    extra = length & 3
    if extra >= 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key``."""
    if partitions < 1:
        raise ValueError(f"partition count must be positive, got {partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def partition_for_shard(shard: str, partitions: int) -> int:
    """The one ``kueue.admission`` partition that holds ``shard``'s records."""
    if shard == BROADCAST:
        raise ValueError("the broadcast shard is on every partition; use partitions_for_shard")
    return partition_for_key(admission_key(shard), partitions)


def partitions_for_shard(shard: str, partitions: int) -> tuple[int, ...]:
    """Where a record for ``shard`` is appended: every partition for BROADCAST."""
    if shard == BROADCAST:
        return tuple(range(partitions))
    return (partition_for_shard(shard, partitions),)
