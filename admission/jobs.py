"""Kueue's job integration for batch/v1 Job: the Workload a queued Job becomes."""

from __future__ import annotations

import hashlib

from kueuestream.admission.api.base import ObjectMeta
from kueuestream.admission.api.batch import Job
from kueuestream.admission.api.kueue import PodSet, PriorityClassRef, Workload, WorkloadSpec

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
WORKLOAD_PRIORITY_CLASS_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
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


def workload_for_job(job: Job) -> Workload:
    meta = job.metadata
    labels = {JOB_UID_LABEL: meta.uid} if meta.uid else {}
    count = job.spec.parallelism if job.spec.parallelism is not None else 1
    if job.spec.completions is not None:
        count = min(count, job.spec.completions)
    wpc = meta.labels.get(PRIORITY_CLASS_LABEL, "")
    ref = PriorityClassRef(name=wpc, kind="WorkloadPriorityClass") if wpc else None
    spec = WorkloadSpec(
        pod_sets=[PodSet(name="main", count=count, template=job.spec.template)],
        queue_name=meta.labels.get(QUEUE_NAME_LABEL, ""),
        priority_class_ref=ref,
        priority_class_source=WORKLOAD_PRIORITY_CLASS_SOURCE if wpc else "",
        priority_class_name=wpc,
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
