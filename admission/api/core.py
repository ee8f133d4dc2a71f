"""The parts of core/v1 that admission reads: pod specs, taints, namespaces."""

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


class PodTemplateSpec(ApiModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)


class Namespace(ApiModel):
    api_version: Str = "v1"
    kind: Literal["Namespace"] = "Namespace"
    metadata: ObjectMeta


__all__ = [
    "Affinity",
    "Container",
    "LabelSelector",
    "Namespace",
    "NodeSelectorRequirement",
    "PodResourceClaim",
    "PodSpec",
    "PodTemplateSpec",
    "Taint",
    "Toleration",
]
