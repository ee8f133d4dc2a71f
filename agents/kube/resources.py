"""The Kubernetes resources the watcher lists and watches, and the versions it asks for.

Each kind names the versions it can be read in, newest first; discovery picks
the first one the API server serves. Kueue's kinds are read as v1beta2 and,
on a server with an older Kueue, v1beta1 (Cohort also v1alpha1); DRA's as
resource.k8s.io v1, else v1beta2, else v1beta1. The decoder reads every one of
those versions, so the watcher passes objects on as the server sends them.

A kind is watched only if the admission core reads it (``decode.KINDS``):
a kind it does not know would only fill ``kueue.errors`` with "unknown kind".
AdmissionCheck is listed here for when the core reads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kueuestream.admission.decode import KINDS
from kueuestream.admission.engine import Engine  # noqa: F401  (registers the DRA kinds with the decoder)
from kueuestream.admission.jobs import QUEUE_NAME_LABEL

KUEUE_GROUP = "kueue.x-k8s.io"
RESOURCE_GROUP = "resource.k8s.io"
CONFIG_MAP = "ConfigMap"


@dataclass(frozen=True, slots=True)
class WatchedKind:
    """One kind to list and watch, before discovery chose its version."""

    kind: str
    group: str  # "" for the core group
    versions: tuple[str, ...]  # newest first
    plural: str
    namespaced: bool
    # A server without it cannot run Kueue workloads at all (Kueue's own CRDs);
    # the others (DRA) are simply not watched where the server lacks them.
    required: bool
    label_selector: str = ""
    field_selector: str = ""
    namespace: str = ""  # watch one namespace only


# Jobs without the queue-name label are not Kueue's (manageJobsWithoutQueueName
# is false, as without a webhook it must be): the server filters them out, and a
# Job whose label is removed comes as DELETED, which is what it now is to Kueue.
KINDS_WATCHED: tuple[WatchedKind, ...] = (
    WatchedKind("Namespace", "", ("v1",), "namespaces", False, True),
    WatchedKind("PriorityClass", "scheduling.k8s.io", ("v1",), "priorityclasses", False, True),
    # What Kueue adds to a pod set's requests (AdjustResources) and checks them against.
    WatchedKind("LimitRange", "", ("v1",), "limitranges", True, True),
    WatchedKind("RuntimeClass", "node.k8s.io", ("v1",), "runtimeclasses", False, True),
    WatchedKind("ResourceFlavor", KUEUE_GROUP, ("v1beta2", "v1beta1"), "resourceflavors", False, True),
    WatchedKind(
        "WorkloadPriorityClass", KUEUE_GROUP, ("v1beta2", "v1beta1"), "workloadpriorityclasses", False, True
    ),
    # Optional: a cluster without the kind has no checks, and a ClusterQueue naming one stays inactive.
    WatchedKind("AdmissionCheck", KUEUE_GROUP, ("v1beta2", "v1beta1"), "admissionchecks", False, False),
    WatchedKind("Cohort", KUEUE_GROUP, ("v1beta2", "v1beta1", "v1alpha1"), "cohorts", False, True),
    WatchedKind("ClusterQueue", KUEUE_GROUP, ("v1beta2", "v1beta1"), "clusterqueues", False, True),
    WatchedKind("LocalQueue", KUEUE_GROUP, ("v1beta2", "v1beta1"), "localqueues", True, True),
    WatchedKind("Workload", KUEUE_GROUP, ("v1beta2", "v1beta1"), "workloads", True, True),
    WatchedKind("Job", "batch", ("v1",), "jobs", True, True, label_selector=QUEUE_NAME_LABEL),
    # Optional: only a MultiKueue manager has them.
    WatchedKind("MultiKueueConfig", KUEUE_GROUP, ("v1beta2", "v1beta1"), "multikueueconfigs", False, False),
    WatchedKind("MultiKueueCluster", KUEUE_GROUP, ("v1beta2", "v1beta1"), "multikueueclusters", False, False),
    WatchedKind("DeviceClass", RESOURCE_GROUP, ("v1", "v1beta2", "v1beta1"), "deviceclasses", False, False),
    WatchedKind(
        "ResourceSlice", RESOURCE_GROUP, ("v1", "v1beta2", "v1beta1"), "resourceslices", False, False
    ),
    WatchedKind(
        "ResourceClaimTemplate",
        RESOURCE_GROUP,
        ("v1", "v1beta2", "v1beta1"),
        "resourceclaimtemplates",
        True,
        False,
    ),
)


def config_map_kind(namespace: str, name: str) -> WatchedKind:
    """The one ConfigMap that carries Kueue's Configuration (Kueue's ``kueue-manager-config``)."""
    return WatchedKind(
        CONFIG_MAP,
        "",
        ("v1",),
        "configmaps",
        True,
        True,
        field_selector=f"metadata.name={name}",
        namespace=namespace,
    )


def kinds_to_watch(config_map: tuple[str, str] | None = None) -> list[WatchedKind]:
    """The watched kinds the core reads, plus the Configuration's ConfigMap if one is named."""
    kinds = [k for k in KINDS_WATCHED if k.kind in KINDS]
    if config_map is not None:
        kinds.append(config_map_kind(*config_map))
    return kinds


@dataclass(frozen=True, slots=True)
class ServedKind:
    """A watched kind at the version the API server serves it in."""

    spec: WatchedKind
    version: str

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def api_version(self) -> str:
        return f"{self.spec.group}/{self.version}" if self.spec.group else self.version

    @property
    def path(self) -> str:
        """The collection's URL path: all namespaces, or the one namespace it is limited to."""
        spec = self.spec
        root = f"/apis/{spec.group}/{self.version}" if spec.group else f"/api/{self.version}"
        if spec.namespace:
            return f"{root}/namespaces/{spec.namespace}/{spec.plural}"
        return f"{root}/{spec.plural}"

    def query(self) -> list[tuple[str, str]]:
        params = []
        if self.spec.label_selector:
            params.append(("labelSelector", self.spec.label_selector))
        if self.spec.field_selector:
            params.append(("fieldSelector", self.spec.field_selector))
        return params


def group_version_path(group: str, version: str) -> str:
    return f"/apis/{group}/{version}" if group else f"/api/{version}"


@dataclass(frozen=True, slots=True)
class Discovery:
    served: list[ServedKind]
    missing: list[WatchedKind]  # required kinds the server serves in none of their versions
    absent: list[WatchedKind]  # optional kinds the server lacks; not watched

    def missing_message(self) -> str:
        """What is missing and how to get it, for a server without Kueue's CRDs."""
        wanted = ", ".join(
            f"{k.kind} ({' or '.join(f'{k.group}/{v}' if k.group else v for v in k.versions)})"
            for k in self.missing
        )
        return (
            f"the API server does not serve {wanted}; install Kueue's CRDs, or ours with "
            "`kueuestream crds | kubectl apply --server-side -f -`"
        )


def choose_versions(
    kinds: Iterable[WatchedKind], resources: Mapping[str, Sequence[dict[str, Any]]]
) -> Discovery:
    """Each kind at its first version whose resource list (``group/version`` -> resources) has it."""
    served: list[ServedKind] = []
    missing: list[WatchedKind] = []
    absent: list[WatchedKind] = []
    for spec in kinds:
        for version in spec.versions:
            listed = resources.get(group_version_path(spec.group, version), ())
            if any(r.get("name") == spec.plural and r.get("kind") == spec.kind for r in listed):
                served.append(ServedKind(spec, version))
                break
        else:
            (missing if spec.required else absent).append(spec)
    return Discovery(served, missing, absent)
