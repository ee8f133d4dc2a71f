"""`kueuestream simulate`: Kueue's scheduler benchmark scenarios in virtual time.

A discrete-event loop stands in for the cluster: it publishes the scenario's
objects and workloads as watch events at their virtual times, and finishes
each admitted workload ``runtimeMs`` after its admission. Decisions come from
the real pipeline; nothing sleeps, so an hour of cluster time takes as long
as the admission logic needs.
"""

from __future__ import annotations

import heapq
import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any, Protocol

from kueuestream.admission.events import Action, Decision
from kueuestream.admission.quantity import parse_quantity, resource_value
from kueuestream.agents.simulator.generator import Scenario, build_scenario, load_generator
from kueuestream.agents.simulator.summary import Recorder, Summary


class SimPipeline(Protocol):
    """The pipeline as the simulator drives it: watch events in, decisions out."""

    def submit(self, time_ms: int, manifests: Sequence[dict[str, Any]]) -> list[Decision]:
        """Apply ADDED/MODIFIED manifests that happen at ``time_ms`` as one batch."""
        ...

    def next_wakeup_ms(self) -> int | None:
        """When the pipeline wants a clock tick (parked workloads due a retry)."""
        ...

    def close(self) -> None: ...


class Kind(IntEnum):
    # At equal times finishes go first: capacity freed at t is there for work created at t.
    FINISH = 0
    CREATE = 1
    TICK = 2


@dataclass(order=True, slots=True)
class Pending:
    time_ms: int
    kind: Kind
    seq: int
    key: tuple[str, str] = field(compare=False)
    generation: int = field(compare=False, default=0)


@dataclass(slots=True)
class SimResult:
    summary: Summary
    recorder: Recorder
    wall_ms: int
    virtual_ms: int
    events: int
    decisions: int
    maxrss_kib: int
    label: str = ""


def _finished_manifest(manifest: dict[str, Any], time_ms: int) -> dict[str, Any]:
    from kueuestream.admission.timefmt import rfc3339

    out = dict(manifest)
    out["status"] = {
        "conditions": [
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "Job finished successfully",
                "lastTransitionTime": rfc3339(time_ms),
            }
        ]
    }
    return out


def run_scenario(
    scenario: Scenario,
    pipeline: SimPipeline,
    extra_objects: Sequence[dict[str, Any]] = (),
    progress: Callable[[int, int], None] | None = None,
    stop_when: Callable[[Recorder], bool] | None = None,
) -> SimResult:
    started = time.perf_counter()
    recorder = Recorder()
    for q in scenario.queues:
        recorder.add_queue(q.name, q.class_name, q.nominal_mcpu, 0)
    planned = {(w.namespace, w.name): w for w in scenario.workloads}
    requests = {
        key: resource_value(
            "cpu",
            parse_quantity(
                w.manifest["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"][
                    "requests"
                ]["cpu"]
            ),
        )
        * w.manifest["spec"]["podSets"][0]["count"]
        for key, w in planned.items()
    }
    generation: dict[tuple[str, str], int] = {}
    ticks: set[int] = set()
    heap: list[Pending] = []
    seq = 0
    for w in scenario.workloads:
        heap.append(Pending(w.created_ms, Kind.CREATE, seq, (w.namespace, w.name)))
        seq += 1
    heapq.heapify(heap)

    events = decisions_seen = 0
    total = len(scenario.workloads)
    decisions = pipeline.submit(0, [*extra_objects, *scenario.objects])
    events += len(scenario.objects) + len(extra_objects)
    now = 0
    # It ends with its last workload: clock ticks keep it going only while some still wait.
    live = len(heap)
    while heap and (live > 0 or recorder.open > 0):
        now = heap[0].time_ms
        batch: list[dict[str, Any]] = []
        finishing: list[tuple[str, str]] = []
        while heap and heap[0].time_ms == now:
            item = heapq.heappop(heap)
            if item.kind == Kind.TICK:
                continue
            live -= 1
            w = planned[item.key]
            if item.kind == Kind.CREATE:
                recorder.created(item.key, w.class_name, w.cluster_queue, requests[item.key], now)
                batch.append(w.manifest)
            elif generation.get(item.key) == item.generation:
                finishing.append(item.key)
                batch.append(_finished_manifest(w.manifest, now))
        decisions = pipeline.submit(now, batch)
        events += len(batch)
        decisions_seen += len(decisions)
        for key in finishing:
            recorder.finished(key, now)
            generation[key] = generation.get(key, 0) + 1
        for d in decisions:
            key = (d.ref.namespace, d.ref.name)
            if key not in planned:
                continue
            if d.action == Action.ADMITTED:
                recorder.admitted(key, now)
                generation[key] = generation.get(key, 0) + 1
                heapq.heappush(
                    heap,
                    Pending(now + planned[key].runtime_ms, Kind.FINISH, seq, key, generation[key]),
                )
                seq += 1
                live += 1
            elif d.action == Action.EVICTED:
                recorder.evicted(key)
            elif d.action in (Action.PENDING, Action.REQUEUED) and recorder.workloads[key].admitted:
                # The eviction completed: the quota is free and the run starts over.
                recorder.released(key, now)
                generation[key] = generation.get(key, 0) + 1
        wakeup = pipeline.next_wakeup_ms()
        if wakeup is not None and wakeup not in ticks:
            ticks.add(wakeup)
            heapq.heappush(heap, Pending(max(wakeup, now), Kind.TICK, seq, ("", "")))
            seq += 1
        if progress is not None:
            progress(total - recorder.unfinished(), total)
        if stop_when is not None and stop_when(recorder):
            break
    pipeline.close()
    wall_ms = int((time.perf_counter() - started) * 1000)
    return SimResult(
        summary=recorder.summary(),
        recorder=recorder,
        wall_ms=wall_ms,
        virtual_ms=now,
        events=events,
        decisions=decisions_seen,
        maxrss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    )


def scenario_from(path: str | Path) -> Scenario:
    return build_scenario(load_generator(path))


class ProgressBar:
    """Finished workloads out of all, on stderr; quiet when stderr is not a terminal."""

    def __init__(self, label: str, enabled: bool | None = None) -> None:
        from tqdm import tqdm

        self._bar = tqdm(
            total=0,
            desc=label,
            unit="wl",
            file=sys.stderr,
            disable=not sys.stderr.isatty() if enabled is None else not enabled,
            mininterval=0.5,
        )

    def __call__(self, done: int, total: int) -> None:
        if self._bar.total != total:
            self._bar.total = total
        self._bar.n = done
        self._bar.refresh() if done == total else self._bar.update(0)

    def close(self) -> None:
        self._bar.close()
