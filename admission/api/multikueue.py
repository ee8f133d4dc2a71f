"""MultiKueue's objects (kueue.x-k8s.io v1beta1 and v1beta2) and the Configuration's ``multiKueue``."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PlainSerializer

from kueuestream.admission.api.base import ApiModel, Int, ObjectMeta, Str
from kueuestream.admission.api.kueue import Condition
from kueuestream.admission.multikueue import names

# Go's time.ParseDuration units, in milliseconds (metav1.Duration is written the same way).
_UNIT_MS = {"ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0, "us": 0.001, "µs": 0.001, "ns": 1e-6}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|us|µs|ns|s|m|h)")


def parse_duration_ms(text: str) -> int:
    """A Kubernetes duration (``1m``, ``15m0s``, ``1h30m``, ``500ms``, ``0``) in whole milliseconds."""
    if text == "0":
        return 0
    rest = text[1:] if text.startswith("+") else text
    if rest.startswith("-"):
        raise ValueError(f"must not be negative, got {text!r}")
    total = 0.0
    pos = 0
    while pos < len(rest):
        match = _DURATION_PART.match(rest, pos)
        if match is None:
            break
        total += float(match.group(1)) * _UNIT_MS[match.group(2)]
        pos = match.end()
    if not rest or pos != len(rest):
        raise ValueError(f"invalid duration {text!r}; write it like 30s, 1m, 15m0s or 1h30m")
    return int(total)


def _duration(value: Any) -> Any:
    if isinstance(value, str):
        return parse_duration_ms(value)
    raise ValueError(f"expected a duration such as 30s, 1m or 15m0s, got {type(value).__name__} {value!r}")


# Held in milliseconds, written back as a duration the API server reads.
DurationMs = Annotated[
    int, BeforeValidator(_duration), PlainSerializer(lambda ms: f"{ms}ms", return_type=str)
]


class KubeConfig(ApiModel):
    location: Str
    location_type: Literal["Secret", "Path"] = "Secret"


class ClusterProfileReference(ApiModel):
    name: Str


class ClusterSource(ApiModel):
    kube_config: KubeConfig | None = None
    cluster_profile_ref: ClusterProfileReference | None = None


class MultiKueueClusterSpec(ApiModel):
    cluster_source: ClusterSource


class MultiKueueClusterStatus(ApiModel):
    conditions: list[Condition] = Field(default_factory=list)


class MultiKueueCluster(ApiModel):
    api_version: Str
    kind: Literal["MultiKueueCluster"]
    metadata: ObjectMeta
    spec: MultiKueueClusterSpec
    status: MultiKueueClusterStatus = Field(default_factory=MultiKueueClusterStatus)


class MultiKueueConfigSpec(ApiModel):
    # Ordered: the incremental dispatcher nominates in this order.
    clusters: list[Str]


class MultiKueueConfig(ApiModel):
    api_version: Str
    kind: Literal["MultiKueueConfig"]
    metadata: ObjectMeta
    spec: MultiKueueConfigSpec


class IncrementalDispatcherConfig(ApiModel):
    step_size: Int = names.DEFAULT_INCREMENTAL_STEP


class MultiKueueSettings(ApiModel):
    """The Configuration's ``multiKueue``, with upstream's defaults."""

    gc_interval: DurationMs = names.DEFAULT_GC_INTERVAL_MS
    origin: Str = names.DEFAULT_ORIGIN
    worker_lost_timeout: DurationMs = names.DEFAULT_WORKER_LOST_TIMEOUT_MS
    dispatcher_name: Str = names.DISPATCHER_ALL_AT_ONCE
    incremental_dispatcher_config: IncrementalDispatcherConfig | None = None

    @property
    def incremental(self) -> bool:
        return self.dispatcher_name == names.DISPATCHER_INCREMENTAL

    @property
    def step_size(self) -> int:
        config = self.incremental_dispatcher_config
        return config.step_size if config is not None else names.DEFAULT_INCREMENTAL_STEP
