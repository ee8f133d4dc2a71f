"""The Workload Kueue's job framework creates for a queued batch/v1 Job, as a manifest.

``jobframework.ConstructWorkload`` with ``job.PodSets``: Kueue's name
(:func:`kueuestream.admission.jobs.workload_name`), an owner reference to the
Job, the ``kueue.x-k8s.io/resource-in-use`` finalizer, the job-uid label, the
provisioning-request annotations, one pod set ``main`` of ``min(parallelism,
completions)`` pods whose template is the Job's without the labels the Job
controller manages (``job-name`` is kept) and with duplicate environment
variables dropped (the last one wins, ``jobframework.SanitizePodSets``),
``minCount`` from the ``kueue.x-k8s.io/job-min-parallelism`` annotation,
``maximumExecutionTimeSeconds`` from the ``kueue.x-k8s.io/max-exec-time-seconds``
label, and the priority class as ``priorityClassRef``. Pure functions over plain data:
the Kubernetes connector creates this Workload in a cluster, and ``admit``
prints it.
"""

from __future__ import annotations

import copy
from typing import Any

from kueuestream.admission.jobs import (
    JOB_UID_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    max_exec_time_of,
    min_parallelism_of,
    workload_name,
)

Manifest = dict[str, Any]

WORKLOAD_API_VERSION = "kueue.x-k8s.io/v1beta2"
POD_SET_NAME = "main"
PROVISIONING_ANNOTATION_PREFIX = "provreq.kueue.x-k8s.io/"
RESOURCE_IN_USE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
# Set by the Job controller on the pod template; only job-name is worth keeping in a Workload.
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
MANAGED_LABELS = ("job-name", "controller-uid", JOB_NAME_LABEL, "batch.kubernetes.io/controller-uid")


def metadata_of(obj: Manifest) -> Manifest:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def spec_of(obj: Manifest) -> Manifest:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def as_dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def as_int(value: Any, default: int | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def labels_of(obj: Manifest) -> dict[str, str]:
    return as_dict(metadata_of(obj).get("labels"))


def annotations_of(obj: Manifest) -> dict[str, str]:
    return as_dict(metadata_of(obj).get("annotations"))


def queue_name(job: Manifest) -> str:
    value = labels_of(job).get(QUEUE_NAME_LABEL, "")
    return value if isinstance(value, str) else ""


def job_workload_name(job: Manifest) -> str:
    meta = metadata_of(job)
    return workload_name("Job", str(meta.get("name", "")), str(meta.get("uid", "")))


def min_count(job: Manifest) -> int | None:
    return min_parallelism_of(annotations_of(job))


def pods_count(job: Manifest) -> int:
    spec = spec_of(job)
    count = as_int(spec.get("parallelism"), 1) or 0
    completions = as_int(spec.get("completions"), None)
    return min(count, completions) if completions is not None else count


def _sanitized_containers(containers: Any) -> list[Any]:
    out = []
    for container in as_list(containers):
        if isinstance(container, dict) and isinstance(container.get("env"), list):
            # One entry per name, where the name first appears, with its last value.
            last: dict[str, Any] = {}
            for env in container["env"]:
                last[str(env.get("name")) if isinstance(env, dict) else repr(env)] = env
            container = {**container, "env": list(last.values())}
        out.append(container)
    return out


def workload_template(job: Manifest) -> Manifest:
    template = copy.deepcopy(as_dict(spec_of(job).get("template")))
    meta = as_dict(template.get("metadata"))
    kept = {
        k: v for k, v in as_dict(meta.get("labels")).items() if k not in MANAGED_LABELS or k == JOB_NAME_LABEL
    }
    if "labels" in meta or kept:
        meta["labels"] = kept
    template["metadata"] = meta
    pod = as_dict(template.get("spec"))
    for key in ("containers", "initContainers"):
        if key in pod:
            pod[key] = _sanitized_containers(pod[key])
    template["spec"] = pod
    return template


def priority_class_ref(job: Manifest) -> Manifest | None:
    """The class behind the Workload's priority (``jobframework.ExtractPriority``)."""
    workload_class = labels_of(job).get(PRIORITY_CLASS_LABEL)
    if isinstance(workload_class, str) and workload_class:
        return {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": workload_class}
    pod_class = as_dict(as_dict(spec_of(job).get("template")).get("spec")).get("priorityClassName")
    if isinstance(pod_class, str) and pod_class:
        return {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": pod_class}
    return None


def workload_for_job(job: Manifest) -> Manifest:
    """The Workload Kueue creates for a queued Job, as a v1beta2 manifest."""
    meta = metadata_of(job)
    uid = str(meta.get("uid", ""))
    pod_set: Manifest = {"name": POD_SET_NAME, "count": pods_count(job), "template": workload_template(job)}
    minimum = min_count(job)
    if minimum is not None:
        pod_set["minCount"] = minimum
    spec: Manifest = {"queueName": queue_name(job), "podSets": [pod_set]}
    ref = priority_class_ref(job)
    if ref is not None:
        spec["priorityClassRef"] = ref
    max_exec = max_exec_time_of(labels_of(job))
    if max_exec is not None:
        spec["maximumExecutionTimeSeconds"] = max_exec
    workload_meta: Manifest = {
        "name": job_workload_name(job),
        "namespace": meta.get("namespace", ""),
        "finalizers": [RESOURCE_IN_USE_FINALIZER],
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": meta.get("name", ""),
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if uid:
        workload_meta["labels"] = {JOB_UID_LABEL: uid}
    provisioning = {
        k: v for k, v in sorted(annotations_of(job).items()) if k.startswith(PROVISIONING_ANNOTATION_PREFIX)
    }
    if provisioning:
        workload_meta["annotations"] = provisioning
    return {"apiVersion": WORKLOAD_API_VERSION, "kind": "Workload", "metadata": workload_meta, "spec": spec}
