"""Watch-event streams for the pipeline tests, from the manifests of tests.helpers.

Everything is deterministic (seeded), so the same stream can be run through
the embedded runtime and through Kafka and the decisions compared.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kueuestream.agents.sources.watch_events import as_batch, identify, listing_order, watch_event
from kueuestream.streams.schemas import WatchEvent, WatchEventType
from tests.helpers import T0, cpu_workload, finished_workload, two_trees


@dataclass
class Stream:
    """Watch events in steps; the runtime is let to settle after each step."""

    steps: list[list[WatchEvent]] = field(default_factory=list)
    time_ms: int = T0

    def listing(self, manifests: Iterable[dict[str, Any]]) -> None:
        items = [i for i in (identify(m) for m in manifests) if not isinstance(i, str)]
        events = [watch_event(i, WatchEventType.ADDED, self.time_ms) for i in listing_order(items)]
        self.steps.append(as_batch(events, self.time_ms))
        self.time_ms += 1000

    def event(self, manifest: dict[str, Any], type_: WatchEventType = WatchEventType.ADDED) -> None:
        item = identify(manifest)
        assert not isinstance(item, str), item
        self.steps.append([watch_event(item, type_, self.time_ms)])
        self.time_ms += 1000

    def events(self) -> list[WatchEvent]:
        return [e for step in self.steps for e in step]


def workload_stream(
    n: int, seed: int, queues: tuple[str, ...] = ("lq-a1", "lq-a2", "lq-b1", "lq-solo")
) -> Stream:
    """:func:`tests.helpers.two_trees`, then ``n`` workloads arriving one by one, some finishing,
    a few deleted."""
    rng = random.Random(seed)
    stream = Stream()
    stream.listing(two_trees())
    live: list[dict[str, Any]] = []
    for i in range(n):
        wl = cpu_workload(
            f"wl-{i:04d}",
            rng.choice(queues),
            rng.choice((1, 2, 3, 4)),
            priority=rng.choice((0, 0, 1, 5)),
            created_s=i,
        )
        stream.event(wl)
        live.append(wl)
        roll = rng.random()
        if roll < 0.25 and live:
            stream.event(finished_workload(live.pop(rng.randrange(len(live)))), WatchEventType.MODIFIED)
        elif roll < 0.3 and live:
            stream.event(live.pop(rng.randrange(len(live))), WatchEventType.DELETED)
    return stream
