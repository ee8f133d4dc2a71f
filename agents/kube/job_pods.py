"""What Kueue's job integration writes into a batch/v1 Job, as pure functions.

The Workload of a Job is :func:`kueuestream.admission.job_workload.workload_for_job`.

Starting (``Job.RunWithPodSetsInfo``, ``podset.FromAssignment``,
``podset.Merge``): the node labels and tolerations of every flavor assigned to
the pod set, the ``kueue.x-k8s.io/podset`` label, and the labels, annotations,
node selector and tolerations the admission checks' ``podSetUpdates`` give the
pod set, are merged into the pod template; a node selector key that the
template already sets to another value is a conflict that can never start.
With a minimum count, parallelism becomes the admitted count.

Stopping (``Job.RestorePodSetsInfo``, ``podset.RestorePodSpec``): the
template's labels, annotations, node selector, tolerations and scheduling gates
go back to those of the Workload's pod set, keeping the labels the Job
controller manages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kueuestream.admission.job_workload import (
    MANAGED_LABELS,
    POD_SET_NAME,
    Manifest,
    annotations_of,
    as_dict,
    as_int,
    as_list,
    metadata_of,
    min_count,
    spec_of,
)

POD_SET_LABEL = "kueue.x-k8s.io/podset"
COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-completions-equal-parallelism"
STOPPING_ANNOTATION = "kueue.x-k8s.io/stopping"


class PodSetConflict(ValueError):
    """The admission cannot be merged into the Job: it could never start as admitted."""


def is_suspended(job: Manifest) -> bool:
    """Suspended, and not half-way through being stopped (``Job.IsSuspended``)."""
    return spec_of(job).get("suspend") is True and annotations_of(job).get(STOPPING_ANNOTATION) != "true"


def is_active(job: Manifest) -> bool:
    status = job.get("status")
    return isinstance(status, dict) and bool(as_int(status.get("active"), 0))


def finished(job: Manifest) -> tuple[bool, bool, str]:
    """``(finished, succeeded, message)`` from the Job's Complete or Failed condition (``Job.Finished``)."""
    status = job.get("status")
    for cond in as_list(status.get("conditions") if isinstance(status, dict) else None):
        if (
            isinstance(cond, dict)
            and cond.get("type") in ("Complete", "Failed")
            and cond.get("status") == "True"
        ):
            return True, cond.get("type") == "Complete", str(cond.get("message") or "")
    return False, True, ""


def owner_job(workload: Manifest) -> str | None:
    """The name of the Job that controls a Workload, if a Job does."""
    for ref in as_list(metadata_of(workload).get("ownerReferences")):
        if (
            isinstance(ref, dict)
            and ref.get("kind") == "Job"
            and str(ref.get("apiVersion", "")).startswith("batch/")
            and ref.get("controller") is True
        ):
            name = ref.get("name")
            return name if isinstance(name, str) else None
    return None


# --- admission into the pod template -------------------------------------------------


@dataclass(slots=True)
class PodSetInfo:
    """What one pod set's admission changes in a pod template (``podset.PodSetInfo``)."""

    count: int
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[Manifest] = field(default_factory=list)


def conditions(workload: Manifest) -> list[Manifest]:
    status = workload.get("status")
    return [
        c
        for c in as_list(status.get("conditions") if isinstance(status, dict) else None)
        if isinstance(c, dict)
    ]


def condition(workload: Manifest, type_: str) -> Manifest | None:
    return next((c for c in conditions(workload) if c.get("type") == type_), None)


def condition_true(workload: Manifest, type_: str) -> bool:
    cond = condition(workload, type_)
    return cond is not None and cond.get("status") == "True"


def admission(workload: Manifest) -> Manifest | None:
    status = workload.get("status")
    value = status.get("admission") if isinstance(status, dict) else None
    return value if isinstance(value, dict) else None


def start_info(workload: Manifest, flavors: Mapping[str, Manifest]) -> PodSetInfo:
    """The pod set ``main``'s admission: count, flavors' node labels and tolerations, podset label.

    Raises :class:`PodSetConflict` when the admission names no pod set or a
    flavor that is not known, or when two flavors disagree on a node label.
    """
    found = admission(workload)
    assignments = [
        a for a in as_list(found.get("podSetAssignments") if found else None) if isinstance(a, dict)
    ]
    if len(assignments) != 1:
        raise PodSetConflict(f"expecting 1 pod set assignment, got {len(assignments)}")
    assignment = assignments[0]
    pod_sets = [p for p in as_list(spec_of(workload).get("podSets")) if isinstance(p, dict)]
    default_count = as_int(pod_sets[0].get("count"), 1) if pod_sets else 1
    info = PodSetInfo(count=as_int(assignment.get("count"), default_count) or 0)
    seen: list[str] = []
    for flavor_name in as_dict(assignment.get("flavors")).values():
        if flavor_name in seen:
            continue
        seen.append(flavor_name)
        flavor = flavors.get(flavor_name)
        if flavor is None:
            raise PodSetConflict(f"ResourceFlavor {flavor_name} of the admission is not known")
        flavor_spec = spec_of(flavor)
        for key, value in as_dict(flavor_spec.get("nodeLabels")).items():
            if key in info.node_selector and info.node_selector[key] != value:
                raise PodSetConflict(f"flavors disagree on node label {key}")
            info.node_selector[key] = value
        info.tolerations += [t for t in as_list(flavor_spec.get("tolerations")) if isinstance(t, dict)]
    pod_set = str(assignment.get("name", POD_SET_NAME))
    info.labels[POD_SET_LABEL] = pod_set
    _add_check_updates(info, workload, pod_set)
    return info


def _add_check_updates(info: PodSetInfo, workload: Manifest, pod_set: str) -> None:
    """Merge in what the admission checks' controllers set for the pod set (``podSetUpdates``).

    Kueue's ``getPodSetsInfoFromStatus`` with ``PodSetInfo.Merge``: a label,
    annotation or node selector that another source sets to another value is a
    conflict; tolerations are added once each.
    """
    status = as_dict(workload.get("status"))
    for check in as_list(status.get("admissionChecks")):
        if not isinstance(check, dict):
            continue
        update = next(
            (
                u
                for u in as_list(check.get("podSetUpdates"))
                if isinstance(u, dict) and u.get("name") == pod_set
            ),
            None,
        )
        if update is None:
            continue
        where = f"admission check {check.get('name')}"
        for what, mine in (
            ("labels", info.labels),
            ("annotations", info.annotations),
            ("nodeSelector", info.node_selector),
        ):
            for key, value in as_dict(update.get(what)).items():
                if key in mine and mine[key] != value:
                    raise PodSetConflict(
                        f"{where}: conflict for {what}: {key}={value}, the admission has {key}={mine[key]}"
                    )
                mine[key] = str(value)
        for toleration in as_list(update.get("tolerations")):
            if isinstance(toleration, dict) and toleration not in info.tolerations:
                info.tolerations.append(toleration)


def _merged(current: dict[str, str], added: dict[str, str], what: str) -> dict[str, str]:
    for key, value in added.items():
        if key in current and current[key] != value:
            raise PodSetConflict(
                f"conflict for {what}: the pod template has {key}={current[key]}, the admission {key}={value}"
            )
    return {**current, **added}


def _map_patch(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch turning one string map into another (None for a removed key), or None if equal."""
    if before == after:
        return None
    patch: dict[str, Any] = {k: v for k, v in after.items() if before.get(k) != v}
    patch.update({k: None for k in before if k not in after})
    return patch


def _template_patch(template: Manifest, wanted: dict[str, Any]) -> Manifest:
    """Merge-patch of a pod template from its current to its ``wanted`` maps and lists."""
    meta, pod = as_dict(template.get("metadata")), as_dict(template.get("spec"))
    meta_patch: Manifest = {}
    pod_patch: Manifest = {}
    for key in ("labels", "annotations"):
        change = _map_patch(as_dict(meta.get(key)), wanted[key])
        if change is not None:
            meta_patch[key] = change
    change = _map_patch(as_dict(pod.get("nodeSelector")), wanted["nodeSelector"])
    if change is not None:
        pod_patch["nodeSelector"] = change
    for key in ("tolerations", "schedulingGates"):
        if as_list(pod.get(key)) != wanted[key]:
            pod_patch[key] = wanted[key] or None
    out: Manifest = {}
    if meta_patch:
        out["metadata"] = meta_patch
    if pod_patch:
        out["spec"] = pod_patch
    return out


def start_patch(job: Manifest, info: PodSetInfo) -> Manifest:
    """The merge patch that unsuspends a Job with its admission in the pod template."""
    spec = spec_of(job)
    template = as_dict(spec.get("template"))
    meta, pod = as_dict(template.get("metadata")), as_dict(template.get("spec"))
    tolerations = as_list(pod.get("tolerations"))
    for toleration in info.tolerations:
        if toleration not in tolerations:
            tolerations.append(toleration)
    wanted = {
        "labels": _merged(as_dict(meta.get("labels")), info.labels, "labels"),
        "annotations": _merged(as_dict(meta.get("annotations")), info.annotations, "annotations"),
        "nodeSelector": _merged(as_dict(pod.get("nodeSelector")), info.node_selector, "nodeSelector"),
        "tolerations": tolerations,
        "schedulingGates": as_list(pod.get("schedulingGates")),
    }
    spec_patch: Manifest = {"suspend": False}
    template_patch = _template_patch(template, wanted)
    if template_patch:
        spec_patch["template"] = template_patch
    if min_count(job) is not None:
        spec_patch["parallelism"] = info.count
        if annotations_of(job).get(COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION, "").lower() == "true":
            spec_patch["completions"] = info.count
    return {"spec": spec_patch}


def restore_patch(job: Manifest, workload: Manifest) -> Manifest | None:
    """The merge patch putting the pod template back as the Workload's pod set has it, or None."""
    pod_sets = [p for p in as_list(spec_of(workload).get("podSets")) if isinstance(p, dict)]
    if not pod_sets:
        return None
    original = as_dict(pod_sets[0].get("template"))
    original_meta, original_pod = as_dict(original.get("metadata")), as_dict(original.get("spec"))
    spec = spec_of(job)
    template = as_dict(spec.get("template"))
    current_labels = as_dict(as_dict(template.get("metadata")).get("labels"))
    wanted_labels = as_dict(original_meta.get("labels"))
    for key in MANAGED_LABELS:
        if key in current_labels:
            wanted_labels[key] = current_labels[key]
    wanted = {
        "labels": wanted_labels,
        "annotations": as_dict(original_meta.get("annotations")),
        "nodeSelector": as_dict(original_pod.get("nodeSelector")),
        "tolerations": as_list(original_pod.get("tolerations")),
        "schedulingGates": as_list(original_pod.get("schedulingGates")),
    }
    spec_patch: Manifest = {}
    template_patch = _template_patch(template, wanted)
    if template_patch:
        spec_patch["template"] = template_patch
    minimum = min_count(job)
    count = as_int(pod_sets[0].get("count"), None)
    if minimum is not None and count is not None and as_int(spec.get("parallelism"), None) != count:
        spec_patch["parallelism"] = count
        if annotations_of(job).get(COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION, "").lower() == "true":
            spec_patch["completions"] = count
    return {"spec": spec_patch} if spec_patch else None
