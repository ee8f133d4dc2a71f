"""``kueuestream replay LOG --config FILE``: what would have happened with another configuration.

FILE holds a Configuration and/or objects to use instead of the recorded ones
(ResourceFlavors with other ``resourceWeights``, ClusterQueues with other
quotas, ...). The recorded inputs are run twice through the same simulation,
once as recorded and once with FILE's objects, and the two outcomes compared.

Only the inputs are taken from the log: what the runtime appended itself (the
job controller's STOPPED events, handovers) is dropped and produced again by
the simulation, because another configuration evicts other Workloads. Those
records are applied right after the record that caused them, as the embedded
runtime does; both runs use the same rule, so the differences come from FILE.

Every name in FILE the log never saw is warned about on stderr (an object to
change that is not there, a flavor, cohort, ClusterQueue, LocalQueue or
DeviceClass nothing in the log names), since the what-if silently leaves out
what it cannot find: a typo would otherwise read as "no difference".
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from kueuestream.admission.api.config import Configuration
from kueuestream.admission.decode import decode
from kueuestream.admission.events import Action
from kueuestream.admission.quantity import resource_quantity
from kueuestream.agents.admission import AdmissionHandler
from kueuestream.agents.admission_shards import ObjKey
from kueuestream.agents.log_entries import decode_entry, encode_entry
from kueuestream.agents.sources.manifests import load_paths
from kueuestream.streams.codec import DecodeError, normalize_manifest
from kueuestream.streams.log import Record
from kueuestream.streams.topics import partition_for_shard


class WhatIfError(ValueError):
    pass


def load_changes(path: str) -> tuple[Configuration | None, dict[ObjKey, dict[str, Any]]]:
    loaded = load_paths([path])
    problems = list(loaded.errors)
    config: Configuration | None = None
    overrides: dict[ObjKey, dict[str, Any]] = {}
    for doc in loaded.docs:
        decoded = decode(doc.manifest)
        problems += [f"{doc.where}: {decoded.label}: {e}" for e in decoded.errors]
        if decoded.errors or decoded.obj is None:
            continue
        if isinstance(decoded.obj, Configuration):
            config = decoded.obj
        else:
            overrides[(decoded.kind, decoded.namespace, decoded.name)] = normalize_manifest(doc.manifest)
    if problems:
        raise WhatIfError("; ".join(problems))
    if config is None and not overrides:
        raise WhatIfError(f"{path}: no Configuration and no object to change")
    return config, overrides


@dataclass(slots=True)
class WorkloadOutcome:
    first_admitted_ms: int | None = None
    cluster_queue: str = ""
    flavors: str = ""
    admissions: int = 0
    evictions: int = 0
    finished: bool = False


@dataclass(slots=True)
class Outcome:
    workloads: dict[str, WorkloadOutcome] = field(default_factory=dict)
    # ClusterQueue -> "resource/flavor" -> amount at the end of the log
    usage: dict[str, dict[str, str]] = field(default_factory=dict)


def simulate(
    admission: Sequence[Sequence[Record]],
    config: Configuration | None,
    overrides: dict[ObjKey, dict[str, Any]] | None,
) -> Outcome:
    partitions = len(admission)
    handler = AdmissionHandler(
        partitions=partitions, admission_topic="kueue.admission", config=config, overrides=overrides
    )
    queues: list[deque[bytes]] = []
    for records in admission:
        queue: deque[bytes] = deque()
        for record in records:
            try:
                if decode_entry(record.value).origin.stream.startswith("admission/"):
                    continue  # produced again by this simulation
            except DecodeError:
                pass
            queue.append(record.value)
        queues.append(queue)
    offsets = [0] * partitions
    outcome = Outcome()
    busy = True
    while busy:
        busy = False
        for p in range(partitions):
            queue = queues[p]
            while queue:
                busy = True
                emitted = handler.feed(p, offsets[p], queue.popleft())
                offsets[p] += 1
                for d in emitted.decisions:
                    engine = handler.state(p).shards[d.cause.shard].engine
                    _note(outcome, d.ref.namespace, d.ref.name, d.action, d.status, engine.now_ms)
                # Right after their cause, in every partition they go to.
                for follow in reversed(emitted.followups):
                    queues[partition_for_shard(follow.shard, partitions)].appendleft(encode_entry(follow))
    for p in sorted(handler.states):
        for shard in sorted(handler.states[p].shards):
            engine = handler.states[p].shards[shard].engine
            for name in sorted(engine.cqs):
                usage = engine.cqs[name].node.usage
                outcome.usage[name] = {
                    f"{resource}/{flavor}": resource_quantity(resource, amount)
                    for (flavor, resource), amount in sorted(
                        usage.items(), key=lambda kv: (kv[0][1], kv[0][0])
                    )
                    if amount
                }
    return outcome


def _note(
    outcome: Outcome, namespace: str, name: str, action: Action, status: dict[str, Any], now: int
) -> None:
    w = outcome.workloads.setdefault(f"{namespace}/{name}", WorkloadOutcome())
    if action == Action.ADMITTED:
        w.admissions += 1
        if w.first_admitted_ms is None:
            admission = status.get("admission") or {}
            w.first_admitted_ms = now
            w.cluster_queue = str(admission.get("clusterQueue", ""))
            w.flavors = ", ".join(
                sorted(
                    f"{r}={f}"
                    for psa in admission.get("podSetAssignments", [])
                    for r, f in (psa.get("flavors") or {}).items()
                )
            )
    elif action == Action.EVICTED:
        w.evictions += 1
    elif action == Action.FINISHED:
        w.finished = True


def _seconds(ms: int) -> str:
    return f"{ms / 1000:+.3f}s"


def report(before: Outcome, after: Outcome, out: TextIO) -> None:
    earlier, later, lost, gained, moved, evictions = [], [], [], [], [], []
    for key in sorted(set(before.workloads) | set(after.workloads)):
        b = before.workloads.get(key, WorkloadOutcome())
        a = after.workloads.get(key, WorkloadOutcome())
        if b.first_admitted_ms is not None and a.first_admitted_ms is None:
            lost.append(f"{key} (was admitted to {b.cluster_queue} on {b.flavors})")
        elif b.first_admitted_ms is None and a.first_admitted_ms is not None:
            gained.append(f"{key} (to {a.cluster_queue} on {a.flavors})")
        elif b.first_admitted_ms is not None and a.first_admitted_ms is not None:
            delta = a.first_admitted_ms - b.first_admitted_ms
            if delta < 0:
                earlier.append(f"{key} {_seconds(delta)} (on {a.flavors})")
            elif delta > 0:
                later.append(f"{key} {_seconds(delta)} (on {a.flavors})")
            if (a.cluster_queue, a.flavors) != (b.cluster_queue, b.flavors):
                moved.append(f"{key}: {b.cluster_queue} {b.flavors} -> {a.cluster_queue} {a.flavors}")
        if a.evictions != b.evictions:
            evictions.append(f"{key}: evicted {b.evictions} -> {a.evictions} times")
    sections = [
        ("Admitted earlier", earlier),
        ("Admitted later", later),
        ("No longer admitted", lost),
        ("Admitted only with the new configuration", gained),
        ("Admitted on other flavors", moved),
        ("Evicted a different number of times", evictions),
    ]
    for title, lines in sections:
        print(f"{title}: {len(lines)}", file=out)
        for line in lines:
            print(f"  {line}", file=out)
    print("ClusterQueue usage at the end of the log (recorded -> what-if):", file=out)
    changed = 0
    for cq in sorted(set(before.usage) | set(after.usage)):
        was, now = before.usage.get(cq, {}), after.usage.get(cq, {})
        for fr in sorted(set(was) | set(now)):
            if was.get(fr) != now.get(fr):
                changed += 1
                print(f"  {cq} {fr}: {was.get(fr, '0')} -> {now.get(fr, '0')}", file=out)
    if not changed:
        print("  unchanged", file=out)


# Kinds the what-if adds to every shard even when the log never had them.
_ADDED_KINDS = frozenset({"ResourceFlavor", "WorkloadPriorityClass", "PriorityClass"})


@dataclass(slots=True)
class SeenNames:
    """The names the recorded inputs hold: objects, and the names those objects refer to."""

    objects: set[ObjKey] = field(default_factory=set)
    cohorts: set[str] = field(default_factory=set)
    device_classes: set[str] = field(default_factory=set)

    def add(self, kind: str, namespace: str, name: str, obj: dict[str, Any] | None) -> None:
        self.objects.add((kind, namespace, name))
        spec = _dict(obj, "spec")
        if kind == "Cohort":
            self.cohorts.add(name)
            self.cohorts.add(str(spec.get("parentName") or ""))
        elif kind == "ClusterQueue":
            self.cohorts.add(str(spec.get("cohort") or spec.get("cohortName") or ""))
        elif kind == "DeviceClass":
            self.device_classes.add(name)
        if obj is not None:
            self.device_classes.update(_device_class_names(obj))


def seen_names(admission: Sequence[Sequence[Record]]) -> SeenNames:
    seen = SeenNames()
    for records in admission:
        for record in records:
            try:
                entry = decode_entry(record.value)
            except DecodeError:
                continue
            seen.add(entry.kind, entry.namespace, entry.name, entry.object)
    seen.cohorts.discard("")
    return seen


def unseen_names(
    seen: SeenNames, config: Configuration | None, overrides: dict[ObjKey, dict[str, Any]]
) -> list[str]:
    """What the what-if input names that the log never saw, one sentence each."""
    known = SeenNames(set(seen.objects), set(seen.cohorts), set(seen.device_classes))
    for (kind, namespace, name), manifest in overrides.items():
        known.add(kind, namespace, name, manifest)
    known.cohorts.discard("")
    problems: list[str] = []
    for (kind, namespace, name), manifest in sorted(overrides.items()):
        label = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
        if (kind, namespace, name) not in seen.objects:
            problems.append(
                f"{label} is not in the log: the what-if adds it to every shard"
                if kind in _ADDED_KINDS
                else f"{label} is not in the log, so the what-if has nothing to change with it"
            )
        spec = _dict(manifest, "spec")
        if kind == "ClusterQueue":
            for group in _list(spec.get("resourceGroups")):
                for flavor in _list(_dict(group).get("flavors")):
                    ref = str(_dict(flavor).get("name") or "")
                    if ref and ("ResourceFlavor", "", ref) not in known.objects:
                        problems.append(f"{label} uses ResourceFlavor {ref}, which is not in the log")
            cohort = str(spec.get("cohort") or spec.get("cohortName") or "")
            if cohort and cohort not in seen.cohorts:
                problems.append(f"{label} joins cohort {cohort}, which nothing in the log names")
        elif kind == "Cohort":
            parent = str(spec.get("parentName") or "")
            if parent and parent not in seen.cohorts:
                problems.append(f"{label} has parent cohort {parent}, which nothing in the log names")
        elif kind == "LocalQueue":
            ref = str(spec.get("clusterQueue") or "")
            if ref and ("ClusterQueue", "", ref) not in known.objects:
                problems.append(f"{label} points to ClusterQueue {ref}, which is not in the log")
        elif kind == "Workload":
            ref = str(spec.get("queueName") or "")
            if ref and ("LocalQueue", namespace, ref) not in known.objects:
                problems.append(f"{label} is queued to LocalQueue {namespace}/{ref}, which is not in the log")
    if config is not None:
        for mapping in config.resources.device_class_mappings:
            for device_class in mapping.device_class_names:
                if device_class not in known.device_classes:
                    problems.append(
                        f"Configuration maps DeviceClass {device_class} to {mapping.name}, but no "
                        "DeviceClass, claim or template in the log names it"
                    )
    return problems


def _dict(obj: Any, key: str | None = None) -> dict[str, Any]:
    value = obj.get(key) if key is not None and isinstance(obj, dict) else obj
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _device_class_names(obj: Any) -> Iterator[str]:
    """Every ``deviceClassName`` anywhere in a manifest (claims, templates, their subrequests)."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key == "deviceClassName" and isinstance(value, str):
                yield value
            else:
                yield from _device_class_names(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from _device_class_names(item)


def what_if(admission: Sequence[Sequence[Record]], config_path: str, out: TextIO) -> int:
    config, overrides = load_changes(config_path)
    for problem in unseen_names(seen_names(admission), config, overrides):
        print(f"warning: {config_path}: {problem}", file=sys.stderr)
    before = simulate(admission, None, None)
    after = simulate(admission, config, overrides)
    records = sum(len(r) for r in admission)
    print(f"what-if: {config_path} against {records} recorded admission records", file=out)
    report(before, after, out)
    return 0
