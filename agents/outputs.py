"""What the agents emit: records to write, already canonically encoded.

Each agent takes one input record (its offset and raw bytes) and returns
:class:`Out` values, so the runtimes only move bytes: the embedded runtime
appends them to its file log, the Faust worker sends them to Kafka. State lives
in tables (any ``MutableMapping[str, JSON]``: a dict when embedded, a Faust
Table on Kafka) or, for admission, in engines rebuilt by reading the partition
again.

Partitions: a decision goes to the ``kueue.decisions`` partition of the
admission partition that made it (its key is still the Workload). Then the
decisions of partition p are one ordered, deterministic sequence with one
writer, which is what lets a restart (embedded) or a new owner (Kafka, see
:mod:`kueuestream.agents.faust_worker.decision_writer`) tell exactly which of
them are already written.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kueuestream.agents.ingest_routing import TABLES
from kueuestream.agents.log_entries import AdmissionEntry, Origin, encode_entry
from kueuestream.streams import codec
from kueuestream.streams.schemas import ErrorRecord, ErrorSource
from kueuestream.streams.topics import BROADCAST, error_key, partition_for_shard

Table = MutableMapping[str, Any]


class Role(StrEnum):
    ADMISSION = "admission"
    DECISIONS = "decisions"
    APPLIED = "applied"
    ERRORS = "errors"


@dataclass(frozen=True, slots=True)
class Out:
    role: Role
    partition: int
    key: bytes
    value: bytes
    origin: Origin | None = None  # set on admission records
    # The admission record ``value`` encodes, for a runtime that reads it back in the same process.
    entry: AdmissionEntry | None = None


def error_out(raw: bytes, error: str, source: ErrorSource) -> Out:
    record = ErrorRecord.from_bad_input(raw, error, source)
    return Out(Role.ERRORS, 0, error_key(str(source)), codec.encode(record))


def admission_outs(entry: AdmissionEntry, partitions: int) -> list[Out]:
    value = encode_entry(entry)
    targets = (
        range(partitions) if entry.shard == BROADCAST else (partition_for_shard(entry.shard, partitions),)
    )
    return [Out(Role.ADMISSION, p, entry.shard.encode(), value, entry.origin, entry) for p in targets]


def empty_tables() -> dict[str, Table]:
    return {name: {} for name in TABLES}
