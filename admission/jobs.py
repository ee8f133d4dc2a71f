"""Kueue's job integration for batch/v1 Job: the Workload a queued Job becomes."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from kueuestream.admission.api.base import ObjectMeta
from kueuestream.admission.api.batch import Job
from kueuestream.admission.api.kueue import PodSet, PriorityClassRef, Workload, WorkloadSpec

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
WORKLOAD_PRIORITY_CLASS_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
# The fewest pods the Job may start with: partial admission (Kueue's JobMinParallelismAnnotation).
MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
# How long the Job's Workload may stay admitted (Kueue's MaxExecTimeSecondsLabel).
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
# The largest value of a Kubernetes API int32 field.
INT32_MAX = 2**31 - 1
# What Go's strconv.Atoi accepts.
_DECIMAL = re.compile(r"[+-]?[0-9]+")
JOB_GROUP = "batch"
HASH_LENGTH = 5
# Kueue's limit on a Workload name (ShortWorkloadNames, alpha and off, would make it 63).
MAX_NAME = 253
MAX_PREFIX = MAX_NAME - 1 - HASH_LENGTH


def workload_name(
    kind: str, owner: str, uid: str, group: str = JOB_GROUP, generation: int | None = None
) -> str:
    """``<kind>-<owner>-<hash>``, the name Kueue gives the Workload of an owner.

    Kueue's ``GetWorkloadNameForOwnerWithGVK``, or with ``generation``
    ``GetWorkloadNameForOwnerWithGVKAndGeneration`` (the name MultiKueue and
    workload slices give each generation of an owner). The prefix, the kind in
    lower case and the owner's name, is cut to fit the 253-character name
    limit; the 5-character hash, over the owner's kind, group, name and UID
    (and generation when given), tells apart owners whose names share that
    prefix and owners of other kinds with the same name.
    """
    parts = [kind, group, owner, uid]
    if generation is not None:
        parts.append(str(generation))
    digest = hashlib.sha1("\n".join(parts).encode()).hexdigest()[:HASH_LENGTH]
    prefix = f"{kind.lower()}-{owner}"[:MAX_PREFIX]
    return f"{prefix}-{digest}"


def is_queued(job: Job) -> bool:
    return bool(job.metadata.labels.get(QUEUE_NAME_LABEL))


def pods_count(job: Job) -> int:
    """``min(parallelism, completions)``, parallelism defaulting to 1 (Kueue's ``podsCount``)."""
    count = job.spec.parallelism if job.spec.parallelism is not None else 1
    if job.spec.completions is not None:
        count = min(count, job.spec.completions)
    return count


def atoi(raw: object) -> int | None:
    """``raw`` as Go's ``strconv.Atoi`` reads it (a decimal 64-bit integer), or None."""
    if not isinstance(raw, str) or not _DECIMAL.fullmatch(raw):
        return None
    value = int(raw)
    return value if -(2**63) <= value < 2**63 else None


def min_parallelism_of(annotations: Mapping[str, object]) -> int | None:
    """The job-min-parallelism annotation as a number; None when absent or, as for Kueue's
    ``minPodsCount``, not a decimal integer."""
    return atoi(annotations.get(MIN_PARALLELISM_ANNOTATION))


def min_parallelism(job: Job) -> int | None:
    return min_parallelism_of(job.metadata.annotations)


def max_exec_time_of(labels: Mapping[str, object]) -> int | None:
    """The max-exec-time-seconds label as seconds; None when absent or, as for Kueue's
    ``MaximumExecutionTimeSecondsForObject``, not a positive 32-bit integer."""
    value = atoi(labels.get(MAX_EXEC_TIME_LABEL))
    return value if value is not None and 0 < value <= INT32_MAX else None


def workload_for_job(job: Job) -> Workload:
    meta = job.metadata
    labels = {JOB_UID_LABEL: meta.uid} if meta.uid else {}
    count = pods_count(job)
    wpc = meta.labels.get(PRIORITY_CLASS_LABEL, "")
    ref = PriorityClassRef(name=wpc, kind="WorkloadPriorityClass") if wpc else None
    spec = WorkloadSpec(
        pod_sets=[
            PodSet(name="main", count=count, min_count=min_parallelism(job), template=job.spec.template)
        ],
        queue_name=meta.labels.get(QUEUE_NAME_LABEL, ""),
        priority_class_ref=ref,
        priority_class_source=WORKLOAD_PRIORITY_CLASS_SOURCE if wpc else "",
        priority_class_name=wpc,
        maximum_execution_time_seconds=max_exec_time_of(meta.labels),
    )
    return Workload(
        api_version="kueue.x-k8s.io/v1beta1",
        kind="Workload",
        metadata=ObjectMeta(
            name=workload_name("Job", meta.name, meta.uid),
            namespace=meta.namespace,
            labels=labels,
            creation_timestamp=meta.creation_timestamp,
            uid=meta.uid,
        ),
        spec=spec,
    )
