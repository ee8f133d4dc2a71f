"""scheduling.k8s.io PriorityClass: pods' priorityClassName resolves against it."""

from __future__ import annotations

from typing import Literal

from kueuestream.admission.api.base import ApiModel, Int, ObjectMeta, Str


class PriorityClass(ApiModel):
    api_version: Str
    kind: Literal["PriorityClass"]
    metadata: ObjectMeta
    value: Int
