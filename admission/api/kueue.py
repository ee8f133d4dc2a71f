"""kueue.x-k8s.io objects, read from v1beta1 and v1beta2 alike.

Where the two versions name a field differently, both names are accepted and
the model exposes one (``ClusterQueueSpec.cohort`` holds v1beta1 ``cohort``
and v1beta2 ``cohortName``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator

from kueuestream.admission.api.base import (
    ApiModel,
    Bool,
    Int,
    LabelSelector,
    ObjectMeta,
    QuantityValue,
    Str,
)
from kueuestream.admission.api.core import PodTemplateSpec, Taint, Toleration

StopPolicy = Literal["None", "Hold", "HoldAndDrain"]


class ResourceFlavorSpec(ApiModel):
    node_labels: dict[str, Str] = Field(default_factory=dict)
    node_taints: list[Taint] = Field(default_factory=list)
    tolerations: list[Toleration] = Field(default_factory=list)
    resource_weights: dict[str, QuantityValue] = Field(default_factory=dict)


class ResourceFlavor(ApiModel):
    api_version: Str
    kind: Literal["ResourceFlavor"]
    metadata: ObjectMeta
    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)


class ResourceQuota(ApiModel):
    name: Str
    nominal_quota: QuantityValue
    borrowing_limit: QuantityValue | None = None
    lending_limit: QuantityValue | None = None


class FlavorQuotas(ApiModel):
    name: Str
    resources: list[ResourceQuota] = Field(default_factory=list)


class ResourceGroup(ApiModel):
    covered_resources: list[Str] = Field(default_factory=list)
    flavors: list[FlavorQuotas] = Field(default_factory=list)


class BorrowWithinCohort(ApiModel):
    policy: Literal["Never", "LowerPriority"] = "Never"
    max_priority_threshold: Int | None = None


class Preemption(ApiModel):
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = "Never"
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "Never"
    borrow_within_cohort: BorrowWithinCohort = Field(default_factory=BorrowWithinCohort)


def _fungibility(value: Any, stop: str) -> Any:
    # v1beta2 renamed the "stop here" values to MayStopSearch; they mean the same
    # as v1beta1's Borrow / Preempt. Name every spelling a user may write.
    accepted = {"MayStopSearch": stop, stop: stop, "TryNextFlavor": "TryNextFlavor"}
    if isinstance(value, str) and value in accepted:
        return accepted[value]
    raise ValueError(
        f"unsupported value {value!r}; accepted values: 'MayStopSearch' or 'TryNextFlavor' "
        f"(v1beta1 also '{stop}')"
    )


FungibilityPreference = Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"]


class FlavorFungibility(ApiModel):
    when_can_borrow: Literal["Borrow", "TryNextFlavor"] = "Borrow"
    when_can_preempt: Literal["Preempt", "TryNextFlavor"] = "TryNextFlavor"
    # Which flavor wins when every candidate needs borrowing, preemption or both
    # (unset means BorrowingOverPreemption).
    preference: FungibilityPreference | None = None

    @model_validator(mode="after")
    def _preference_needs_try_next(self) -> FlavorFungibility:
        # The API server refuses the same (the CRD's validation rule on flavorFungibility).
        stopping = [
            name
            for name, value in (
                ("whenCanBorrow", self.when_can_borrow),
                ("whenCanPreempt", self.when_can_preempt),
            )
            if value != "TryNextFlavor"
        ]
        if self.preference is not None and stopping:
            raise ValueError(
                f"preference {self.preference} can only be set when both whenCanBorrow and "
                f"whenCanPreempt are TryNextFlavor; {' and '.join(stopping)} may stop the search"
            )
        return self

    @field_validator("when_can_borrow", mode="before")
    @classmethod
    def _borrow_alias(cls, value: Any) -> Any:
        return _fungibility(value, "Borrow")

    @field_validator("when_can_preempt", mode="before")
    @classmethod
    def _preempt_alias(cls, value: Any) -> Any:
        return _fungibility(value, "Preempt")


class FairSharing(ApiModel):
    weight: QuantityValue | None = None


class AdmissionCheckStrategyRule(ApiModel):
    name: Str
    on_flavors: list[Str] = Field(default_factory=list)


class AdmissionChecksStrategy(ApiModel):
    admission_checks: list[AdmissionCheckStrategyRule] = Field(default_factory=list)


class ClusterQueueSpec(ApiModel):
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    cohort: Str = Field(default="", validation_alias=AliasChoices("cohortName", "cohort"))
    queueing_strategy: Literal["StrictFIFO", "BestEffortFIFO"] = "BestEffortFIFO"
    namespace_selector: LabelSelector | None = None
    preemption: Preemption = Field(default_factory=Preemption)
    flavor_fungibility: FlavorFungibility = Field(default_factory=FlavorFungibility)
    fair_sharing: FairSharing | None = None
    stop_policy: StopPolicy = "None"
    # v1beta1 only: the checks every flavor needs (v1beta2 says it with a strategy).
    admission_checks: list[Str] = Field(default_factory=list)
    admission_checks_strategy: AdmissionChecksStrategy | None = None


class ClusterQueue(ApiModel):
    api_version: Str
    kind: Literal["ClusterQueue"]
    metadata: ObjectMeta
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)


class CohortSpec(ApiModel):
    parent_name: Str = Field(default="", validation_alias=AliasChoices("parentName", "parent"))
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    fair_sharing: FairSharing | None = None


class Cohort(ApiModel):
    api_version: Str
    kind: Literal["Cohort"]
    metadata: ObjectMeta
    spec: CohortSpec = Field(default_factory=CohortSpec)


class LocalQueueSpec(ApiModel):
    cluster_queue: Str = ""
    stop_policy: StopPolicy = "None"


class LocalQueue(ApiModel):
    api_version: Str
    kind: Literal["LocalQueue"]
    metadata: ObjectMeta
    spec: LocalQueueSpec = Field(default_factory=LocalQueueSpec)


class WorkloadPriorityClass(ApiModel):
    api_version: Str
    kind: Literal["WorkloadPriorityClass"]
    metadata: ObjectMeta
    value: Int
    description: Str = ""


class PodSet(ApiModel):
    name: Str = "main"
    count: Int = 1
    min_count: Int | None = None
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)


class PriorityClassRef(ApiModel):
    name: Str = ""
    kind: Str = ""


class WorkloadSpec(ApiModel):
    pod_sets: list[PodSet] = Field(default_factory=list)
    queue_name: Str = ""
    priority: Int | None = None
    priority_class_name: Str = ""
    priority_class_source: Str = ""
    # v1beta2 names the class through a reference instead of name + source.
    priority_class_ref: PriorityClassRef | None = None
    active: Bool = True
    # How long it may stay admitted, over all its admissions, before Kueue deactivates it.
    maximum_execution_time_seconds: Int | None = None


class Condition(ApiModel):
    type: Str
    status: Literal["True", "False", "Unknown"]
    reason: Str = ""
    message: Str = ""
    last_transition_time: Str | None = None


class PodSetAssignment(ApiModel):
    name: Str
    flavors: dict[str, Str] = Field(default_factory=dict)
    resource_usage: dict[str, QuantityValue] = Field(default_factory=dict)
    count: Int | None = None


class Admission(ApiModel):
    cluster_queue: Str
    pod_set_assignments: list[PodSetAssignment] = Field(default_factory=list)


CheckState = Literal["Pending", "Ready", "Retry", "Rejected"]


class AdmissionCheckState(ApiModel):
    name: Str
    state: CheckState
    last_transition_time: Str | None = None
    message: Str = ""
    requeue_after_seconds: Int | None = None
    retry_count: Int | None = None
    # What the check's controller adds to each pod set's pods (name, labels, annotations,
    # nodeSelector, tolerations): applied by the job integration, kept as written.
    pod_set_updates: list[dict[str, Any]] = Field(default_factory=list)


class RequeueState(ApiModel):
    count: Int | None = None
    requeue_at: Str | None = None


class WorkloadStatus(ApiModel):
    admission: Admission | None = None
    conditions: list[Condition] = Field(default_factory=list)
    admission_checks: list[AdmissionCheckState] = Field(default_factory=list)
    requeue_state: RequeueState | None = None
    # Seconds admitted before its last eviction, summed (with maximumExecutionTimeSeconds).
    accumulated_past_execution_time_seconds: Int | None = None


class Workload(ApiModel):
    api_version: Str
    kind: Literal["Workload"]
    metadata: ObjectMeta
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)
    status: WorkloadStatus = Field(default_factory=WorkloadStatus)


class AdmissionCheckParametersReference(ApiModel):
    api_group: Str = ""
    kind: Str = ""
    name: Str = ""


class AdmissionCheckSpec(ApiModel):
    controller_name: Str
    parameters: AdmissionCheckParametersReference | None = None


class AdmissionCheckStatus(ApiModel):
    conditions: list[Condition] = Field(default_factory=list)


class AdmissionCheck(ApiModel):
    api_version: Str
    kind: Literal["AdmissionCheck"]
    metadata: ObjectMeta
    spec: AdmissionCheckSpec
    status: AdmissionCheckStatus = Field(default_factory=AdmissionCheckStatus)

    @property
    def active(self) -> bool:
        """Its controller says it runs: the ``Active`` condition is True (Kueue's cache reads the same)."""
        return any(c.type == "Active" and c.status == "True" for c in self.status.conditions)
