"""Checkpoints of the admission state: so a worker that takes a partition over need not read it from 0.

Every ``snapshot_every`` records a worker writes the
:class:`~kueuestream.agents.admission_shards.PartitionState` of an admission
partition (every shard's engine, the handovers in flight, the origins seen) to
partition p of the compacted topic ``kueue.snapshots``, with what it covers:

- ``offset``: the records of ``kueue.admission`` partition p before it;
- ``decisions``: how many decisions those records produced (a pure function of
  them), so the decision writer knows which decisions it produces again;
- ``writer``: a point ``(end, committed)`` of the decisions partition, taken
  right after one of the writer's transactions committed: ``committed``
  decisions lie before offset ``end``. Counting those already committed then
  reads the decisions partition from ``end``, not from 0;
- ``ends``: the end offsets of every ``kueue.admission`` partition when it was
  taken. Records appended on behalf of later input lie after them, so the
  check for missing records reads from there.

A snapshot is written only once every record and decision its records
produced is delivered and committed, so taking up at ``offset`` loses nothing.

Ingest's routing tables are snapshotted the same way, every ``snapshot_every``
watch events, to the partition after the last admission partition, with the
watch offset and the ``kueue.admission`` end offsets they cover; being JSON
values already, they are written as JSON.

Encoding. An admission state is a pickle (protocol 5), compressed with zlib, cut into
chunks of :data:`CHUNK_BYTES` (Kafka's default limit for one message is 1 MB),
followed by a manifest (JSON) naming the offsets of its chunks, their SHA-256,
the format and a fingerprint of the code that wrote it. Unpickling runs code
named in the data, so the topic must be writable by the workers only, like
``kueue.admission``. A snapshot written by other code (another fingerprint) is
not used, because the classes it names may mean something else now. Two slots
of chunk keys alternate, so compaction never removes the chunks of the newest
manifest while the next one is being written. Whatever cannot be read back
exactly (a damaged chunk, a missing one, another format) is reported with a
warning, and the partition is read from offset 0 as if there were no snapshot.
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from kueuestream.agents.admission_shards import PartitionState
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams.kafka_log import KafkaLog
from kueuestream.streams.log import Record
from kueuestream.streams.topics import validate_topic_name

log = logging.getLogger(__name__)

FORMAT = 1
SNAPSHOTS = "kueue.snapshots"
CHUNK_BYTES = 512 * 1024
MANIFEST_KEY = b"manifest"
# How far back from the end the newest manifest is looked for first (a snapshot of
# 50 MB is 100 chunks); the window doubles until one is found.
_LOOKBACK = 256
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "min.cleanable.dirty.ratio": "0.1",
    "segment.bytes": str(16 * 1024 * 1024),
    "segment.ms": str(3600 * 1000),
}


def snapshot_topic(names: TopicNames) -> str:
    return validate_topic_name(f"{names.prefix}{SNAPSHOTS}")


def _code_fingerprint() -> str:
    """The SHA-256 of the sources whose classes and tables a snapshot holds (the admission core, the
    shard state, ingest's routing)."""
    root = Path(__file__).resolve().parents[2]
    files = sorted((root / "admission").rglob("*.py"))
    files += [root / "agents" / name for name in ("admission_shards.py", "log_entries.py", "ingest.py")]
    files += [root / "agents" / "ingest_routing.py"]
    files += [root / "streams" / "schemas.py", Path(__file__).resolve()]
    digest = hashlib.sha256()
    for path in files:
        if path.is_file():
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


CODE = _code_fingerprint()


class SnapshotError(Exception):
    """A snapshot that cannot be used: why, for the warning."""


@dataclass(frozen=True, slots=True)
class WriterMark:
    """``committed`` decisions of the partition lie before offset ``end`` of the decisions topic."""

    end: int
    committed: int


@dataclass(frozen=True, slots=True)
class Coverage:
    """What a snapshot of admission partition ``partition`` covers (see the module docstring)."""

    partition: int
    offset: int
    decisions: int
    writer: WriterMark
    ends: dict[int, int]
    last: str = ""  # see record_digest


@dataclass(frozen=True, slots=True)
class Snapshot:
    covers: Coverage
    state: PartitionState
    size: int  # bytes, compressed


@dataclass(frozen=True, slots=True)
class RoutingSnapshot:
    """Ingest's routing tables after the watch events before ``offset``; ``ends`` as above."""

    offset: int
    ends: dict[int, int]
    tables: dict[str, dict[str, Any]]
    size: int
    last: str = ""  # see record_digest


def record_digest(value: bytes | None) -> str:
    """The SHA-256 of the last input record a snapshot covers ("" for none): a snapshot is taken
    up only if the log still holds that record there, so a log recreated under the same name
    (an import into new topics) never meets the snapshots of the old one."""
    return "" if value is None else hashlib.sha256(value).hexdigest()


def encode_state(state: PartitionState) -> bytes:
    return zlib.compress(pickle.dumps(state, protocol=5), 1)


def decode_state(blob: bytes, partition: int) -> PartitionState:
    try:
        state = pickle.loads(zlib.decompress(blob))
    except Exception as exc:  # anything a damaged pickle raises
        raise SnapshotError(f"the state does not decode: {type(exc).__name__}: {exc}") from None
    if not isinstance(state, PartitionState) or state.partition != partition:
        raise SnapshotError(f"the state is not that of admission partition {partition}")
    return state


def encode_tables(tables: dict[str, dict[str, Any]]) -> bytes:
    """The routing tables as JSON (their values are JSON already: Faust Tables mirror them)."""
    # Not sorted: the order of a table's keys is the order the router iterates them in.
    return zlib.compress(json.dumps(tables, separators=(",", ":")).encode(), 1)


def decode_tables(blob: bytes, names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    try:
        tables = json.loads(zlib.decompress(blob))
    except (zlib.error, ValueError) as exc:
        raise SnapshotError(f"the routing tables do not decode: {exc}") from None
    if not (isinstance(tables, dict) and sorted(tables) == sorted(names)):
        raise SnapshotError(f"the routing tables are not {', '.join(names)}")
    if not all(isinstance(t, dict) for t in tables.values()):
        raise SnapshotError("a routing table is not an object")
    return tables


def _count(doc: dict[str, Any], key: str) -> int:
    value = doc.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise SnapshotError(f"the manifest's {key} is {value!r}, not a count")
    return value


def _ends(doc: dict[str, Any]) -> dict[int, int]:
    ends = doc.get("ends")
    if not (
        isinstance(ends, dict)
        and all(isinstance(e, int) and isinstance(p, str) and p.isdigit() for p, e in ends.items())
    ):
        raise SnapshotError(f"the manifest's end offsets are {ends!r}")
    return {int(p): e for p, e in ends.items()}


def _digest(doc: dict[str, Any]) -> str:
    last = doc.get("last")
    if not isinstance(last, str):
        raise SnapshotError(f"the manifest's last record digest is {last!r}")
    return last


def _ends_json(ends: dict[int, int]) -> dict[str, int]:
    return {str(p): e for p, e in sorted(ends.items())}


class SnapshotStore:
    """Partition p of ``kueue.snapshots`` holds the snapshots of admission partition p; the one
    after the last admission partition holds ingest's."""

    def __init__(
        self, kafka: KafkaLog, producer: AIOKafkaProducer, names: TopicNames, partitions: int
    ) -> None:
        self.kafka = kafka
        self.producer = producer
        self.topic = snapshot_topic(names)
        self.partitions = partitions
        self.routing = partitions  # the partition of ingest's snapshots
        # The chunk slot of the newest manifest known per partition; the next snapshot uses the other.
        self.slots: dict[int, int] = {}
        self._ensured = False

    async def ensure(self) -> None:
        if not self._ensured:
            await self.kafka.ensure_topic(self.topic, self.partitions + 1)
            self._ensured = True

    # --- admission partitions ---------------------------------------------------------

    async def write(self, covers: Coverage, blob: bytes) -> None:
        """Write ``blob`` (an encoded :class:`PartitionState`) as the snapshot ``covers`` describes."""
        fields = {
            "offset": covers.offset,
            "decisions": covers.decisions,
            "writer": [covers.writer.end, covers.writer.committed],
            "ends": _ends_json(covers.ends),
            "last": covers.last,
        }
        await self._write(covers.partition, fields, blob)

    async def latest(self, partition: int) -> Snapshot | None:
        """The newest usable snapshot of admission ``partition``; None (with a warning if one is
        unusable)."""
        found = await self._latest(partition, f"admission partition {partition}")
        if found is None:
            return None
        doc, blob = found
        try:
            writer = doc.get("writer")
            if not (
                isinstance(writer, list) and len(writer) == 2 and all(isinstance(w, int) for w in writer)
            ):
                raise SnapshotError(f"the manifest's writer point is {writer!r}")
            covers = Coverage(
                partition=partition,
                offset=_count(doc, "offset"),
                decisions=_count(doc, "decisions"),
                writer=WriterMark(end=writer[0], committed=writer[1]),
                ends=_ends(doc),
                last=_digest(doc),
            )
            return Snapshot(covers, decode_state(blob, partition), len(blob))
        except SnapshotError as exc:
            self._unusable(partition, f"admission partition {partition}", exc)
            return None

    # --- ingest's routing tables ------------------------------------------------------

    async def write_routing(self, offset: int, ends: dict[int, int], last: str, blob: bytes) -> None:
        """Write ``blob`` (from :func:`encode_tables`): the routing after the watch events before
        ``offset``."""
        await self._write(self.routing, {"offset": offset, "ends": _ends_json(ends), "last": last}, blob)

    async def latest_routing(self, names: tuple[str, ...]) -> RoutingSnapshot | None:
        found = await self._latest(self.routing, "ingest routing")
        if found is None:
            return None
        doc, blob = found
        try:
            tables = decode_tables(blob, names)
            return RoutingSnapshot(_count(doc, "offset"), _ends(doc), tables, len(blob), _digest(doc))
        except SnapshotError as exc:
            self._unusable(self.routing, "ingest routing", exc)
            return None

    # --- chunks and manifests ---------------------------------------------------------

    async def _write(self, p: int, fields: dict[str, Any], blob: bytes) -> None:
        """Append the chunks of ``blob``, then the manifest that names them."""
        await self.ensure()
        slot = 1 - self.slots.get(p, 1)
        pieces = [blob[i : i + CHUNK_BYTES] for i in range(0, len(blob), CHUNK_BYTES)] or [b""]
        pending = [
            await self.producer.send(self.topic, value=piece, key=f"chunk/{slot}/{i}".encode(), partition=p)
            for i, piece in enumerate(pieces)
        ]
        chunks = [(await sent).offset for sent in pending]
        body = {
            **fields,
            "format": FORMAT,
            "code": CODE,
            "partition": p,
            "slot": slot,
            "chunks": chunks,
            "size": len(blob),
            "sha256": hashlib.sha256(blob).hexdigest(),
        }
        await self.producer.send_and_wait(
            self.topic, value=json.dumps(body, sort_keys=True).encode(), key=MANIFEST_KEY, partition=p
        )
        self.slots[p] = slot

    def _unusable(self, partition: int, what: str, exc: SnapshotError) -> None:
        log.warning(
            "%s: the snapshot in %s[%d] is not usable (%s); reading the log from offset 0",
            what,
            self.topic,
            partition,
            exc,
        )

    async def _latest(self, partition: int, what: str) -> tuple[dict[str, Any], bytes] | None:
        """The newest manifest of ``partition`` and the bytes it names, checked; None if there is none
        or it is unusable (with a warning)."""
        await self.ensure()
        end = (await self.kafka.end_offsets(self.topic))[partition]
        if end == 0:
            return None
        try:
            found = await self._newest_manifest(partition, end)
            if found is None:
                return None
            record, doc = found
            blob = await self._chunks(partition, record, doc)
        except SnapshotError as exc:
            self._unusable(partition, what, exc)
            return None
        self.slots[partition] = int(doc["slot"]) if doc.get("slot") in (0, 1) else 0
        return doc, blob

    async def _newest_manifest(self, partition: int, end: int) -> tuple[Record, dict[str, Any]] | None:
        lookback = _LOOKBACK
        while True:
            start = max(0, end - lookback)
            newest: Record | None = None
            async for record in self.kafka.read(self.topic, partition, start, until=end):
                if record.key == MANIFEST_KEY:
                    newest = record
            if newest is not None:
                try:
                    doc = json.loads(newest.value)
                except ValueError as exc:
                    raise SnapshotError(
                        f"the manifest at offset {newest.offset} is not JSON: {exc}"
                    ) from None
                if not isinstance(doc, dict):
                    raise SnapshotError(f"the manifest at offset {newest.offset} is not an object")
                return newest, doc
            if start == 0:
                return None
            lookback *= 2

    async def _chunks(self, partition: int, record: Record, doc: dict[str, Any]) -> bytes:
        if doc.get("format") != FORMAT:
            raise SnapshotError(f"format {doc.get('format')!r}, this worker reads format {FORMAT}")
        if doc.get("code") != CODE:
            raise SnapshotError("written by another version of the code")
        if doc.get("partition") != partition:
            raise SnapshotError(f"the manifest is that of partition {doc.get('partition')!r}")
        chunks = doc.get("chunks")
        if not isinstance(chunks, list) or not chunks or not all(isinstance(c, int) for c in chunks):
            raise SnapshotError(f"the manifest's chunks are {chunks!r}")
        wanted = {offset: i for i, offset in enumerate(chunks)}
        pieces: dict[int, bytes] = {}
        async for chunk in self.kafka.read(self.topic, partition, min(chunks), until=record.offset):
            if chunk.offset in wanted:
                pieces[wanted[chunk.offset]] = chunk.value
        if len(pieces) != len(chunks):
            raise SnapshotError(f"{len(chunks) - len(pieces)} of its {len(chunks)} chunks are gone")
        blob = b"".join(pieces[i] for i in range(len(chunks)))
        if hashlib.sha256(blob).hexdigest() != doc.get("sha256") or len(blob) != doc.get("size"):
            raise SnapshotError("its chunks do not add up to what the manifest says (SHA-256 or size)")
        return blob
