"""Maximum execution times kept exactly: random arrivals, preemptions, finishes and time passing.

An auditor reads only the decisions, as a user reading the Workloads' statuses
would, and checks after every one what upstream Kueue's
``reconcileMaxExecutionTime`` and ``SyncAdmittedCondition`` promise:

1. never early: a Workload is deactivated for its maximum execution time only
   once the time since its ``Admitted`` condition (to the second) plus its
   ``accumulatedPastExecutionTimeSeconds`` has reached the limit;
2. never late: after each event, no Workload still runs past that moment;
3. the sum is kept: when ``Admitted`` turns False, the status adds the whole
   seconds of that admission to what it showed before (cleared once the time
   ran out);
4. once deactivated, a Workload is never admitted again (nothing reactivates
   it here);
5. and nothing is ever over quota.

The job controller stops an evicted Workload's job at once, as the embedded
runtime does.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action, Decision, Event, EventType, ObjectRef
from kueuestream.admission.timefmt import parse_rfc3339
from tests.helpers import T0, cluster_queue_manifest, flavor_manifest, local_queue_manifest, workload_manifest
from tests.pipeline.checks import usage_of

OUT_OF_TIME = "DeactivatedDueToMaximumExecutionTimeExceeded"
QUOTA = {"cq0": 3, "cq1": 2}
PREEMPTION = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}


def cluster() -> list[dict[str, object]]:
    docs: list[dict[str, object]] = [flavor_manifest("default")]
    for name, cpu in QUOTA.items():
        groups = [(["cpu"], [("default", {"cpu": cpu})])]
        docs.append(cluster_queue_manifest(name, groups, cohort="pool", preemption=PREEMPTION))
        docs.append(local_queue_manifest(f"{name}-lq", name))
    return docs


@dataclass
class Seen:
    """What the last decision about a Workload showed."""

    limit: int | None
    admitted_ms: int | None = None  # the Admitted condition's time while True, to the second
    accumulated: int = 0
    running: bool = False
    out_of_time: bool = False

    def deadline(self) -> int | None:
        if self.limit is None or not self.running or self.admitted_ms is None:
            return None
        return self.admitted_ms + (self.limit - self.accumulated) * 1000


def _truncated_seconds(ms: int) -> int:
    return ms // 1000 if ms >= 0 else -(-ms // 1000)


class Auditor:
    def __init__(self) -> None:
        self.seen: dict[str, Seen] = {}

    def record(self, d: Decision, now: int) -> None:
        if d.ref.kind != "Workload" or d.action in (Action.DELETED, Action.REJECTED, Action.STATUS):
            return
        before = self.seen[d.ref.name]
        by_type = {c["type"]: c for c in d.status.get("conditions", [])}
        admitted = by_type.get("Admitted", {}).get("status") == "True"
        evicted = by_type.get("Evicted", {})
        evicted_now = evicted.get("status") == "True"
        accumulated = d.status.get("accumulatedPastExecutionTimeSeconds")
        if evicted_now and evicted.get("reason") == OUT_OF_TIME and not before.out_of_time:
            deadline = before.deadline()
            assert deadline is not None, f"{d.ref.name} ran out of time while not running"
            assert now >= deadline, f"{d.ref.name} deactivated {deadline - now} ms early"
            assert accumulated is None, "the accumulated time is cleared when the time runs out"
            before.out_of_time = True
        assert not (admitted and before.out_of_time and not evicted_now), f"{d.ref.name} readmitted"
        if before.admitted_ms is not None and not admitted:
            start = 0 if before.out_of_time else before.accumulated
            expected = start + _truncated_seconds(now - before.admitted_ms)
            assert accumulated == expected, (d.ref.name, accumulated, expected)
        if admitted:
            since = parse_rfc3339(by_type["Admitted"]["lastTransitionTime"])
            assert since is not None
            before.admitted_ms = since // 1000 * 1000
        else:
            before.admitted_ms = None
        before.accumulated = accumulated or 0
        before.running = admitted and not evicted_now

    def check_running(self, now: int) -> None:
        for name, seen in sorted(self.seen.items()):
            deadline = seen.deadline()
            assert deadline is None or now < deadline, f"{name} still runs {now - deadline} ms past its time"


def over_quota(decisions: dict[str, Decision]) -> str:
    per_cq: dict[str, int] = {}
    for d in decisions.values():
        cq, usage = usage_of(d.status)
        if cq:
            per_cq[cq] = per_cq.get(cq, 0) + sum(usage.values())
    total = sum(per_cq.values())
    return f"{per_cq} over the pool's {sum(QUOTA.values())} cpu" if total > sum(QUOTA.values()) * 1000 else ""


arrival = st.tuples(
    st.integers(0, 1),  # queue
    st.integers(1, 2),  # cpu
    st.integers(0, 2),  # priority
    st.one_of(st.none(), st.integers(1, 6)),  # maximumExecutionTimeSeconds
)
steps = st.one_of(
    st.tuples(st.just("arrive"), st.lists(arrival, min_size=1, max_size=3)),
    st.tuples(st.just("pass"), st.integers(0, 4_000)),
    st.tuples(st.just("pass"), st.integers(0, 1_500)),
    st.tuples(st.just("finish"), st.integers(0, 100)),
    st.tuples(st.just("wake")),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=st.lists(steps, min_size=1, max_size=40), start_ms=st.integers(0, 999))
def test_maximum_execution_times_are_kept_exactly(world: list[tuple[object, ...]], start_ms: int) -> None:
    engine = Engine()
    auditor = Auditor()
    last: dict[str, Decision] = {}
    time_ms = T0 + start_ms

    def apply(ev: Event) -> None:
        decisions = engine.apply(ev)
        while decisions:
            evicted = []
            for d in decisions:
                auditor.record(d, ev.time_ms)
                last[d.ref.name] = d
                if d.action == Action.EVICTED:
                    evicted.append(d.ref)
            decisions = []
            for n, ref in enumerate(evicted):
                stop = Event(EventType.STOPPED, ev.time_ms, ref=ref, batch=n < len(evicted) - 1)
                for d in engine.apply(stop):
                    decisions.append(d)
        problem = over_quota(last)
        assert not problem, problem

    setup = cluster()
    for i, doc in enumerate(setup):
        apply(Event(EventType.UPSERT, time_ms, manifest=doc, batch=i < len(setup) - 1))
    arrivals = 0
    for step in world:
        kind = step[0]
        if kind == "arrive":
            burst: list[tuple[int, int, int, int | None]] = step[1]  # type: ignore[assignment]
            for n, (q, cpu, priority, limit) in enumerate(burst):
                arrivals += 1
                name = f"w{arrivals}"
                doc = workload_manifest(name, f"cq{q}-lq", {"cpu": str(cpu)}, priority=priority)
                if limit is not None:
                    doc["spec"]["maximumExecutionTimeSeconds"] = limit
                auditor.seen[name] = Seen(limit)
                apply(Event(EventType.UPSERT, time_ms, manifest=doc, batch=n < len(burst) - 1))
        elif kind == "pass":
            time_ms += int(step[1])  # type: ignore[call-overload]
            apply(Event(EventType.TICK, time_ms))
        elif kind == "finish":
            running = sorted(name for name, seen in auditor.seen.items() if seen.running)
            if running:
                done = running[int(step[1]) % len(running)]  # type: ignore[call-overload]
                apply(Event(EventType.FINISHED, time_ms, ref=ObjectRef("Workload", "default", done)))
                auditor.seen[done].running = False
                auditor.seen[done].admitted_ms = None
        else:
            wakeup = engine.next_wakeup_ms()
            time_ms = max(time_ms, wakeup or time_ms)
            apply(Event(EventType.TICK, time_ms))
        auditor.check_running(time_ms)
    out_of_time = sum(seen.out_of_time for seen in auditor.seen.values())
    event(f"ran out of time: {min(out_of_time, 3)}{'+' if out_of_time >= 3 else ''}")
