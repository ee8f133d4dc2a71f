"""Kueue's metric series, derived from the engines a process hosts and the decisions they make.

The names, label names and units are Kueue's (``pkg/metrics/metrics.go``), so
dashboards and alerts written for Kueue read them unchanged:

- gauges from the engines' state after each batch: ``kueue_pending_workloads``
  (``active`` or ``inadmissible``), ``kueue_cluster_queue_nominal_quota``,
  ``..._borrowing_limit``, ``..._lending_limit`` (+Inf when unset),
  ``..._resource_reservation`` (quota reserved) and ``..._resource_usage``
  (quota of admitted Workloads), in the resource's unit (cores for cpu);
- counters and histograms from the decisions, in log order:
  ``kueue_quota_reserved_workloads_total`` and ``kueue_admitted_workloads_total``
  (once per reservation and per admission: a Workload evicted and admitted
  again counts again), ``kueue_quota_reserved_wait_time_seconds`` and
  ``kueue_admission_wait_time_seconds`` (from the Workload's creation, or its
  last requeue, to the reservation or the admission, both event times from the
  log, as Kueue's ``QueuedWaitTime``), ``kueue_evicted_workloads_total`` and
  ``kueue_preempted_workloads_total`` (per preempting ClusterQueue, read from
  the preemptor path the ``Preempted`` condition's message carries).

``replica_role`` is ``standalone``: one process owns each shard it hosts.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action
from kueuestream.admission.state import WorkloadRecord
from kueuestream.admission.status import ADMITTED, EVICTED, PREEMPTED, QUOTA_RESERVED, REQUEUED
from kueuestream.admission.timefmt import parse_rfc3339
from kueuestream.streams.schemas import DecisionRecord

ROLE = "standalone"
CQ_LABELS = ["cohort", "cluster_queue", "flavor", "resource", "replica_role"]


def wait_buckets(count: int) -> list[float]:
    """Kueue's ``generateExponentialBuckets``: 1, then ``count - 1`` buckets from 2.5 doubling."""
    return [1.0] + [2.5 * 2**i for i in range(count - 1)]


def amount(resource: str, value: int) -> float:
    """An engine amount in the resource's unit, as Kueue's ``AsApproximateFloat64`` reports it."""
    return value / 1000 if resource == "cpu" else float(value)


def limit(resource: str, value: int | None) -> float:
    return math.inf if value is None else amount(resource, value)


def priority_class(rec: WorkloadRecord | None) -> str:
    """Kueue's ``PriorityClassName``: the class the Workload names, or ``""``."""
    if rec is None:
        return ""
    spec = rec.obj.spec
    if spec.priority_class_ref is not None:
        return spec.priority_class_ref.name
    return spec.priority_class_name


def condition_time_ms(status: Mapping[str, Any], type_: str) -> int | None:
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            when = cond.get("lastTransitionTime")
            return parse_rfc3339(when) if isinstance(when, str) else None
    return None


def condition_reason(status: Mapping[str, Any], type_: str) -> str:
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return str(cond.get("reason") or "")
    return ""


PREEMPTOR_PATH = re.compile(r"preemptor path: (/[^;]*);")


def preempted(status: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(preempting ClusterQueue, reason)`` of a true ``Preempted`` condition, else None.

    The preemptor's ClusterQueue is the last element of the preemptor path in the
    message (Kueue's ``preemptionMessage``); ``""`` where the path is unknown.
    """
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == PREEMPTED and cond.get("status") == "True":
            found = PREEMPTOR_PATH.search(str(cond.get("message") or ""))
            return (found.group(1).rsplit("/", 1)[-1] if found else ""), str(cond.get("reason") or "")
    return None


def admission_cluster_queue(status: Mapping[str, Any]) -> str:
    admission = status.get("admission")
    return str(admission.get("clusterQueue") or "") if isinstance(admission, dict) else ""


@dataclass(frozen=True, slots=True)
class GaugeSample:
    name: str
    help: str
    labels: tuple[str, ...]
    values: tuple[tuple[tuple[str, ...], float], ...]


GAUGE_HELP = {
    "kueue_pending_workloads": (
        "The number of pending workloads, per 'cluster_queue' and 'status' (active or inadmissible)",
        ["cluster_queue", "status", "replica_role"],
    ),
    "kueue_cluster_queue_nominal_quota": ("Reports the cluster_queue's resource nominal quota", CQ_LABELS),
    "kueue_cluster_queue_borrowing_limit": (
        "Reports the cluster_queue's resource borrowing limit",
        CQ_LABELS,
    ),
    "kueue_cluster_queue_lending_limit": ("Reports the cluster_queue's resource lending limit", CQ_LABELS),
    "kueue_cluster_queue_resource_reservation": (
        "Reports the cluster_queue's total resource reservation",
        CQ_LABELS,
    ),
    "kueue_cluster_queue_resource_usage": ("Reports the cluster_queue's total resource usage", CQ_LABELS),
}


def engine_gauges(engines: Iterable[Engine]) -> dict[str, dict[tuple[str, ...], float]]:
    """Every gauge's samples for the ClusterQueues of ``engines`` (each ClusterQueue once)."""
    out: dict[str, dict[tuple[str, ...], float]] = {name: {} for name in GAUGE_HELP}
    seen: set[str] = set()
    for engine in engines:
        admitted_usage: dict[tuple[str, str, str], int] = {}
        for rec in engine.workloads.values():
            if rec.conditions.is_true(ADMITTED) and rec.cluster_queue:
                for (flv, res), value in rec.usage.items():
                    key = (rec.cluster_queue, flv, res)
                    admitted_usage[key] = admitted_usage.get(key, 0) + value
        for name in sorted(engine.cqs):
            if name in seen:
                continue
            seen.add(name)
            node = engine.cqs[name].node
            cohort = node.parent.name if node.parent is not None else ""
            for (flv, res), quota in sorted(node.quotas.items()):
                labels = (cohort, name, flv, res, ROLE)
                out["kueue_cluster_queue_nominal_quota"][labels] = amount(res, quota.nominal)
                out["kueue_cluster_queue_borrowing_limit"][labels] = limit(res, quota.borrowing_limit)
                out["kueue_cluster_queue_lending_limit"][labels] = limit(res, quota.lending_limit)
                out["kueue_cluster_queue_resource_reservation"][labels] = amount(
                    res, node.usage.get((flv, res), 0)
                )
                out["kueue_cluster_queue_resource_usage"][labels] = amount(
                    res, admitted_usage.get((name, flv, res), 0)
                )
            queue = engine.queues.queues.get(name)
            active = inadmissible = 0
            if queue is not None:
                for gkey in queue.group_of.values():
                    group = queue.groups.get(gkey)
                    if group is not None and group.parked:
                        inadmissible += 1
                    else:
                        active += 1
            out["kueue_pending_workloads"][(name, "active", ROLE)] = active
            out["kueue_pending_workloads"][(name, "inadmissible", ROLE)] = inadmissible
    return out


class KueueSeries(Collector):
    """The Kueue-named series of one process, in a registry of its own.

    :meth:`update` is called by the thread that runs the engines, after each
    batch; scrapes read the last complete state from any thread.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.reserved = Counter(
            "kueue_quota_reserved_workloads",
            "The total number of quota reserved workloads per 'cluster_queue'",
            ["cluster_queue", "priority_class", "replica_role"],
            registry=registry,
        )
        self.reserved_wait_time = Histogram(
            "kueue_quota_reserved_wait_time_seconds",
            "The time between a workload was created or requeued until it got quota reservation, "
            "per 'cluster_queue'",
            ["cluster_queue", "priority_class", "replica_role"],
            buckets=wait_buckets(14),
            registry=registry,
        )
        self.admitted = Counter(
            "kueue_admitted_workloads",
            "The total number of admitted workloads per 'cluster_queue'",
            ["cluster_queue", "priority_class", "replica_role"],
            registry=registry,
        )
        self.wait_time = Histogram(
            "kueue_admission_wait_time_seconds",
            "The time between a workload was created or requeued until admission, per 'cluster_queue'",
            ["cluster_queue", "priority_class", "replica_role"],
            buckets=wait_buckets(16),
            registry=registry,
        )
        self.evicted = Counter(
            "kueue_evicted_workloads",
            "The number of evicted workloads per 'cluster_queue'",
            ["cluster_queue", "reason", "underlying_cause", "priority_class", "replica_role"],
            registry=registry,
        )
        self.preempted = Counter(
            "kueue_preempted_workloads",
            "The number of preempted workloads per 'preempting_cluster_queue'",
            ["preempting_cluster_queue", "reason", "replica_role"],
            registry=registry,
        )
        self._gauges: dict[str, dict[tuple[str, ...], float]] = {name: {} for name in GAUGE_HELP}
        # Workloads counted as holding a reservation (QUOTA_RESERVED) or admitted (ADMITTED).
        self._held: dict[tuple[str, str], Action] = {}
        self._lock = threading.Lock()
        registry.register(self)

    def update(self, engines: Iterable[Engine], decisions: Iterable[DecisionRecord]) -> None:
        """Count ``decisions`` (in the order made) and take the engines' gauges."""
        engines = list(engines)
        self.count(engines, decisions)
        self.refresh(engines)

    def count(self, engines: Iterable[Engine], decisions: Iterable[DecisionRecord]) -> None:
        """Count ``decisions``, made by ``engines``, in the order made."""
        engines = list(engines)
        for decision in decisions:
            if decision.ref.kind == "Workload":
                self._count(engines, decision)

    def refresh(self, engines: Iterable[Engine]) -> None:
        """Take the gauges of ``engines``, replacing all earlier ones."""
        gauges = engine_gauges(engines)
        with self._lock:
            self._gauges = gauges

    def _count(self, engines: list[Engine], decision: DecisionRecord) -> None:
        key = (decision.ref.namespace, decision.ref.name)
        rec = next((e.workloads[key] for e in engines if key in e.workloads), None)
        status = decision.status
        pclass = priority_class(rec)
        held = self._held.get(key)
        action = decision.action
        if action in (Action.QUOTA_RESERVED, Action.ADMITTED):
            cq = admission_cluster_queue(status)
            queued_ms = condition_time_ms(status, REQUEUED)
            if queued_ms is None and rec is not None:
                queued_ms = rec.created_ms
            if held is None:
                self.reserved.labels(cq, pclass, ROLE).inc()
                self._observe(
                    self.reserved_wait_time, cq, pclass, queued_ms, condition_time_ms(status, QUOTA_RESERVED)
                )
            if action is Action.ADMITTED and held is not Action.ADMITTED:
                self.admitted.labels(cq, pclass, ROLE).inc()
                self._observe(self.wait_time, cq, pclass, queued_ms, condition_time_ms(status, ADMITTED))
            if held is not Action.ADMITTED:
                self._held[key] = action
            return
        if action is not Action.STATUS:
            self._held.pop(key, None)
        if action is Action.EVICTED:
            cq = admission_cluster_queue(status) or (rec.cluster_queue if rec is not None else "")
            self.evicted.labels(cq, condition_reason(status, EVICTED), "", pclass, ROLE).inc()
            preemption = preempted(status)
            if preemption is not None:
                self.preempted.labels(*preemption, ROLE).inc()

    @staticmethod
    def _observe(histogram: Histogram, cq: str, pclass: str, since_ms: int | None, at_ms: int | None) -> None:
        if since_ms is not None and at_ms is not None:
            histogram.labels(cq, pclass, ROLE).observe(max(0, at_ms - since_ms) / 1000)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            gauges = self._gauges
        for name, (help_text, label_names) in GAUGE_HELP.items():
            family = GaugeMetricFamily(name, help_text, labels=label_names)
            for labels, value in sorted(gauges[name].items()):
                family.add_metric(list(labels), value)
            yield family
