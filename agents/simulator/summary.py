"""What a simulation measures, in the shape of Kueue's performance recorder.

Per ClusterQueue the integral of cpu in use over time (mCPU x ms) from its
creation to its last change; per workload the time from creation to its
(last) admission and to its finish, and how often it was evicted. Class
summaries and the usage percentage are computed the way Kueue's checker does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

# Virtual time zero, so summaries carry real-looking timestamps as Kueue's do.
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def stamp(time_ms: int) -> str:
    return (EPOCH + timedelta(milliseconds=time_ms)).isoformat().replace("+00:00", "Z")


@dataclass(slots=True)
class QueueState:
    class_name: str
    nominal_mcpu: int
    first_ms: int
    last_ms: int
    usage_mcpu: int = 0
    used: int = 0  # mCPU x ms
    max_usage: int = 0
    # (time, usage) after every change, for the usage plot.
    timeline: list[tuple[int, int]] = field(default_factory=list)

    def change(self, time_ms: int, delta: int) -> None:
        self.used += self.usage_mcpu * (time_ms - self.last_ms)
        self.last_ms = time_ms
        self.usage_mcpu += delta
        self.max_usage = max(self.max_usage, self.usage_mcpu)
        self.timeline.append((time_ms, self.usage_mcpu))

    def touch(self, time_ms: int) -> None:
        self.used += self.usage_mcpu * (time_ms - self.last_ms)
        self.last_ms = time_ms


@dataclass(slots=True)
class WorkloadState:
    class_name: str
    cluster_queue: str
    request_mcpu: int
    created_ms: int
    admitted: bool = False
    time_to_admit_ms: int = 0
    time_to_finish_ms: int = 0
    finished: bool = False
    evictions: int = 0


class ClusterQueueClassSummary(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    cpu_used: int = Field(alias="cpuUsed")
    cpu_average_usage: int = Field(alias="cpuAverageUsage")
    nominal_quota: int = Field(alias="nominalQuota")
    first_event_time: str = Field(alias="firstEventTime")
    last_event_time: str = Field(alias="lastEventTime")
    # Not in Kueue's file: kept aside so its strict checker can read ours.
    usage_percent: float = Field(default=0.0, exclude=True)


class WorkloadClassSummary(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    count: int
    total_evictions: int = Field(alias="totalEvictions")
    average_time_to_admission_ms: int = Field(alias="averageTimeToAdmissionMs")
    average_time_to_finish_ms: int = Field(alias="averageTimeToFinishMs")


class Summary(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    cluster_queue_classes: dict[str, ClusterQueueClassSummary] = Field(alias="clusterQueueClasses")
    workload_classes: dict[str, WorkloadClassSummary] = Field(alias="workloadClasses")

    def to_yaml(self) -> str:
        data = self.model_dump(by_alias=True)
        return yaml.safe_dump(data, sort_keys=True)


class Recorder:
    def __init__(self) -> None:
        self.queues: dict[str, QueueState] = {}
        self.workloads: dict[tuple[str, str], WorkloadState] = {}
        self.admission_times: dict[str, list[int]] = {}
        self.open = 0  # created and not finished

    def add_queue(self, name: str, class_name: str, nominal_mcpu: int, time_ms: int) -> None:
        self.queues[name] = QueueState(class_name, nominal_mcpu, time_ms, time_ms)

    def created(
        self, key: tuple[str, str], class_name: str, cq: str, request_mcpu: int, time_ms: int
    ) -> None:
        self.workloads[key] = WorkloadState(class_name, cq, request_mcpu, time_ms)
        self.open += 1
        self.queues[cq].touch(time_ms)

    def admitted(self, key: tuple[str, str], time_ms: int) -> None:
        wl = self.workloads[key]
        if wl.admitted:
            return
        wl.admitted = True
        # Kueue's recorder keeps the latest admission, so a requeued workload counts its whole wait.
        wl.time_to_admit_ms = time_ms - wl.created_ms
        self.queues[wl.cluster_queue].change(time_ms, wl.request_mcpu)

    def evicted(self, key: tuple[str, str]) -> None:
        self.workloads[key].evictions += 1

    def released(self, key: tuple[str, str], time_ms: int) -> None:
        wl = self.workloads[key]
        if not wl.admitted:
            return
        wl.admitted = False
        self.queues[wl.cluster_queue].change(time_ms, -wl.request_mcpu)

    def finished(self, key: tuple[str, str], time_ms: int) -> None:
        wl = self.workloads[key]
        self.released(key, time_ms)
        if not wl.finished:
            self.open -= 1
        wl.finished = True
        wl.time_to_finish_ms = time_ms - wl.created_ms
        self.admission_times.setdefault(wl.class_name, []).append(wl.time_to_admit_ms)

    def summary(self) -> Summary:
        cq_groups: dict[str, list[QueueState]] = {}
        for name in sorted(self.queues):
            q = self.queues[name]
            cq_groups.setdefault(q.class_name, []).append(q)
        cq_classes: dict[str, ClusterQueueClassSummary] = {}
        for cls, group in sorted(cq_groups.items()):
            used = sum(q.used for q in group)
            nominal = sum(q.nominal_mcpu for q in group)
            first = min(q.first_ms for q in group)
            last = max(q.last_ms for q in group)
            span = last - first
            cq_classes[cls] = ClusterQueueClassSummary(
                cpu_used=used,
                cpu_average_usage=used // span if span > 0 else 0,
                nominal_quota=nominal,
                first_event_time=stamp(first),
                last_event_time=stamp(last),
                usage_percent=used * 100 / (nominal * span) if nominal and span > 0 else 0.0,
            )
        wl_groups: dict[str, list[WorkloadState]] = {}
        for key in sorted(self.workloads):
            wl = self.workloads[key]
            wl_groups.setdefault(wl.class_name, []).append(wl)
        wl_classes = {
            cls: WorkloadClassSummary(
                count=len(group),
                total_evictions=sum(w.evictions for w in group),
                average_time_to_admission_ms=sum(w.time_to_admit_ms for w in group) // len(group),
                average_time_to_finish_ms=sum(w.time_to_finish_ms for w in group) // len(group),
            )
            for cls, group in sorted(wl_groups.items())
        }
        return Summary(cluster_queue_classes=cq_classes, workload_classes=wl_classes)

    def unfinished(self) -> int:
        return self.open


class RangeSpec(BaseModel):
    """Kueue's expected ranges; unknown keys are refused as upstream's checker does."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    class Cmd(BaseModel):
        model_config = ConfigDict(populate_by_name=True, extra="forbid")
        max_wall_ms: int | None = Field(default=None, alias="maxWallMs")
        mcpu: int | None = Field(default=None, alias="mCPU")
        maxrss: int | None = None

    cmd: Cmd = Field(default_factory=Cmd)
    cluster_queue_classes_min_usage: dict[str, float] = Field(
        default_factory=dict, alias="clusterQueueClassesMinUsage"
    )
    wl_classes_max_avg_time_to_admission_ms: dict[str, int] = Field(
        default_factory=dict, alias="wlClassesMaxAvgTimeToAdmissionMs"
    )

    @classmethod
    def load(cls, path: str | Path) -> RangeSpec:
        return cls.model_validate(yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {})


@dataclass(frozen=True, slots=True)
class Check:
    what: str
    ours: str
    limit: str
    ok: bool
    # Kueue's wall time is reported beside ours; it is a different machine and
    # scheduler, so it informs rather than fails.
    informational: bool = False


def check(summary: Summary, spec: RangeSpec, wall_ms: int) -> list[Check]:
    out: list[Check] = []
    for cls, cq in sorted(summary.cluster_queue_classes.items()):
        floor = spec.cluster_queue_classes_min_usage.get(cls)
        if floor is None:
            out.append(
                Check(
                    f"ClusterQueue class {cls}: usage", f"{cq.usage_percent:.1f}%", "unexpected class", False
                )
            )
            continue
        out.append(
            Check(
                f"ClusterQueue class {cls}: usage",
                f"{cq.usage_percent:.1f}%",
                f">= {floor}%",
                cq.usage_percent >= floor,
            )
        )
    for cls, wl in sorted(summary.workload_classes.items()):
        ceiling = spec.wl_classes_max_avg_time_to_admission_ms.get(cls)
        if ceiling is None:
            out.append(Check(f"workload class {cls}: avg time to admission", "-", "unexpected class", False))
            continue
        ours = wl.average_time_to_admission_ms
        out.append(
            Check(
                f"workload class {cls}: avg time to admission",
                f"{ours:,} ms",
                f"<= {ceiling:,} ms",
                ours <= ceiling,
            )
        )
    if spec.cmd.max_wall_ms is not None:
        out.append(
            Check(
                "wall time (ours vs Kueue's limit)",
                f"{wall_ms:,} ms",
                f"<= {spec.cmd.max_wall_ms:,} ms",
                wall_ms <= spec.cmd.max_wall_ms,
                informational=True,
            )
        )
    return out


def class_admission_times(recorder: Recorder) -> Mapping[str, Iterable[int]]:
    return {cls: sorted(times) for cls, times in sorted(recorder.admission_times.items())}


def summary_dict(summary: Summary) -> dict[str, Any]:
    data: dict[str, Any] = summary.model_dump(by_alias=True)
    return data
