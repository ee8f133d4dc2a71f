"""Manifests and an engine driver for the fair-sharing tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kueuestream.admission import drs
from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action, Decision, Event, EventType
from tests.helpers import tick_through_wakeups

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "config" / "examples" / "drs"
GPU = "nvidia.com/gpu"
H100 = "h100-reserved"
A10 = "a10-spot"
V1B2 = "kueue.x-k8s.io/v1beta2"

Manifest = dict[str, Any]
# (covered resources, [(flavor, {resource: nominal quota})])
Group = tuple[Sequence[str], Sequence[tuple[str, Mapping[str, str | int]]]]


def flavor(
    name: str, labels: Mapping[str, str] | None = None, weights: Mapping[str, str] | None = None
) -> Manifest:
    spec: dict[str, Any] = {}
    if labels:
        spec["nodeLabels"] = dict(labels)
    if weights:
        spec["resourceWeights"] = dict(weights)
    return {"apiVersion": V1B2, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def gpu_flavors(weighted: bool) -> list[Manifest]:
    """h100-reserved (8x) and a10-spot (1x), as in the seed; without the weights when asked."""
    return [
        flavor(H100, {"accelerator": "nvidia-h100"}, {GPU: "8"} if weighted else None),
        flavor(A10, {"accelerator": "nvidia-a10"}, {GPU: "1"} if weighted else None),
    ]


def cluster_queue(
    name: str,
    cohort: str,
    groups: Sequence[Group],
    preemption: Mapping[str, Any] | None = None,
    weight: str | None = None,
) -> Manifest:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": list(covered),
                "flavors": [
                    {
                        "name": fl,
                        "resources": [{"name": r, "nominalQuota": str(q)} for r, q in quotas.items()],
                    }
                    for fl, quotas in flavors
                ],
            }
            for covered, flavors in groups
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    if preemption:
        spec["preemption"] = dict(preemption)
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def gpu_queue(
    name: str,
    cohort: str,
    quotas: Mapping[str, int],
    preemption: Mapping[str, Any] | None = None,
    weight: str | None = None,
) -> Manifest:
    """A ClusterQueue with one nvidia.com/gpu group, its flavors in the given order."""
    flavors = [(fl, {GPU: q}) for fl, q in quotas.items()]
    return cluster_queue(name, cohort, [([GPU], flavors)], preemption, weight)


def cohort(name: str, parent: str = "", weight: str | None = None) -> Manifest:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": V1B2, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def local_queue(namespace: str, name: str, cq: str) -> Manifest:
    return {
        "apiVersion": V1B2,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def _pod_set(count: int, requests: Mapping[str, str], selector: Mapping[str, str] | None) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": dict(requests)}}]}
    if selector:
        pod["nodeSelector"] = dict(selector)
    return {"name": "main", "count": count, "template": {"spec": pod}}


def pending(
    name: str,
    queue: str,
    requests: Mapping[str, str],
    *,
    count: int = 1,
    namespace: str = "default",
    priority: int = 0,
    created: str = "2026-01-01T00:00:00Z",
    selector: Mapping[str, str] | None = None,
) -> Manifest:
    return {
        "apiVersion": V1B2,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created},
        "spec": {"queueName": queue, "priority": priority, "podSets": [_pod_set(count, requests, selector)]},
    }


def admitted(
    name: str,
    cq: str,
    usage: Mapping[str, tuple[str, int]],
    *,
    namespace: str = "default",
    queue: str = "",
    priority: int = 0,
    created: str = "2026-01-01T00:00:00Z",
    reserved: str = "2026-01-01T00:00:00Z",
) -> Manifest:
    """A Workload already holding quota: ``usage`` maps resource -> (flavor, total amount)."""
    requests = {r: str(amount) for r, (_, amount) in usage.items()}
    return {
        "apiVersion": V1B2,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created},
        "spec": {
            "queueName": queue or cq,
            "priority": priority,
            "podSets": [_pod_set(1, requests, None)],
        },
        "status": {
            "admission": {
                "clusterQueue": cq,
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": 1,
                        "flavors": {r: fl for r, (fl, _) in usage.items()},
                        "resourceUsage": requests,
                    }
                ],
            },
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": f"Quota reserved in ClusterQueue {cq}",
                    "lastTransitionTime": reserved,
                },
                {
                    "type": "Admitted",
                    "status": "True",
                    "reason": "Admitted",
                    "message": "The workload is admitted",
                    "lastTransitionTime": reserved,
                },
            ],
        },
    }


def config(strategies: Sequence[str] | None = None, *, v1beta2: bool = False, **gates: bool) -> Manifest:
    fair: dict[str, Any] = {} if v1beta2 else {"enable": True}
    if strategies is not None:
        fair["preemptionStrategies"] = list(strategies)
    out: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2" if v1beta2 else "config.kueue.x-k8s.io/v1beta1",
        "kind": "Configuration",
        "fairSharing": fair,
    }
    if gates:
        out["featureGates"] = dict(gates)
    return out


def strip_weights(docs: Iterable[Manifest]) -> list[Manifest]:
    """The same objects with every ResourceFlavor's resourceWeights removed."""
    out = []
    for doc in docs:
        if doc.get("kind") == "ResourceFlavor":
            doc = {**doc, "spec": {k: v for k, v in doc.get("spec", {}).items() if k != "resourceWeights"}}
        out.append(doc)
    return out


def without(docs: Iterable[Manifest], *names: str) -> list[Manifest]:
    """The documents but the named objects."""
    return [d for d in docs if d.get("metadata", {}).get("name") not in names]


def replaced(docs: Iterable[Manifest], new: Manifest) -> list[Manifest]:
    """The documents with the object of ``new``'s kind and name replaced by it."""
    ident = (new["kind"], new["metadata"]["name"])
    out = [new if (d.get("kind"), d.get("metadata", {}).get("name")) == ident else d for d in docs]
    assert new in out
    return out


def with_uniform_weights(docs: list[Manifest]) -> list[Manifest]:
    """The same objects, every flavor weighing nvidia.com/gpu 2.5: the weights cancel."""
    return [
        {**d, "spec": {**d.get("spec", {}), "resourceWeights": {GPU: "2.5"}}}
        if d.get("kind") == "ResourceFlavor"
        else d
        for d in docs
    ]


def load_yaml(*paths: Path) -> list[Manifest]:
    docs: list[Manifest] = []
    for path in paths:
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


@dataclass
class Run:
    """An engine fed manifests in batches; evicted jobs stop at once, as in the embedded runtime."""

    engine: Engine = field(default_factory=Engine)
    time_ms: int = 1_000
    decisions: list[Decision] = field(default_factory=list)

    def load(self, docs: Sequence[Manifest]) -> list[Decision]:
        out: list[Decision] = []
        for i, doc in enumerate(docs):
            out += self.engine.apply(
                Event(EventType.UPSERT, self.time_ms, manifest=doc, batch=i < len(docs) - 1)
            )
        rejected = [d for d in out if d.action == Action.REJECTED]
        assert not rejected, rejected
        return self._settle(out)

    def _settle(self, out: list[Decision]) -> list[Decision]:
        evicted = [d for d in out if d.action == Action.EVICTED]
        while evicted:
            self.time_ms += 1_000
            more: list[Decision] = []
            for d in evicted:
                more += self.engine.apply(Event(EventType.STOPPED, self.time_ms, ref=d.ref))
            out += more
            evicted = [d for d in more if d.action == Action.EVICTED]
        more, self.time_ms = tick_through_wakeups(self.engine, self.time_ms)
        out += more
        self.decisions += out
        return out

    def workloads(self) -> dict[str, dict[str, Any]]:
        return {w["metadata"]["name"]: w for w in self.engine.workload_objects()}

    def condition(self, name: str, kind: str) -> dict[str, Any] | None:
        for cond in self.workloads()[name].get("status", {}).get("conditions", []):
            if cond["type"] == kind:
                return dict(cond)
        return None

    def is_admitted(self, name: str) -> bool:
        cond = self.condition(name, "QuotaReserved")
        return cond is not None and cond["status"] == "True"

    def admitted_in(self, cq: str) -> list[str]:
        return sorted(
            name
            for name, w in self.workloads().items()
            if self.is_admitted(name) and w["status"]["admission"]["clusterQueue"] == cq
        )

    def flavors_of(self, name: str) -> dict[str, str]:
        assignments = self.workloads()[name]["status"]["admission"]["podSetAssignments"]
        return dict(assignments[0]["flavors"])

    def evictions(self) -> list[tuple[str, str]]:
        """(victim, Preempted reason) for every preemption so far, in order."""
        out = []
        for d in self.decisions:
            if d.action == Action.EVICTED:
                preempted = [c for c in d.status.get("conditions", []) if c["type"] == "Preempted"]
                out.append((d.ref.name, preempted[0]["reason"] if preempted else ""))
        return out

    def share(self, name: str) -> drs.Share:
        node = self.engine.cqs[name].node if name in self.engine.cqs else self.engine.cohorts[name]
        return drs.share(node, drs.flavor_weights(self.engine.flavors))

    def statuses(self) -> dict[tuple[str, str], int]:
        return {k: v["weightedShare"] for k, v in self.engine.fair_sharing.statuses().items()}


def run(docs: Sequence[Manifest]) -> Run:
    r = Run()
    r.load(docs)
    return r
