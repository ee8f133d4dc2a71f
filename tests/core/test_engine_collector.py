"""The engine applies an event with Python's cyclic garbage collector paused, and puts it back as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action, Event, EventType
from tests.helpers import NS, T0, cpu_queue, cpu_workload, flavor_manifest, local_queue_manifest


def backlog() -> list[dict[str, Any]]:
    return [
        flavor_manifest("default"),
        cpu_queue("cq", 4),
        local_queue_manifest("lq", "cq", NS),
        *(cpu_workload(f"wl-{i:03d}", "lq", 1, created_s=i) for i in range(200)),
    ]


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The collector's automatic runs, with a threshold so low that settling would trigger many."""
    seen: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    thresholds = gc.get_threshold()
    was_enabled = gc.isenabled()
    gc.set_threshold(200, 1, 1)
    gc.callbacks.append(count)
    gc.enable()
    try:
        yield seen
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*thresholds)
        if not was_enabled:
            gc.disable()


def test_settling_a_backlog_runs_no_collection_and_leaves_the_collector_on(collections: list[int]) -> None:
    engine = Engine()
    for doc in backlog():
        engine.apply(Event(EventType.UPSERT, T0, manifest=doc, batch=True))
    tick = Event(EventType.TICK, T0)
    # Counts start from zero, so the few allocations before the pause cannot trigger a run.
    gc.collect()
    collections.clear()
    decisions = engine.apply(tick)
    # Unpaused, this settle triggers a dozen runs or more; paused, at most the one as it is turned back on.
    assert len(collections) <= 1
    assert sum(d.action == Action.ADMITTED for d in decisions) == 4
    assert gc.isenabled()
    # Between events the collector runs as usual.
    collections.clear()
    [[] for _ in range(1000)]
    assert collections


def test_a_collector_the_caller_turned_off_stays_off() -> None:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        Engine().apply(Event(EventType.TICK, T0))
        assert not gc.isenabled()
    finally:
        if was_enabled:
            gc.enable()
