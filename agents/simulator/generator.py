"""Kueue's scheduler-performance generator format, turned into a timeline of objects.

The format is upstream's (test/performance/scheduler): cohorts hold queue sets,
queue sets hold workload sets. Names and shapes follow the upstream generator
so summaries compare class for class: one ResourceFlavor ``rf``; ClusterQueue
``<class>-<setIdx>-<idx>-<cohort>`` with cpu nominalQuota and borrowingLimit,
its own Namespace and a LocalQueue of the same name; each workload set creates
its workloads one per ``creationIntervalMs`` (the first after one interval),
and every workload runs ``runtimeMs`` once admitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

FLAVOR = "rf"
CLASS_LABEL = "kueue.x-k8s.io/performance-scheduler-class"
RUNTIME_LABEL = "kueue.x-k8s.io/performance-scheduler-running-ms"


class _Spec(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class WorkloadTemplate(_Spec):
    class_name: str = Field(alias="className")
    runtime_ms: int = Field(alias="runtimeMs", ge=0)
    priority: int = 0
    request: str
    pod_count: int = Field(default=1, alias="podCount", ge=1)

    @field_validator("request", mode="before")
    @classmethod
    def _request_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


class WorkloadsSet(_Spec):
    count: int = Field(ge=0)
    creation_interval_ms: int = Field(alias="creationIntervalMs", ge=0)
    workloads: list[WorkloadTemplate]


class QueuesSet(_Spec):
    class_name: str = Field(alias="className")
    count: int = Field(ge=0)
    nominal_quota: str = Field(alias="nominalQuota")
    borrowing_limit: str | None = Field(default=None, alias="borrowingLimit")
    reclaim_within_cohort: str = Field(default="Never", alias="reclaimWithinCohort")
    within_cluster_queue: str = Field(default="Never", alias="withinClusterQueue")
    queueing_strategy: str = Field(default="BestEffortFIFO", alias="queueingStrategy")
    workloads_sets: list[WorkloadsSet] = Field(default_factory=list, alias="workloadsSets")

    @field_validator("nominal_quota", "borrowing_limit", mode="before")
    @classmethod
    def _quota_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


class CohortSet(_Spec):
    class_name: str = Field(alias="className")
    count: int = Field(ge=0)
    queues_sets: list[QueuesSet] = Field(alias="queuesSets")


class GeneratorConfig(_Spec):
    # Upstream's TAS and DRA sections are accepted and ignored: this simulator
    # models quota, not topology.
    model_config = ConfigDict(populate_by_name=True, extra="ignore")
    cohorts: list[CohortSet] = Field(min_length=1)


class GeneratorError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class PlannedWorkload:
    """A workload the scenario creates at ``created_ms`` (virtual, from the start)."""

    namespace: str
    name: str
    class_name: str
    cluster_queue: str
    created_ms: int
    runtime_ms: int
    manifest: dict[str, Any]


@dataclass(frozen=True, slots=True)
class QueueInfo:
    name: str
    class_name: str
    cohort: str
    nominal_mcpu: int


@dataclass(slots=True)
class Scenario:
    objects: list[dict[str, Any]]
    queues: list[QueueInfo]
    workloads: list[PlannedWorkload]


def load_generator(path: str | Path) -> GeneratorConfig:
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise GeneratorError(f"{path}: cannot read the generator file: {err}") from None
    try:
        return GeneratorConfig.model_validate(raw)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors(include_url=False)
        )
        raise GeneratorError(f"{path}: not a Kueue scheduler-performance generator: {problems}") from None


def _cluster_queue(name: str, cohort: str, qs: QueuesSet) -> dict[str, Any]:
    quota: dict[str, Any] = {"name": "cpu", "nominalQuota": qs.nominal_quota}
    if qs.borrowing_limit is not None:
        quota["borrowingLimit"] = qs.borrowing_limit
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {CLASS_LABEL: qs.class_name}},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {},
            "queueingStrategy": qs.queueing_strategy,
            "preemption": {
                "reclaimWithinCohort": qs.reclaim_within_cohort,
                "withinClusterQueue": qs.within_cluster_queue,
            },
            "resourceGroups": [
                {"coveredResources": ["cpu"], "flavors": [{"name": FLAVOR, "resources": [quota]}]}
            ],
        },
    }


def _workload(name: str, namespace: str, wlt: WorkloadTemplate) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {CLASS_LABEL: wlt.class_name, RUNTIME_LABEL: str(wlt.runtime_ms)},
        },
        "spec": {
            "queueName": namespace,
            "priority": wlt.priority,
            "podSets": [
                {
                    "name": "main",
                    "count": wlt.pod_count,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": wlt.request}}}]
                        }
                    },
                }
            ],
        },
    }


def build_scenario(config: GeneratorConfig) -> Scenario:
    from kueuestream.admission.quantity import parse_quantity, resource_value

    objects: list[dict[str, Any]] = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}
    ]
    queues: list[QueueInfo] = []
    workloads: list[PlannedWorkload] = []
    for cohort_set in config.cohorts:
        for ci in range(cohort_set.count):
            cohort = f"{cohort_set.class_name}-{ci}"
            for qsi, qs in enumerate(cohort_set.queues_sets):
                nominal = resource_value("cpu", parse_quantity(qs.nominal_quota))
                for qi in range(qs.count):
                    name = f"{qs.class_name}-{qsi}-{qi}-{cohort}"
                    objects.append(_cluster_queue(name, cohort, qs))
                    objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
                    objects.append(
                        {
                            "apiVersion": "kueue.x-k8s.io/v1beta2",
                            "kind": "LocalQueue",
                            "metadata": {"name": name, "namespace": name},
                            "spec": {"clusterQueue": name},
                        }
                    )
                    queues.append(QueueInfo(name, qs.class_name, cohort, nominal))
                    for wsi, ws in enumerate(qs.workloads_sets):
                        step = 0
                        for si in range(ws.count):
                            for i, wlt in enumerate(ws.workloads):
                                step += 1
                                wl_name = f"{wlt.class_name}-{wsi}-{si}-{i}"
                                workloads.append(
                                    PlannedWorkload(
                                        namespace=name,
                                        name=wl_name,
                                        class_name=wlt.class_name,
                                        cluster_queue=name,
                                        created_ms=step * ws.creation_interval_ms,
                                        runtime_ms=wlt.runtime_ms,
                                        manifest=_workload(wl_name, name, wlt),
                                    )
                                )
    workloads.sort(key=lambda w: (w.created_ms, w.namespace, w.name))
    return Scenario(objects, queues, workloads)
