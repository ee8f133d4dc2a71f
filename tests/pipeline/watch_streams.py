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
from kueuestream.streams import codec
from kueuestream.streams.schemas import WatchEvent, WatchEventType
from tests.helpers import (
    NS,
    T0,
    cohort_manifest,
    cpu_queue,
    cpu_workload,
    finished_workload,
    moving_cluster,
    two_trees,
)


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


def bad_watch_values() -> list[bytes]:
    """Malformed JSON, an unknown kind, an invalid Workload, a watch event missing its object."""
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS}}
    invalid = cpu_workload("broken", "lq-solo", 1)
    invalid["spec"]["podSets"][0]["count"] = "three"
    return [
        b'{"cluster": "local", "kind": ',
        _added_as_is(service),
        _added_as_is(invalid),
        b'{"cluster":"local","kind":"Workload","apiVersion":"kueue.x-k8s.io/v1beta1","name":"x",'
        b'"type":"ADDED","timestamp":1}',
    ]


def _added_as_is(manifest: dict[str, Any]) -> bytes:
    """An ADDED watch event of ``manifest``, not checked (as ``identify`` would) on the way."""
    meta = manifest["metadata"]
    event = WatchEvent(
        cluster="local",
        kind=manifest["kind"],
        apiVersion=manifest["apiVersion"],
        namespace=meta["namespace"],
        name=meta["name"],
        type=WatchEventType.ADDED,
        object=manifest,
        timestamp=T0 + 5000,
    )
    return codec.encode(event)


def moving_stream(n: int = 90) -> Stream:
    """Workloads flowing while a2 moves to tree b, tree b moves under a, and both move back."""
    stream = Stream()
    stream.listing(moving_cluster())
    queues = ("lq-a1", "lq-a2", "lq-b1")
    for i in range(n):
        stream.event(cpu_workload(f"wl-{i:03d}", queues[i % 3], 1 + i % 3, priority=i % 4, created_s=i))
        if i >= 4:
            done = cpu_workload(f"wl-{i - 4:03d}", queues[(i - 4) % 3], 1 + (i - 4) % 3, priority=(i - 4) % 4)
            stream.event(finished_workload(done), WatchEventType.MODIFIED)
        if i == n // 3:
            stream.event(cpu_queue("a2", 6, "b", borrowing=0), WatchEventType.MODIFIED)
        if i == n // 2:
            # The whole tree b (with a2 in it now) moves under a.
            stream.event(cohort_manifest("b", parent="a"), WatchEventType.MODIFIED)
        if i == 3 * n // 4:
            stream.event(cohort_manifest("b"), WatchEventType.MODIFIED)
            stream.event(cpu_queue("a2", 6, "a", borrowing=0), WatchEventType.MODIFIED)
    return stream
