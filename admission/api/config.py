"""config.kueue.x-k8s.io Configuration (v1beta1 and v1beta2)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from admission.api.base import ApiModel, ObjectMeta, Str

PreemptionStrategy = Literal["LessThanOrEqualToFinalShare", "LessThanInitialShare"]

# Upstream Kueue's names for the same settings; the KEPs this project implements
# renamed them, and configurations written for either must load.
QUOTA_CHECK_ALIASES = {"BlockUndeclared": "All", "IgnoreUndeclared": "OnlyDeclared"}
FEATURE_GATE_ALIASES = {
    "QuotaCheckStrategy": "QuotaCheck",
    "KueueDRAIntegration": "DynamicResourceAllocation",
}
FEATURE_GATE_DEFAULTS: dict[str, bool] = {
    "QuotaCheck": True,
    "DynamicResourceAllocation": True,
    "PrioritySortingWithinCohort": True,
}


class DeviceClassMapping(ApiModel):
    name: Str
    device_class_names: list[Str] = Field(default_factory=list)


class Resources(ApiModel):
    exclude_resource_prefixes: list[Str] = Field(default_factory=list)
    quota_check: Literal["All", "OnlyDeclared"] = "All"
    device_class_mappings: list[DeviceClassMapping] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _quota_check_aliases(cls, data: Any) -> Any:
        if isinstance(data, dict) and "quotaCheckStrategy" in data and "quotaCheck" not in data:
            data = {**data, "quotaCheck": data["quotaCheckStrategy"]}
        return data

    @field_validator("quota_check", mode="before")
    @classmethod
    def _quota_check_value(cls, value: Any) -> Any:
        return QUOTA_CHECK_ALIASES.get(value, value) if isinstance(value, str) else value


def _both_strategies() -> list[PreemptionStrategy]:
    return ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]


class FairSharingConfig(ApiModel):
    enable: bool = False
    preemption_strategies: list[PreemptionStrategy] = Field(default_factory=_both_strategies)


class Configuration(ApiModel):
    api_version: Str = "config.kueue.x-k8s.io/v1beta1"
    kind: Literal["Configuration"] = "Configuration"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    namespace: Str = ""
    manage_jobs_without_queue_name: bool = False
    resources: Resources = Field(default_factory=Resources)
    fair_sharing: FairSharingConfig | None = None
    feature_gates: dict[str, bool] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _v1beta2_fair_sharing(cls, data: Any) -> Any:
        # v1beta2 dropped `enable`: a present fairSharing stanza turns it on.
        if (
            isinstance(data, dict)
            and str(data.get("apiVersion", "")).endswith("/v1beta2")
            and isinstance(data.get("fairSharing"), dict)
        ):
            data = {**data, "fairSharing": {"enable": True, **data["fairSharing"]}}
        return data

    @field_validator("feature_gates", mode="before")
    @classmethod
    def _gate_aliases(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {FEATURE_GATE_ALIASES.get(k, k): v for k, v in value.items()}
        return value

    def gate(self, name: str) -> bool:
        return self.feature_gates.get(name, FEATURE_GATE_DEFAULTS.get(name, False))

    @property
    def fair_sharing_enabled(self) -> bool:
        return self.fair_sharing is not None and self.fair_sharing.enable

    @property
    def quota_check(self) -> str:
        # With the gate off the field is ignored, which behaves as All.
        return self.resources.quota_check if self.gate("QuotaCheck") else "All"
