"""The embedded runtime's job controller: how it stops victims, and where it stops stopping them.

Preemptions that go round for ever end, with the loop reported, when jobs stop at once.

Kueue's scheduler (``makeClassicalIterator``; the alpha gate
``PrioritizePreemptorWorkloads`` that changes this comes with 0.20) orders a
cycle's entries by borrowing depth, priority and queue time, not by whether an
entry is waiting for the preemptions it issued.
A preempted Workload that fits again, older than its preemptor and borrowing
as deep, is admitted first in the next cycle; the preemptor no longer fits and
preempts it once more. Upstream's scheduler does exactly this on parity
scenario 352 (``python -m tests.parity.check --seeds 352 --preemption`` lists it
among the scenarios upstream does not settle); with a job controller that
stops a job at once, nothing else would ever happen, and ``admit`` would never
return.
"""

from __future__ import annotations

from typing import Any

from kueuestream.admission.events import Action
from kueuestream.agents.admission_shards import EVICTIONS_IN_A_ROW
from kueuestream.agents.embedded.memory_log import MemoryLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.embedded.runtime import admit
from kueuestream.agents.sources.watch_events import listing_events
from kueuestream.streams import codec
from kueuestream.streams.schemas import DecisionRecord
from tests.helpers import (
    NS,
    cluster_queue_manifest,
    created_at,
    flavor_manifest,
    local_queue_manifest,
    workload_manifest,
)
from tests.parity.check import admit_in_waves
from tests.parity.scenarios import WAVE, scenario

NOW_MS = 1_800_000_000_000


def _conditions(workload: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in workload["status"]["conditions"]}


def test_the_victim_of_a_preemption_loop_is_left_stopping_and_the_loop_reported() -> None:
    admitted = admit(scenario(352, preemption=True, placement=False, pod_rules=False), time_ms=NOW_MS)

    errors = [e.error for _, e in admitted.errors]
    assert errors == [
        f"Workload ns-2/wl-00: evicted {EVICTIONS_IN_A_ROW} times at the same moment, each time "
        "admitted again before the Workload that preempted it: the job controller leaves its job "
        "stopping, so it keeps its quota and stays Evicted until it is deleted"
    ]
    workloads = {(w["metadata"]["namespace"], w["metadata"]["name"]): w for w in admitted.workloads}
    victim = workloads["ns-2", "wl-00"]
    assert victim["status"]["admission"]["clusterQueue"] == "cq-1"
    assert _conditions(victim)["Evicted"] == ("True", "Preempted")
    assert _conditions(victim)["Preempted"] == ("True", "InCohortReclamation")
    preemptor = workloads["ns-2", "wl-02"]
    assert "admission" not in preemptor["status"]
    assert _conditions(preemptor)["QuotaReserved"] == ("False", "WaitingForPreemptedWorkloads")


def test_a_workload_preempted_once_still_has_its_job_stopped_and_queues_again() -> None:
    """The loop guard leaves an ordinary preemption alone: the victim queues again."""
    high = _workload("high", priority=10, created=2, cpu=4)
    high["metadata"]["annotations"] = {WAVE: "2"}  # arrives once "low" is admitted
    found, errors = admit_in_waves([*_cluster(), _workload("low", priority=0, created=1, cpu=4), high])
    assert errors == []
    workloads = {w["metadata"]["name"]: w for w in found}
    assert workloads["high"]["status"]["admission"]["clusterQueue"] == "cq"
    low = workloads["low"]
    assert "admission" not in low["status"]
    assert _conditions(low)["Requeued"] == ("True", "Preempted")
    assert _conditions(low)["QuotaReserved"][0] == "False"


def test_the_runtime_stops_a_victim_as_kueues_job_integration_does() -> None:
    """The Requeued decision of a victim whose job the runtime stopped carries
    QuotaReserved=False/PendingEvaluation with the eviction's message, Evicted still
    True: what Kueue's job integration writes (``GenericJobReconciler``, "handle
    eviction", ``UnsetQuotaReservationWithCondition``)."""
    log = MemoryLog()
    pipeline = EmbeddedPipeline(log)
    for wave in (
        [*_cluster(), _workload("low", priority=0, created=1, cpu=4)],
        [_workload("high", priority=10, created=2, cpu=4)],
    ):
        events, _ = listing_events(wave, NOW_MS)
        pipeline.submit(events)
        pipeline.pump()
    topic = pipeline.names.decisions
    decisions = [
        codec.decode(r.value, DecisionRecord)
        for p in range(pipeline.partitions)
        for r in log.read_sync(topic, p, 0)
    ]
    [requeued] = [d for d in decisions if d.ref.name == "low" and d.action == Action.REQUEUED]
    conditions = {c["type"]: c for c in requeued.status["conditions"]}
    assert (conditions["QuotaReserved"]["status"], conditions["QuotaReserved"]["reason"]) == (
        "False",
        "PendingEvaluation",
    )
    assert conditions["QuotaReserved"]["message"] == conditions["Evicted"]["message"]
    assert conditions["Evicted"]["status"] == "True"


def test_every_stop_of_a_preemption_lands_before_the_next_head_is_tried() -> None:
    """The engine pauses after a cycle that evicted, until the runtime's STOPPED records
    (all of the cycle's, then one TICK) are in, as upstream's side of ``tests/parity`` stops
    every Workload a ``Scheduler.schedule`` cycle evicted before the next cycle.

    Cohort ``c``: ``cq`` (4 cpus, withinClusterQueue LowerPriority) runs ``low`` (4);
    ``borrower`` (0 cpus, BestEffortFIFO) queues ``b-1`` (2) then ``b-2`` (1). With ``high``
    (2) the first cycle evicts ``low`` and parks ``b-1``, which finds no quota. Once ``low``
    has stopped, ``high`` (not borrowing: first in the cycle) and ``b-2`` take 3 of its 4
    cpus; ``b-1`` comes back a requeue batch later and finds 1. Tried before the stop,
    ``b-2`` would have been parked beside ``b-1``, and ``b-1``, the older, would have had
    the cpus."""
    cluster = [
        flavor_manifest("default"),
        cluster_queue_manifest(
            "cq",
            [(["cpu"], [("default", {"cpu": 4})])],
            cohort="c",
            preemption={"withinClusterQueue": "LowerPriority"},
        ),
        cluster_queue_manifest("borrower", [(["cpu"], [("default", {"cpu": 0})])], cohort="c"),
        local_queue_manifest("lq", "cq", NS),
        local_queue_manifest("bq", "borrower", NS),
    ]
    second = [
        _workload("high", priority=10, created=5, cpu=2),
        workload_manifest("b-1", "bq", {"cpu": "2"}, namespace=NS, created=created_at(2)),
        workload_manifest("b-2", "bq", {"cpu": "1"}, namespace=NS, created=created_at(3)),
    ]
    for workload in second:
        workload["metadata"]["annotations"] = {WAVE: "2"}
    found, errors = admit_in_waves([*cluster, _workload("low", priority=0, created=1, cpu=4), *second])
    assert errors == []
    admitted = sorted(w["metadata"]["name"] for w in found if "admission" in w["status"])
    assert admitted == ["b-2", "high"]
    assert _conditions({w["metadata"]["name"]: w for w in found}["b-1"])["QuotaReserved"] == (
        "False",
        "WaitingForQuota",
    )


def _cluster() -> list[dict[str, Any]]:
    """One ClusterQueue of 4 cpus preempting lower priorities, and its LocalQueue ``lq``."""
    return [
        flavor_manifest("default"),
        cluster_queue_manifest(
            "cq", [(["cpu"], [("default", {"cpu": 4})])], preemption={"withinClusterQueue": "LowerPriority"}
        ),
        local_queue_manifest("lq", "cq", NS),
    ]


def _workload(name: str, *, priority: int, created: int, cpu: int) -> dict[str, Any]:
    return workload_manifest(
        name, "lq", {"cpu": str(cpu)}, namespace=NS, priority=priority, created=created_at(created)
    )
