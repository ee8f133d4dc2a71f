"""Feeding YAML to the engine and reading back Workload status, for the DRA tests."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action, Decision, Event, EventType, ObjectRef
from tests.helpers import tick_through_wakeups

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_DIR = REPO / "config" / "examples" / "dra"
NS = "team"


def docs_of(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


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


def job_name(drive: Drive, job: str) -> str:
    names = [n for n in drive.workloads() if n.startswith(f"job-{job}-")]
    assert len(names) == 1, names
    return names[0]


# ------------------------------------------------------------------ builders


def configuration(mappings: dict[str, list[str]], gates: dict[str, bool] | None = None) -> str:
    lines = [
        "apiVersion: config.kueue.x-k8s.io/v1beta1",
        "kind: Configuration",
        "resources:",
        "  deviceClassMappings:",
    ]
    for name, classes in mappings.items():
        lines.append(f"  - name: {name}")
        lines.append(f"    deviceClassNames: [{', '.join(classes)}]")
    if not mappings:
        lines[-1] = "  deviceClassMappings: []"
    if gates:
        lines.append("featureGates:")
        lines += [f"  {k}: {str(v).lower()}" for k, v in gates.items()]
    return "\n".join(lines) + "\n---\n"


def queue(quotas: Mapping[str, int | str], namespace: str = NS) -> str:
    """Flavor ``f``, ClusterQueue ``cq`` covering cpu plus ``quotas``, LocalQueue ``lq``."""
    resources = {"cpu": 100, **quotas}
    covered = ", ".join(resources)
    quota_lines = "\n".join(f"      - {{name: {r}, nominalQuota: {q}}}" for r, q in resources.items())
    return f"""
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {{name: f}}
spec: {{}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: cq}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [{covered}]
    flavors:
    - name: f
      resources:
{quota_lines}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: lq, namespace: {namespace}}}
spec: {{clusterQueue: cq}}
---
"""


def template(name: str, requests: str, version: str = "v1beta1", namespace: str = NS, uid: str = "") -> str:
    """A ResourceClaimTemplate; ``requests`` is the YAML list under spec.spec.devices.requests."""
    uid_line = f"\n  uid: {uid}" if uid else ""
    body = "\n".join("      " + line for line in requests.strip("\n").splitlines())
    return f"""
apiVersion: resource.k8s.io/{version}
kind: ResourceClaimTemplate
metadata:
  name: {name}
  namespace: {namespace}{uid_line}
spec:
  spec:
    devices:
      requests:
{body}
---
"""


def device_class(name: str, *expressions: str, version: str = "v1") -> str:
    selectors = "".join(f"\n  - cel:\n      expression: {json.dumps(e)}" for e in expressions)
    return f"""
apiVersion: resource.k8s.io/{version}
kind: DeviceClass
metadata: {{name: {name}}}
spec:
  selectors:{selectors or " []"}
---
"""


def resource_slice(
    name: str, driver: str, pool: str, devices: int, generation: int = 1, version: str = "v1"
) -> str:
    if version in ("v1beta1", "v1alpha3"):
        listed = "".join(f"\n  - name: dev-{i}\n    basic: {{}}" for i in range(devices))
    else:
        listed = "".join(f"\n  - name: dev-{i}" for i in range(devices))
    return f"""
apiVersion: resource.k8s.io/{version}
kind: ResourceSlice
metadata: {{name: {name}}}
spec:
  driver: {driver}
  nodeName: node-{name}
  pool: {{name: {pool}, generation: {generation}, resourceSliceCount: 1}}
  devices:{listed or " []"}
---
"""


PodSetSpec = tuple[str, int, list[tuple[str, str]]]


def workload(
    name: str,
    pod_sets: list[PodSetSpec],
    namespace: str = NS,
    cpu: str = "1",
) -> str:
    """A Workload; each pod set is (name, count, [(claim name, template name)]).

    A template name written ``claim:<name>`` becomes a direct resourceClaimName.
    """
    sets = []
    for ps_name, count, claims in pod_sets:
        entries = []
        for claim, ref in claims:
            if ref.startswith("claim:"):
                entries.append(f"          - {{name: {claim}, resourceClaimName: {ref[6:]}}}")
            else:
                entries.append(f"          - {{name: {claim}, resourceClaimTemplateName: {ref}}}")
        claims_yaml = ("\n        resourceClaims:\n" + "\n".join(entries)) if entries else ""
        sets.append(
            f"""  - name: {ps_name}
    count: {count}
    template:
      spec:
        containers:
        - name: c
          resources: {{requests: {{cpu: "{cpu}"}}}}{claims_yaml}"""
        )
    return f"""
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  queueName: lq
  podSets:
{chr(10).join(sets)}
---
"""
