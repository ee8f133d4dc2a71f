"""DRA device counting (filled in by the DRA work)."""

from __future__ import annotations

from dataclasses import dataclass, field

from admission.api.base import ApiModel
from admission.api.config import Configuration
from admission.api.kueue import Workload
from admission.events import ObjectRef


@dataclass(frozen=True, slots=True)
class Counted:
    per_pod: dict[str, dict[str, int]] = field(default_factory=dict)
    problem: str = ""


class DraState:
    def store(self, obj: ApiModel) -> bool:
        return False

    def delete(self, ref: ObjectRef) -> bool:
        return False

    def count(self, wl: Workload, config: Configuration) -> Counted:
        return Counted()
