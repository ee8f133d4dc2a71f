"""config.kueue.x-k8s.io Configuration (v1beta1 and v1beta2)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from kueuestream.admission.api.base import ApiModel, Bool, ObjectMeta, Str
from kueuestream.admission.api.multikueue import MultiKueueSettings

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
    "PartialAdmission": True,
    "UnadmittedWorkloadsObservability": True,
    "UnadmittedWorkloadsExplicitStatus": False,
}


class DeviceClassMapping(ApiModel):
    name: Str
    device_class_names: list[Str] = Field(default_factory=list)


QuotaCheck = Literal["All", "OnlyDeclared"]


class Resources(ApiModel):
    exclude_resource_prefixes: list[Str] = Field(default_factory=list)
    quota_check: QuotaCheck = "All"
    # Upstream Kueue's field for the same setting (BlockUndeclared | IgnoreUndeclared).
    quota_check_strategy: QuotaCheck | None = None
    device_class_mappings: list[DeviceClassMapping] = Field(default_factory=list)

    @field_validator("quota_check", mode="before")
    @classmethod
    def _quota_check_value(cls, value: Any) -> Any:
        return QUOTA_CHECK_ALIASES.get(value, value) if isinstance(value, str) else value

    @field_validator("quota_check_strategy", mode="before")
    @classmethod
    def _quota_check_strategy_value(cls, value: Any) -> Any:
        if value is None or (isinstance(value, str) and value in ("All", "OnlyDeclared")):
            return value
        if isinstance(value, str) and value in QUOTA_CHECK_ALIASES:
            return QUOTA_CHECK_ALIASES[value]
        raise ValueError(
            f"unsupported value {value!r}; accepted values: 'BlockUndeclared' or 'IgnoreUndeclared' "
            "(the same as quotaCheck: 'All' or 'OnlyDeclared')"
        )

    @model_validator(mode="after")
    def _quota_check_strategy(self) -> Resources:
        if self.quota_check_strategy is None:
            return self
        if "quota_check" not in self.model_fields_set:
            return self.model_copy(update={"quota_check": self.quota_check_strategy})
        if self.quota_check != self.quota_check_strategy:
            raise ValueError(
                f"quotaCheck is {self.quota_check} but quotaCheckStrategy means "
                f"{self.quota_check_strategy}; set only one of them"
            )
        return self


def _both_strategies() -> list[PreemptionStrategy]:
    return ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]


class FairSharingConfig(ApiModel):
    enable: Bool = False
    preemption_strategies: list[PreemptionStrategy] = Field(default_factory=_both_strategies)


class Configuration(ApiModel):
    api_version: Str = "config.kueue.x-k8s.io/v1beta1"
    kind: Literal["Configuration"] = "Configuration"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    namespace: Str = ""
    manage_jobs_without_queue_name: Bool = False
    resources: Resources = Field(default_factory=Resources)
    fair_sharing: FairSharingConfig | None = None
    feature_gates: dict[str, Bool] = Field(default_factory=dict)
    multi_kueue: MultiKueueSettings | None = None

    @model_validator(mode="before")
    @classmethod
    def _v1beta2_fair_sharing(cls, data: Any) -> Any:
        # v1beta2 dropped `enable`: a present fairSharing stanza turns it on.
        if (
            isinstance(data, dict)
            and str(data.get("apiVersion", "")).endswith("/v1beta2")
            and isinstance(data.get("fairSharing"), dict)
        ):
            # v1beta2 has no `enable` to turn it off: the API server would prune one.
            data = {**data, "fairSharing": {**data["fairSharing"], "enable": True}}
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
    def multikueue(self) -> MultiKueueSettings:
        """``multiKueue`` with upstream's defaults where it is left out."""
        return self.multi_kueue if self.multi_kueue is not None else MultiKueueSettings()

    @property
    def fair_sharing_enabled(self) -> bool:
        return self.fair_sharing is not None and self.fair_sharing.enable

    @property
    def quota_check(self) -> str:
        # With the gate off the field is ignored, which behaves as All.
        return self.resources.quota_check if self.gate("QuotaCheck") else "All"
