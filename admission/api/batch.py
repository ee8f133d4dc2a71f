"""batch/v1 Job, read the way Kueue's job integration turns it into a Workload."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kueuestream.admission.api.base import ApiModel, Bool, Int, ObjectMeta, Str
from kueuestream.admission.api.core import PodTemplateSpec


class JobSpec(ApiModel):
    parallelism: Int | None = None
    completions: Int | None = None
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)
    suspend: Bool | None = None


class Job(ApiModel):
    api_version: Str
    kind: Literal["Job"]
    metadata: ObjectMeta
    spec: JobSpec = Field(default_factory=JobSpec)
