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
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
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


def what_if(admission: Sequence[Sequence[Record]], config_path: str, out: TextIO) -> int:
    config, overrides = load_changes(config_path)
    before = simulate(admission, None, None)
    after = simulate(admission, config, overrides)
    records = sum(len(r) for r in admission)
    print(f"what-if: {config_path} against {records} recorded admission records", file=out)
    report(before, after, out)
    return 0
