"""The API server's checks of MultiKueue's objects and of the Configuration's ``multiKueue``.

Upstream's CRD rules (``multikueue_types.go``) and ``validateMultiKueue`` of
``pkg/config/validation.go``; a ``clusterProfileRef`` is refused because
Kueuestream connects to workers through kubeconfigs only.
"""

from __future__ import annotations

import re

from kueuestream.admission.api.multikueue import MultiKueueCluster, MultiKueueConfig, MultiKueueSettings
from kueuestream.admission.errors import FieldError
from kueuestream.admission.multikueue import names

MAX_CLUSTERS = 20
MAX_NAME = 256
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")


def validate_multikueue_config(config: MultiKueueConfig) -> list[FieldError]:
    errors: list[FieldError] = []
    clusters = config.spec.clusters
    if not clusters:
        errors.append(FieldError("spec.clusters", "must name at least one MultiKueueCluster"))
    if len(clusters) > MAX_CLUSTERS:
        errors.append(
            FieldError(
                "spec.clusters", f"must name at most {MAX_CLUSTERS} MultiKueueClusters, got {len(clusters)}"
            )
        )
    first: dict[str, int] = {}
    for i, name in enumerate(clusters):
        if not name:
            errors.append(FieldError(f"spec.clusters[{i}]", "must not be empty"))
        elif len(name) > MAX_NAME:
            errors.append(
                FieldError(f"spec.clusters[{i}]", f"must be at most {MAX_NAME} characters, got {len(name)}")
            )
        if name in first:
            errors.append(
                FieldError(
                    f"spec.clusters[{i}]", f"must be unique: {name!r} is already spec.clusters[{first[name]}]"
                )
            )
        first.setdefault(name, i)
    return errors


def validate_multikueue_cluster(cluster: MultiKueueCluster) -> list[FieldError]:
    source = cluster.spec.cluster_source
    path = "spec.clusterSource"
    if source.cluster_profile_ref is not None:
        return [
            FieldError(
                f"{path}.clusterProfileRef",
                "is not supported: Kueuestream connects to worker clusters through a kubeConfig "
                "(locationType Secret or Path)",
            )
        ]
    if source.kube_config is None:
        return [FieldError(f"{path}.kubeConfig", "required field is missing")]
    location = source.kube_config.location
    if not location:
        return [FieldError(f"{path}.kubeConfig.location", "must not be empty")]
    if len(location) > MAX_NAME:
        return [
            FieldError(
                f"{path}.kubeConfig.location", f"must be at most {MAX_NAME} characters, got {len(location)}"
            )
        ]
    return []


def validate_multikueue_settings(settings: MultiKueueSettings, path: str = "multiKueue") -> list[FieldError]:
    errors: list[FieldError] = []
    origin = settings.origin
    if not origin or len(origin) > 63 or not _LABEL_VALUE.fullmatch(origin):
        errors.append(
            FieldError(
                f"{path}.origin",
                f"{origin!r} is not a valid label value: 1-63 characters, alphanumerics, '-', '_' or '.', "
                "starting and ending with an alphanumeric",
            )
        )
    if settings.dispatcher_name not in names.DISPATCHERS:
        errors.append(
            FieldError(
                f"{path}.dispatcherName",
                f"unsupported dispatcher {settings.dispatcher_name!r}; "
                f"accepted: {', '.join(names.DISPATCHERS)}",
            )
        )
    idc = settings.incremental_dispatcher_config
    if idc is not None:
        if not settings.incremental:
            errors.append(
                FieldError(
                    f"{path}.incrementalDispatcherConfig",
                    f"may only be set when dispatcherName is {names.DISPATCHER_INCREMENTAL}",
                )
            )
        if idc.step_size < 1:
            errors.append(
                FieldError(
                    f"{path}.incrementalDispatcherConfig.stepSize", f"must be at least 1, got {idc.step_size}"
                )
            )
    return errors
