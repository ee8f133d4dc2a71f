"""Maximum execution times on the embedded runtime's clock.

A clock running on wall time (``run``, the Kubernetes connector, the Faust
workers' clock) ticks when a workload's time runs out, as Kueue's workload
controller requeues its reconcile for then (``reconcileMaxExecutionTime``'s
retry-after). ``admit`` and ``run --once`` settle what is there now: their
clock moves only for retries, never on to the deadlines.
"""

from __future__ import annotations

from kueuestream.agents.embedded.memory_log import MemoryLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.embedded.runtime import admit
from kueuestream.agents.sources.watch_events import listing_events
from tests.helpers import NS, T0, Manifest, cpu_queue, cpu_workload, flavor_manifest, local_queue_manifest
from tests.pipeline.embedded_run import decisions


def cluster(limit: int) -> list[Manifest]:
    limited = cpu_workload("limited", "lq", 4)
    limited["spec"]["maximumExecutionTimeSeconds"] = limit
    return [
        flavor_manifest("default"),
        cpu_queue("cq", 4),
        local_queue_manifest("lq", "cq", NS),
        limited,
        cpu_workload("next", "lq", 4),
    ]


def evicted_reason(workload: Manifest) -> str | None:
    for cond in workload["status"].get("conditions", []):
        if cond["type"] == "Evicted" and cond["status"] == "True":
            return str(cond["reason"])
    return None


def test_admit_settles_without_running_workloads_out_of_time() -> None:
    out = {w["metadata"]["name"]: w for w in admit(cluster(1), time_ms=T0).workloads}
    assert evicted_reason(out["limited"]) is None
    assert out["limited"]["spec"].get("active", True) is True


def test_a_wall_clock_deactivates_at_the_deadline_and_admits_the_next() -> None:
    log = MemoryLog()
    pipeline = EmbeddedPipeline(log)
    events, _ = listing_events(cluster(30), T0)
    pipeline.submit(events)
    pipeline.pump()
    assert pipeline.next_wakeup_ms() == T0 + 30_000
    pipeline.advance_clock(T0 + 29_999)
    assert not any(d.action.value == "Evicted" for part in decisions(log) for d in part)
    pipeline.advance_clock(T0 + 31_000)
    made = [(d.ref.name, d.action.value) for part in decisions(log) for d in part]
    assert ("limited", "Evicted") in made
    # The runtime stops the job at once: its quota goes to the next workload.
    assert made.index(("limited", "Evicted")) < made.index(("next", "Admitted"))
    workloads = {w["metadata"]["name"]: w for w in pipeline.admission.workload_objects()}
    assert evicted_reason(workloads["limited"]) == "DeactivatedDueToMaximumExecutionTimeExceeded"
    assert workloads["limited"]["spec"]["active"] is False
