"""Feeding YAML to the engine and reading back Workload status, for the DRA tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action, Decision, Event, EventType, ObjectRef
from tests.helpers import docs_of, tick_through_wakeups

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_DIR = REPO / "config" / "examples" / "dra"


@dataclass
class Drive:
    engine: Engine = field(default_factory=Engine)
    decisions: list[Decision] = field(default_factory=list)
    time_ms: int = 1_000

    def load(self, text: str) -> list[Decision]:
        """Apply every document of ``text`` as one batch, then let the engine settle."""
        docs = docs_of(text)
        out: list[Decision] = []
        for i, doc in enumerate(docs):
            self.time_ms += 1
            event = Event(EventType.UPSERT, self.time_ms, manifest=doc, batch=i < len(docs) - 1)
            out += self.engine.apply(event)
        return self._settle(out)

    def _settle(self, out: list[Decision]) -> list[Decision]:
        more, self.time_ms = tick_through_wakeups(self.engine, self.time_ms)
        out += more
        self.decisions += out
        return out

    def delete(self, kind: str, name: str, namespace: str = "") -> list[Decision]:
        self.time_ms += 1
        out = self.engine.apply(Event(EventType.DELETE, self.time_ms, ref=ObjectRef(kind, namespace, name)))
        return self._settle(out)

    def workloads(self) -> dict[str, dict[str, Any]]:
        return {w["metadata"]["name"]: w for w in self.engine.workload_objects()}

    def status(self, name: str) -> dict[str, Any]:
        status: dict[str, Any] = self.workloads()[name]["status"]
        return status

    def reserved(self, name: str) -> dict[str, Any]:
        for cond in self.status(name).get("conditions", []):
            if cond["type"] == "QuotaReserved":
                return dict(cond)
        raise AssertionError(f"{name} has no QuotaReserved condition: {self.status(name)}")

    def is_admitted(self, name: str) -> bool:
        return bool(self.reserved(name)["status"] == "True")

    def usage(self, name: str) -> dict[str, dict[str, str]]:
        """resourceUsage per pod set of an admitted workload."""
        assert self.is_admitted(name), self.reserved(name)
        return {
            psa["name"]: dict(psa["resourceUsage"])
            for psa in self.status(name)["admission"]["podSetAssignments"]
        }

    def flavors(self, name: str) -> dict[str, dict[str, str]]:
        return {
            psa["name"]: dict(psa["flavors"]) for psa in self.status(name)["admission"]["podSetAssignments"]
        }

    def pending(self, name: str) -> tuple[str, str]:
        """(reason, message) of a workload waiting without a reservation."""
        cond = self.reserved(name)
        assert cond["status"] == "False", cond
        return cond["reason"], cond["message"]

    def rejected(self) -> dict[str, str]:
        return {str(d.ref): d.message for d in self.decisions if d.action == Action.REJECTED}


def drive(*parts: str) -> Drive:
    """A Drive that has loaded the YAML ``parts`` as one batch."""
    d = Drive()
    d.load("".join(parts))
    return d


def job_name(drive: Drive, job: str) -> str:
    names = [n for n in drive.workloads() if n.startswith(f"job-{job}-")]
    assert len(names) == 1, names
    return names[0]
