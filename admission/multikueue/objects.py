"""Reading the few fields the dispatcher needs from raw manifests, and making the remote copies.

Manifests are read defensively: a field of the wrong type counts as absent,
so a malformed object never stops the dispatcher.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kueuestream.admission.multikueue import names
from kueuestream.admission.timefmt import parse_rfc3339

WORKLOAD_API_VERSION = "kueue.x-k8s.io/v1beta2"
JOB_API_VERSION = "batch/v1"
# Labels the manager's Job controller set that must not follow a copy into a worker
# (upstream's cleanLabels of the Job's pod template, and the Workload's job-uid label).
_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
_TEMPLATE_LABELS_DROPPED = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
)


@dataclass(frozen=True, slots=True)
class Condition:
    status: str
    reason: str
    message: str
    # lastTransitionTime in ms; 0 when missing or unreadable.
    since_ms: int


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def metadata(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return _map(_map(obj).get("metadata"))


def labels(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return _map(metadata(obj).get("labels"))


def status(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return _map(_map(obj).get("status"))


def conditions(obj: Mapping[str, Any] | None) -> dict[str, Condition]:
    """``status.conditions`` by type; the last entry of a type wins."""
    out: dict[str, Condition] = {}
    items = status(obj).get("conditions")
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, Mapping) or not _str(item.get("type")):
            continue
        out[item["type"]] = Condition(
            status=_str(item.get("status")),
            reason=_str(item.get("reason")),
            message=_str(item.get("message")),
            since_ms=parse_rfc3339(_str(item.get("lastTransitionTime"))) or 0,
        )
    return out


def is_true(conds: Mapping[str, Condition], kind: str) -> bool:
    cond = conds.get(kind)
    return cond is not None and cond.status == "True"


def check_states(obj: Mapping[str, Any] | None) -> dict[str, str]:
    """``status.admissionChecks``: check name -> state."""
    out: dict[str, str] = {}
    items = status(obj).get("admissionChecks")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, Mapping) and _str(item.get("name")):
            out[item["name"]] = _str(item.get("state"))
    return out


@dataclass(frozen=True, slots=True)
class Owner:
    api_version: str
    kind: str
    name: str

    @property
    def is_job(self) -> bool:
        return self.kind == "Job" and self.api_version == JOB_API_VERSION

    def group_version_kind(self) -> str:
        """How Kubernetes prints a GroupVersionKind (``batch/v1, Kind=Job``; core: ``/v1, Kind=Pod``)."""
        version = self.api_version if "/" in self.api_version else f"/{self.api_version}"
        return f"{version}, Kind={self.kind}"


def controller_owner(obj: Mapping[str, Any] | None) -> Owner | None:
    """The owner reference marked ``controller: true`` (Kubernetes' GetControllerOf)."""
    refs = metadata(obj).get("ownerReferences")
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, Mapping) and ref.get("controller") is True and _str(ref.get("name")):
            return Owner(_str(ref.get("apiVersion")), _str(ref.get("kind")), ref["name"])
    return None


def _meta_for_creation(obj: Mapping[str, Any], extra_labels: Mapping[str, str]) -> dict[str, Any]:
    # Upstream's CloneObjectMetaForCreation: name, namespace, labels and annotations only.
    meta = metadata(obj)
    out: dict[str, Any] = {"name": _str(meta.get("name")), "namespace": _str(meta.get("namespace"))}
    kept = {k: v for k, v in labels(obj).items() if k != _JOB_UID_LABEL}
    out["labels"] = {**kept, **extra_labels}
    annotations = _map(meta.get("annotations"))
    if annotations:
        out["annotations"] = dict(annotations)
    return out


def workload_copy(workload: Mapping[str, Any], origin: str) -> dict[str, Any]:
    """The manager Workload's copy for a worker (upstream's cloneForCreate): its spec, our origin label."""
    return {
        "apiVersion": _str(workload.get("apiVersion")) or WORKLOAD_API_VERSION,
        "kind": "Workload",
        "metadata": _meta_for_creation(workload, {names.ORIGIN_LABEL: origin}),
        "spec": copy.deepcopy(dict(_map(workload.get("spec")))),
    }


def job_copy(job: Mapping[str, Any], workload_name: str, origin: str) -> dict[str, Any]:
    """The manager Job's copy for a worker (upstream's job MultiKueue adapter).

    Suspended, labelled with the Workload copy it must use and our origin; its
    selector, ``managedBy`` and the controller's pod-template labels dropped, so
    the worker's Job controller takes it over.
    """
    spec = copy.deepcopy(dict(_map(job.get("spec"))))
    spec.pop("selector", None)
    spec.pop("managedBy", None)
    spec["suspend"] = True
    template = spec.get("template")
    if isinstance(template, dict) and isinstance(template.get("metadata"), dict):
        template_labels = template["metadata"].get("labels")
        if isinstance(template_labels, dict):
            for label in _TEMPLATE_LABELS_DROPPED:
                template_labels.pop(label, None)
    extra = {names.PREBUILT_WORKLOAD_LABEL: workload_name, names.ORIGIN_LABEL: origin}
    return {
        "apiVersion": JOB_API_VERSION,
        "kind": "Job",
        "metadata": _meta_for_creation(job, extra),
        "spec": spec,
    }


def ref(kind: str, namespace: str, name: str) -> dict[str, Any]:
    """One object of a DeleteRemote."""
    api_version = JOB_API_VERSION if kind == "Job" else WORKLOAD_API_VERSION
    return {"kind": kind, "apiVersion": api_version, "namespace": namespace, "name": name}
