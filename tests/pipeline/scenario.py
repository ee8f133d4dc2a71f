"""Clusters and workload streams for the pipeline tests, built as manifests and watch events.

Everything is deterministic (seeded), so the same scenario can be run through
the embedded runtime and through Kafka and the decisions compared.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kueuestream.admission.timefmt import rfc3339
from kueuestream.agents.sources.watch_events import as_batch, identify, listing_order, watch_event
from kueuestream.streams.schemas import WatchEvent, WatchEventType

T0 = 1_700_000_000_000
NS = "team"


def flavor(name: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": name}}


def cohort(name: str, parent: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"parentName": parent} if parent else {}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": spec,
    }


def cluster_queue(
    name: str,
    cpu: int,
    cohort_name: str = "",
    *,
    flavors: tuple[str, ...] = ("default",),
    borrowing: int | None = None,
    preemption: dict[str, Any] | None = None,
) -> dict[str, Any]:
    resources = []
    for f in flavors:
        quota: dict[str, Any] = {"name": "cpu", "nominalQuota": cpu}
        if borrowing is not None:
            quota["borrowingLimit"] = borrowing
        resources.append({"name": f, "resources": [quota]})
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": resources}],
        "preemption": preemption or {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
    }
    if cohort_name:
        spec["cohort"] = cohort_name
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def local_queue(name: str, cq: str, namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def workload(
    name: str,
    queue: str,
    cpu: int,
    *,
    priority: int = 0,
    created_s: int = 0,
    count: int = 1,
    namespace: str = NS,
) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": rfc3339(T0 + created_s * 1000),
        },
        "spec": {
            "queueName": queue,
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]}
                    },
                }
            ],
        },
    }


def finished(manifest: dict[str, Any]) -> dict[str, Any]:
    """The Workload as the job controller reports it once its job completed."""
    status = {
        "conditions": [
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "Job finished successfully",
                "lastTransitionTime": "2024-01-01T12:00:00Z",
            }
        ]
    }
    return {**manifest, "status": status}


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


def two_trees() -> list[dict[str, Any]]:
    """Two cohort trees (a: a1 a2 under root a, b: b1 under b) plus a lone ClusterQueue."""
    return [
        flavor("default"),
        flavor("spot"),
        cohort("a"),
        cohort("b"),
        cluster_queue("a1", 6, "a", flavors=("default", "spot")),
        cluster_queue("a2", 6, "a", flavors=("default", "spot")),
        cluster_queue("b1", 8, "b"),
        cluster_queue("solo", 4),
        local_queue("lq-a1", "a1"),
        local_queue("lq-a2", "a2"),
        local_queue("lq-b1", "b1"),
        local_queue("lq-solo", "solo"),
    ]


def workload_stream(
    n: int, seed: int, queues: tuple[str, ...] = ("lq-a1", "lq-a2", "lq-b1", "lq-solo")
) -> Stream:
    """A cluster, then ``n`` workloads arriving one by one, some finishing, a few deleted."""
    rng = random.Random(seed)
    stream = Stream()
    stream.listing(two_trees())
    live: list[dict[str, Any]] = []
    for i in range(n):
        wl = workload(
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
            stream.event(finished(live.pop(rng.randrange(len(live)))), WatchEventType.MODIFIED)
        elif roll < 0.3 and live:
            stream.event(live.pop(rng.randrange(len(live))), WatchEventType.DELETED)
    return stream
