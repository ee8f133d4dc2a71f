"""The Kueue-named series from a known log: values fixed by the event times, not the clock.

Kueue records ``kueue_admitted_workloads_total`` and ``kueue_admission_wait_time_seconds``
in ``metrics.AdmittedWorkload`` with the wait from ``workload.QueuedWaitTime`` (creation, or
the last ``Requeued`` transition, to admission), and ``kueue_evicted_workloads_total`` in
``metrics.ReportEvictedWorkloads`` with the eviction's reason, and
``kueue_preempted_workloads_total`` in ``metrics.ReportPreemption`` (called from the
preemptor's ``Preemptor.IssuePreemptions``) per preempting ClusterQueue and reason
(``pkg/metrics/metrics.go``).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from kueuestream.admission.events import Action
from kueuestream.agents.metrics.kueue_series import KueueSeries, wait_buckets
from kueuestream.agents.sources.watch_events import listing_events
from tests.cluster.test_cluster_pipeline import QUEUES, Run, _workload
from tests.helpers import NS, cohort_manifest, cpu_queue, cpu_workload, flavor_manifest, local_queue_manifest
from tests.pipeline.test_pipeline_admission_checks import CHECK, checked, ready

CREATED_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, the creationTimestamp of the test's Workloads


def series_of(run: Run) -> tuple[KueueSeries, CollectorRegistry]:
    registry = CollectorRegistry()
    series = KueueSeries(registry)
    states = run.pipeline.admission.states
    engines = [states[p].shards[s].engine for p in sorted(states) for s in sorted(states[p].shards)]
    series.update(engines, run.decisions)
    return series, registry


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, {"replica_role": "standalone", **labels})


def test_wait_buckets_are_kueues() -> None:
    """``generateExponentialBuckets(16)``: 1, then 15 buckets from 2.5 doubling."""
    assert wait_buckets(16) == [
        1.0,
        2.5,
        5.0,
        10.0,
        20.0,
        40.0,
        80.0,
        160.0,
        320.0,
        640.0,
        1280.0,
        2560.0,
        5120.0,
        10240.0,
        20480.0,
        40960.0,
    ]


def test_admissions_evictions_and_waits_from_the_log() -> None:
    """A 1-cpu queue: low is admitted 10 s after its creation; high, listed 30 s later, preempts it;
    low is evicted with reason ``Preempted`` and high admitted once low has stopped."""
    run = Run(cluster=False)
    run.time = CREATED_MS + 10_000
    events, problems = listing_events([*QUEUES, _workload("low", 0)], run.time)
    assert problems == []
    run.pipeline.submit(events)
    run.pipeline.pump()
    assert run.last("low").action is Action.ADMITTED
    run.time = CREATED_MS + 40_000
    run.pipeline.submit(listing_events([_workload("high", 10)], run.time)[0])
    run.pipeline.pump()
    assert run.last("high").action is Action.ADMITTED
    actions = [(d.ref.name, d.action) for d in run.decisions if d.ref.kind == "Workload"]
    assert ("low", Action.EVICTED) in actions

    _, registry = series_of(run)
    labels = {"cluster_queue": "cq", "priority_class": ""}
    assert sample(registry, "kueue_admitted_workloads_total", **labels) == 2
    assert sample(registry, "kueue_admission_wait_time_seconds_count", **labels) == 2
    # low waited 10 s; high, created at the same instant, 40 s.
    assert sample(registry, "kueue_admission_wait_time_seconds_sum", **labels) == 50
    assert sample(registry, "kueue_admission_wait_time_seconds_bucket", le="10.0", **labels) == 1
    assert sample(registry, "kueue_admission_wait_time_seconds_bucket", le="40.0", **labels) == 2
    evicted = {"cluster_queue": "cq", "reason": "Preempted", "underlying_cause": "", "priority_class": ""}
    assert sample(registry, "kueue_evicted_workloads_total", **evicted) == 1
    preempted = {"preempting_cluster_queue": "cq", "reason": "InClusterQueue"}
    assert sample(registry, "kueue_preempted_workloads_total", **preempted) == 1
    quota = {"cohort": "", "cluster_queue": "cq", "flavor": "default", "resource": "cpu"}
    assert sample(registry, "kueue_cluster_queue_nominal_quota", **quota) == 1
    assert sample(registry, "kueue_cluster_queue_resource_usage", **quota) == 1
    assert sample(registry, "kueue_pending_workloads", cluster_queue="cq", status="active") == 0
    assert sample(registry, "kueue_pending_workloads", cluster_queue="cq", status="inadmissible") == 1


def test_a_reclamation_counts_against_the_preempting_cluster_queue() -> None:
    """Cohort a holds a1 and a2 (6 cpus each): big borrows 4 of a2's cpus in a1, then a2's own
    Workload reclaims them. The preemption is counted once, for a2, as ``InCohortReclamation``."""
    run = Run(cluster=False)
    queues = [
        flavor_manifest("default"),
        cohort_manifest("a"),
        cpu_queue("a1", 6, "a"),
        cpu_queue("a2", 6, "a"),
        local_queue_manifest("lq-a1", "a1", NS),
        local_queue_manifest("lq-a2", "a2", NS),
    ]
    run.list([*queues, cpu_workload("big", "lq-a1", 10)])
    assert run.last("big").action is Action.ADMITTED
    run.time += 5_000
    run.list([cpu_workload("mine", "lq-a2", 6)])
    assert Action.EVICTED in [d.action for d in run.decisions if d.ref.name == "big"]
    assert run.last("mine").action is Action.ADMITTED

    _, registry = series_of(run)
    for cq, reason, count in [
        ("a2", "InCohortReclamation", 1),
        ("a1", "InCohortReclamation", None),
        ("a2", "InClusterQueue", None),
    ]:
        labels = {"preempting_cluster_queue": cq, "reason": reason}
        assert sample(registry, "kueue_preempted_workloads_total", **labels) == count, labels
    evicted = {"cluster_queue": "a1", "reason": "Preempted", "underlying_cause": "", "priority_class": ""}
    assert sample(registry, "kueue_evicted_workloads_total", **evicted) == 1


def test_the_series_are_the_same_on_every_replay() -> None:
    """Deterministic: two runs of one log give the same samples, whatever the wall clock."""

    def samples() -> list[tuple[str, tuple[tuple[str, str], ...], float]]:
        run = Run(cluster=False)
        run.time = CREATED_MS + 5_000
        run.list([*QUEUES, _workload("low", 0), _workload("high", 10)])
        _, registry = series_of(run)
        return sorted(
            (s.name, tuple(sorted(s.labels.items())), s.value)
            for family in registry.collect()
            for s in family.samples
            if not s.name.endswith("_created")
        )

    assert samples() == samples()


def test_a_reservation_waiting_for_its_admission_check_is_counted_once_then_admitted() -> None:
    """``quota_reserved_workloads_total`` counts the reservation when it is made
    (``metrics.QuotaReservedWorkload`` in the scheduler), ``admitted_workloads_total`` only once
    the check is Ready and the Workload admitted (``SyncAdmittedCondition``)."""
    run = Run(cluster=False)
    run.time = CREATED_MS + 3_000
    queues = [CHECK, QUEUES[0], checked(QUEUES[1]), QUEUES[2]]
    events, problems = listing_events([*queues, _workload("w", 0)], run.time)
    assert problems == []
    run.pipeline.submit(events)
    run.pipeline.pump()
    assert run.last("w").action is Action.QUOTA_RESERVED
    _, registry = series_of(run)
    labels = {"cluster_queue": "cq", "priority_class": ""}
    assert sample(registry, "kueue_quota_reserved_workloads_total", **labels) == 1
    assert sample(registry, "kueue_quota_reserved_wait_time_seconds_sum", **labels) == 3
    assert sample(registry, "kueue_admitted_workloads_total", **labels) is None

    run.time = CREATED_MS + 7_000  # the check turns Ready at +8 s: modify moves time on by 1 s
    run.modify(ready(_workload("w", 0), "2026-01-01T00:00:08Z"))
    assert run.last("w").action is Action.ADMITTED
    _, registry = series_of(run)
    assert sample(registry, "kueue_quota_reserved_workloads_total", **labels) == 1
    assert sample(registry, "kueue_admitted_workloads_total", **labels) == 1
    assert sample(registry, "kueue_admission_wait_time_seconds_sum", **labels) == 8
