"""The parts of core/v1 (and node.k8s.io) that admission reads: pod specs, taints,
namespaces, LimitRanges and RuntimeClasses."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kueuestream.admission.api.base import ApiModel, Int, LabelSelector, ObjectMeta, ResourceList, Str


class Toleration(ApiModel):
    key: Str = ""
    operator: Literal["Exists", "Equal", ""] = ""
    value: Str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute", ""] = ""


class Taint(ApiModel):
    key: Str
    value: Str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class NodeSelectorRequirement(ApiModel):
    key: Str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[Str] = Field(default_factory=list)


class NodeSelectorTerm(ApiModel):
    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list)


class NodeSelector(ApiModel):
    node_selector_terms: list[NodeSelectorTerm] = Field(default_factory=list)


class NodeAffinity(ApiModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None


class Affinity(ApiModel):
    node_affinity: NodeAffinity | None = None


class ResourceClaimRef(ApiModel):
    name: Str
    request: Str = ""


class ResourceRequirements(ApiModel):
    requests: ResourceList = Field(default_factory=dict)
    limits: ResourceList = Field(default_factory=dict)
    claims: list[ResourceClaimRef] = Field(default_factory=list)


class Container(ApiModel):
    name: Str = ""
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    # "Always" on an init container makes it a sidecar that runs beside the main containers.
    restart_policy: Str = ""


class PodResourceClaim(ApiModel):
    name: Str
    resource_claim_name: Str | None = None
    resource_claim_template_name: Str | None = None


class PodSpec(ApiModel):
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    overhead: ResourceList = Field(default_factory=dict)
    node_selector: dict[str, Str] = Field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    priority: Int | None = None
    priority_class_name: Str = ""
    resource_claims: list[PodResourceClaim] = Field(default_factory=list)
    runtime_class_name: Str | None = None
    # Pod-level resources (KEP-2837): what the pod as a whole asks for.
    resources: ResourceRequirements | None = None


class PodTemplateSpec(ApiModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)


class Namespace(ApiModel):
    api_version: Str = "v1"
    kind: Literal["Namespace"] = "Namespace"
    metadata: ObjectMeta


# The kinds of limit a LimitRange item sets (core/v1 LimitType).
LIMIT_TYPES = ("Pod", "Container", "PersistentVolumeClaim")


class LimitRangeItem(ApiModel):
    type: Str = ""
    max: ResourceList = Field(default_factory=dict)
    min: ResourceList = Field(default_factory=dict)
    default: ResourceList = Field(default_factory=dict)
    default_request: ResourceList = Field(default_factory=dict)
    max_limit_request_ratio: ResourceList = Field(default_factory=dict)


class LimitRangeSpec(ApiModel):
    limits: list[LimitRangeItem] = Field(default_factory=list)


class LimitRange(ApiModel):
    api_version: Str = "v1"
    kind: Literal["LimitRange"] = "LimitRange"
    metadata: ObjectMeta
    spec: LimitRangeSpec = Field(default_factory=LimitRangeSpec)


class Overhead(ApiModel):
    pod_fixed: ResourceList = Field(default_factory=dict)


class RuntimeClass(ApiModel):
    """node.k8s.io/v1: a pod naming it in ``runtimeClassName`` gets its ``overhead.podFixed``."""

    api_version: Str = "node.k8s.io/v1"
    kind: Literal["RuntimeClass"] = "RuntimeClass"
    metadata: ObjectMeta
    handler: Str = ""
    overhead: Overhead | None = None


__all__ = [
    "LIMIT_TYPES",
    "Affinity",
    "Container",
    "LabelSelector",
    "LimitRange",
    "LimitRangeItem",
    "Namespace",
    "NodeSelectorRequirement",
    "PodResourceClaim",
    "PodSpec",
    "PodTemplateSpec",
    "RuntimeClass",
    "Taint",
    "Toleration",
]
