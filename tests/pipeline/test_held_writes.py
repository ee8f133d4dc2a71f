"""Held Table writes (``agents/faust_worker/held_writes.py``): the last value of each key, sent
to the changelog partition of the input that made it, and only for inputs the worker holds.

Real Faust Tables of an app that is never started: their stores and changelog topic names
need no broker.
"""

from __future__ import annotations

from typing import Any

import faust
import orjson

from kueuestream.agents.faust_worker.held_writes import ChangelogRecord, HeldTable, HeldWrites

USAGE = ("kueue.admission", 4)
OTHER = ("kueue.admission", 1)
WATCH = ("kueue.watch", 0)


def tables() -> dict[str, Any]:
    app = faust.App("held", broker="kafka://127.0.0.1:9", store="memory://")
    schema = faust.Schema(key_serializer="json", value_serializer="json")
    return {
        "usage": app.Table("usage", partitions=6, schema=schema),
        "objects": app.Table("objects", partitions=1, schema=schema),
    }


def decoded(records: list[ChangelogRecord]) -> list[tuple[str, int, str, Any]]:
    return [
        (r.topic, r.partition, orjson.loads(r.key), None if r.value is None else orjson.loads(r.value))
        for r in records
    ]


def test_only_the_last_value_of_each_key_is_sent_to_the_inputs_partition() -> None:
    t = tables()
    held = HeldWrites(t)
    held.set(USAGE, "usage", "cq/a", {"cpu": "1"})
    held.set(USAGE, "usage", "cq/b", {"cpu": "5"})
    held.set(USAGE, "usage", "cq/a", {"cpu": "3"})
    held.delete(USAGE, "usage", "cq/b")
    # Read before the flush, a key has the value it will have once written.
    assert held.get(USAGE, "usage", "cq/a") == {"cpu": "3"}
    assert held.get(USAGE, "usage", "cq/b") is None
    assert decoded(held.take(lambda _: True)) == [
        ("held-usage-changelog", 4, "cq/a", {"cpu": "3"}),
        ("held-usage-changelog", 4, "cq/b", None),
    ]
    # The store has them too, and nothing is held any more.
    assert t["usage"].get("cq/a") == {"cpu": "3"} and t["usage"].get("cq/b") is None
    assert held.take(lambda _: True) == []


def test_writes_of_an_input_the_worker_no_longer_holds_are_dropped() -> None:
    held = HeldWrites(tables())
    held.set(USAGE, "usage", "cq/a", {"cpu": "1"})
    held.set(OTHER, "usage", "cq/z", {"cpu": "2"})
    assert decoded(held.take(lambda source: source == OTHER)) == [
        ("held-usage-changelog", 1, "cq/z", {"cpu": "2"})
    ]
    assert held.take(lambda _: True) == []


def test_a_revocation_sends_only_the_revoked_inputs_writes() -> None:
    held = HeldWrites(tables())
    held.set(USAGE, "usage", "cq/a", {"cpu": "1"})
    held.set(OTHER, "usage", "cq/z", {"cpu": "2"})
    assert held.sources() == [OTHER, USAGE]
    assert [r.partition for r in held.take(lambda _: True, [USAGE, ("kueue.admission", 5)])] == [4]
    assert held.sources() == [OTHER]
    assert [r.partition for r in held.take(lambda _: True)] == [1]


def test_a_held_table_writes_only_while_processing_live_input() -> None:
    t = tables()
    held = HeldWrites(t)
    routing = HeldTable(held, "objects", WATCH)
    routing["ClusterQueue//a"] = {"kind": "ClusterQueue"}  # rebuilding from the log
    HeldTable.live = True
    try:
        routing["ClusterQueue//b"] = {"kind": "ClusterQueue"}
        del routing["ClusterQueue//a"]
    finally:
        HeldTable.live = False
    assert dict(routing) == {"ClusterQueue//b": {"kind": "ClusterQueue"}}
    assert decoded(held.take(lambda _: True)) == [
        ("held-objects-changelog", 0, "ClusterQueue//b", {"kind": "ClusterQueue"}),
        ("held-objects-changelog", 0, "ClusterQueue//a", None),
    ]
