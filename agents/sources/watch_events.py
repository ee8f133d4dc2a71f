"""Turning manifests into watch events, the way a Kubernetes watch would send them.

A listing (a folder, an ``admit`` run, a ``publish``) becomes one batch between
``WatchBatch`` markers, in an order that lets each object find what it refers
to: cluster-wide objects first, then Cohorts (parents first), ClusterQueues,
LocalQueues, and the Workloads and Jobs last. The engine does not depend on
this order inside a batch; the router does less work with it, since nothing
waits in the unrouted shard.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kueuestream.admission.decode import is_relevant
from kueuestream.agents.log_entries import BATCH_BEGIN, BATCH_END, batch_marker
from kueuestream.streams.schemas import WatchEvent, WatchEventType

DEFAULT_CLUSTER = "local"
# Kueue reads its Configuration from a file without metadata; it still needs a name here.
UNNAMED_CONFIGURATION = "configuration"

_RANK = {
    kind: rank
    for rank, kind in enumerate(
        [
            "Namespace",
            "Configuration",
            "ConfigMap",
            "PriorityClass",
            "RuntimeClass",
            "LimitRange",
            "WorkloadPriorityClass",
            "ResourceFlavor",
            "AdmissionCheck",
            "DeviceClass",
            "ResourceSlice",
            "ResourceClaimTemplate",
            "ResourceClaim",
            "Cohort",
            "ClusterQueue",
            "LocalQueue",
            "Job",
            "Workload",
        ]
    )
}

ObjId = tuple[str, str, str]  # kind, namespace, name


@dataclass(frozen=True, slots=True)
class Identified:
    id: ObjId
    api_version: str
    manifest: dict[str, Any]


def identify(manifest: Any) -> Identified | str:
    """The object's identity, or why a watch event cannot carry it."""
    if not isinstance(manifest, dict):
        return f"a manifest must be a mapping, got {type(manifest).__name__}"
    kind = manifest.get("kind")
    api_version = manifest.get("apiVersion")
    meta = manifest.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name")
    namespace = meta.get("namespace") or ""
    if not isinstance(kind, str) or not kind:
        return "kind: required field is missing"
    if not isinstance(api_version, str) or not api_version:
        return f"{kind}: apiVersion: required field is missing"
    if kind == "Configuration" and not name:
        name = UNNAMED_CONFIGURATION
    if not isinstance(name, str) or not name:
        return f"{kind}: metadata.name: required field is missing"
    if not isinstance(namespace, str):
        return f"{kind} {name}: metadata.namespace: expected a string, got {type(namespace).__name__}"
    return Identified((kind, namespace, name), api_version, manifest)


def listing_order(items: Iterable[Identified]) -> list[Identified]:
    items = list(items)
    parents = {
        i.id[2]: str((i.manifest.get("spec") or {}).get("parentName") or "")
        for i in items
        if i.id[0] == "Cohort" and isinstance(i.manifest.get("spec") or {}, dict)
    }

    def depth(name: str) -> int:
        seen = {name}
        d = 0
        while (parent := parents.get(name, "")) and parent not in seen:
            seen.add(parent)
            d, name = d + 1, parent
        return d

    def key(i: Identified) -> tuple[int, int, ObjId]:
        kind = i.id[0]
        return (_RANK.get(kind, len(_RANK)), depth(i.id[2]) if kind == "Cohort" else 0, i.id)

    return sorted(items, key=key)


def watch_event(
    item: Identified, type_: WatchEventType, timestamp: int, cluster: str = DEFAULT_CLUSTER
) -> WatchEvent:
    kind, namespace, name = item.id
    return WatchEvent(
        cluster=cluster,
        kind=kind,
        apiVersion=item.api_version,
        namespace=namespace,
        name=name,
        type=type_,
        object=None if type_ == WatchEventType.DELETED else item.manifest,
        timestamp=timestamp,
    )


def as_batch(
    events: Sequence[WatchEvent], timestamp: int, cluster: str = DEFAULT_CLUSTER
) -> list[WatchEvent]:
    """Events as one batch; a single event needs no markers."""
    if len(events) <= 1:
        return list(events)
    return [
        batch_marker(BATCH_BEGIN, cluster, timestamp),
        *events,
        batch_marker(BATCH_END, cluster, timestamp),
    ]


def listing_events(
    manifests: Iterable[Any], timestamp: int, cluster: str = DEFAULT_CLUSTER
) -> tuple[list[WatchEvent], list[str]]:
    """ADDED events for a listing, as one batch; and the manifests that cannot be events.

    Objects of kinds Kueuestream does not read (a Service, Kueue's Topology)
    are left out, as a watcher would not watch them.
    """
    items: list[Identified] = []
    problems: list[str] = []
    for manifest in manifests:
        if not is_relevant(manifest):
            continue
        found = identify(manifest)
        if isinstance(found, str):
            problems.append(found)
        else:
            items.append(found)
    events = [watch_event(i, WatchEventType.ADDED, timestamp, cluster) for i in listing_order(items)]
    return as_batch(events, timestamp, cluster), problems
