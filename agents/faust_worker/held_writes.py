"""Writes to the Faust Tables that mirror state for operators, held back and sent together.

A Table write sends its changelog record at once, and the mirrored state changes
with nearly every input: a ClusterQueue's usage, each Workload decided, ingest's
routing. Sent one by one, those records cost a worker about a fifth of its CPU
per event (``bench/pipeline_bench.py``, tables on and off). Here a change waits
in memory, and on each flush the last value of every key changed goes into the
Table's store and, through the worker's idempotent producer, to the changelog
partition of the input that made it (where a write in the agent goes).

Not through Faust's transactions: Faust commits a partition's transaction only
with input offsets of that partition, so writes flushed after its last input
would stay uncommitted, unseen by ``read_committed`` readers (Faust's own table
recovery among them), until another input came. The mirrors need no
transaction: they are not what any decision is made from.

What is held for an input partition is sent when it is revoked and when the
worker stops; a flush drops what is held for a partition this worker no longer
holds (its new owner writes the keys its own inputs change).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import orjson

# How often held writes are flushed: the most the mirrors lag behind the state.
FLUSH_INTERVAL = 0.5

_DELETED = object()


@dataclass(frozen=True)
class ChangelogRecord:
    topic: str
    partition: int
    key: bytes
    value: bytes | None  # None deletes the key


class HeldWrites:
    """Changes to Faust Tables, per input (topic, partition) whose processing made them."""

    def __init__(self, tables: Mapping[str, Any]) -> None:
        self.tables = tables
        # input -> table -> key -> value or _DELETED
        self._held: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}

    def get(self, source: tuple[str, int], table: str, key: str) -> Any:
        """The value ``key`` has once what is held is written (None when it has none)."""
        value = self._held.get(source, {}).get(table, {}).get(key, self.tables[table].get(key))
        return None if value is _DELETED else value

    def set(self, source: tuple[str, int], table: str, key: str, value: Any) -> None:
        self._held.setdefault(source, {}).setdefault(table, {})[key] = value

    def delete(self, source: tuple[str, int], table: str, key: str) -> None:
        self.set(source, table, key, _DELETED)

    def sources(self) -> list[tuple[str, int]]:
        """The inputs something is held for."""
        return sorted(self._held)

    def take(
        self, holds: Callable[[tuple[str, int]], bool], only: Iterable[tuple[str, int]] | None = None
    ) -> list[ChangelogRecord]:
        """What is held for the inputs this worker ``holds`` (of ``only``, or all), applied to the
        Tables' stores, as changelog records to send; the rest of those inputs' writes dropped."""
        sources = self.sources() if only is None else sorted(set(only) & set(self._held))
        records = []
        for source in sources:
            held = self._held.pop(source)
            if not holds(source):
                continue
            partition = source[1]
            for name, writes in sorted(held.items()):
                table = self.tables[name]
                topic = table.changelog_topic.get_topic_name()
                for key, value in writes.items():
                    if value is _DELETED:
                        table.data.pop(key, None)
                        records.append(ChangelogRecord(topic, partition, orjson.dumps(key), None))
                    else:
                        table.data[key] = value
                        records.append(
                            ChangelogRecord(topic, partition, orjson.dumps(key), orjson.dumps(value))
                        )
        return records


class HeldTable(MutableMapping[str, Any]):
    """A dict the handlers read and write, mirrored through :class:`HeldWrites` while processing
    live input (rebuilding from the log writes no changelog again)."""

    live: bool = False

    def __init__(self, held: HeldWrites, name: str, source: tuple[str, int]) -> None:
        self.data: dict[str, Any] = {}
        self.held = held
        self.name = name
        self.source = source

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.data[key] = value
        if HeldTable.live:
            self.held.set(self.source, self.name, key, value)

    def __delitem__(self, key: str) -> None:
        del self.data[key]
        if HeldTable.live:
            self.held.delete(self.source, self.name, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)
