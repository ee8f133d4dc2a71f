"""Driving the pure engine from YAML in tests, the way the embedded runtime does."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from kueuestream.admission.api.config import Configuration
from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action, Decision, Event, EventType, ObjectRef

T0 = 1_700_000_000_000


def tick_through_wakeups(engine: Engine, time_ms: int) -> tuple[list[Decision], int]:
    """Let time pass to each moment the engine asked for (parked workloads' retries).

    Evicted jobs stop at once on the way, as the embedded runtime has them do.
    Returns the decisions and the time reached.
    """
    out: list[Decision] = []
    while (wakeup := engine.next_wakeup_ms()) is not None:
        time_ms = max(time_ms, wakeup)
        more = engine.apply(Event(EventType.TICK, time_ms))
        while more:
            out += more
            evicted = [d.ref for d in more if d.action == Action.EVICTED]
            more = []
            for ref in evicted:
                more += engine.apply(Event(EventType.STOPPED, time_ms, ref=ref))
    return out, time_ms


def docs_of(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


@dataclass
class Run:
    engine: Engine
    decisions: list[Decision] = field(default_factory=list)
    time_ms: int = T0

    def apply(self, event: Event) -> list[Decision]:
        """Apply one event, then play the job controller: evicted jobs stop at once."""
        out = self.engine.apply(event)
        self.decisions += out
        queue = [d.ref for d in out if d.action == Action.EVICTED]
        while True:
            while queue:
                ref = queue.pop(0)
                more = self.engine.apply(Event(EventType.STOPPED, self.time_ms, ref=ref))
                self.decisions += more
                out += more
                queue += [d.ref for d in more if d.action == Action.EVICTED]
            # Parked workloads retry once their cohort's requeue is due, as time passes.
            wakeup = self.engine.next_wakeup_ms()
            if wakeup is None or event.batch:
                return out
            self.time_ms = max(self.time_ms, wakeup)
            more = self.engine.apply(Event(EventType.TICK, self.time_ms))
            self.decisions += more
            out += more
            queue += [d.ref for d in more if d.action == Action.EVICTED]

    def load(self, text: str) -> list[Decision]:
        docs = docs_of(text)
        out: list[Decision] = []
        for i, doc in enumerate(docs):
            out += self.apply(Event(EventType.UPSERT, self.time_ms, manifest=doc, batch=i < len(docs) - 1))
        return out

    def tick(self, ms: int = 1000) -> None:
        self.time_ms += ms

    def delete(self, kind: str, namespace: str, name: str) -> list[Decision]:
        return self.apply(Event(EventType.DELETE, self.time_ms, ref=ObjectRef(kind, namespace, name)))

    def finish(self, namespace: str, name: str) -> list[Decision]:
        ref = ObjectRef("Workload", namespace, name)
        return self.apply(Event(EventType.FINISHED, self.time_ms, ref=ref))

    def workloads(self) -> dict[str, dict[str, Any]]:
        return {w["metadata"]["name"]: w for w in self.engine.workload_objects()}

    def status(self, name: str) -> dict[str, Any]:
        status: dict[str, Any] = self.workloads()[name]["status"]
        return status

    def condition(self, name: str, type_: str) -> dict[str, Any] | None:
        for cond in self.status(name).get("conditions", []):
            if cond["type"] == type_:
                return dict(cond)
        return None

    def admitted(self) -> list[str]:
        return sorted(
            name
            for name, wl in self.workloads().items()
            if any(
                c["type"] == "QuotaReserved" and c["status"] == "True"
                for c in wl["status"].get("conditions", [])
            )
            and not any(
                c["type"] in ("Evicted", "Finished") and c["status"] == "True"
                for c in wl["status"].get("conditions", [])
            )
        )

    def pending_message(self, name: str) -> str:
        cond = self.condition(name, "QuotaReserved")
        assert cond is not None and cond["status"] == "False", cond
        return str(cond["message"])

    def flavors(self, name: str) -> dict[str, str]:
        psa = self.status(name)["admission"]["podSetAssignments"]
        out: dict[str, str] = {}
        for ps in psa:
            out.update(ps["flavors"])
        return out


def run(text: str, config: Configuration | None = None) -> Run:
    r = Run(Engine(config))
    r.load(text)
    return r


def flavor(name: str, labels: str = "{}", extra: str = "") -> str:
    return f"""
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {{name: {name}}}
spec:
  nodeLabels: {labels}
{extra}
---"""


def cluster_queue(
    name: str,
    quotas: str,
    cohort: str = "",
    covered: str = "[cpu]",
    spec_extra: str = "",
) -> str:
    """``quotas`` lists flavors as ``flavor: [{name: cpu, nominalQuota: 4}]`` YAML lines."""
    cohort_line = f"  cohort: {cohort}\n" if cohort else ""
    flavors = "\n".join(
        f"    - name: {line.split(':', 1)[0].strip()}\n      resources: {line.split(':', 1)[1].strip()}"
        for line in quotas.strip().splitlines()
    )
    return f"""
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
{cohort_line}  namespaceSelector: {{}}
{spec_extra}
  resourceGroups:
  - coveredResources: {covered}
    flavors:
{flavors}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: {name}-lq, namespace: default}}
spec: {{clusterQueue: {name}}}
---"""


def workload(
    name: str,
    queue: str,
    cpu: str = "1",
    count: int = 1,
    priority: int | None = None,
    created: str = "2024-01-01T00:00:00Z",
    extra_requests: str = "",
    pod_extra: str = "",
    namespace: str = "default",
) -> str:
    prio = f"  priority: {priority}\n" if priority is not None else ""
    return f"""
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {{name: {name}, namespace: {namespace}, creationTimestamp: "{created}"}}
spec:
  queueName: {queue}-lq
{prio}  podSets:
  - name: main
    count: {count}
    template:
      spec:
{pod_extra}        containers:
        - name: c
          resources:
            requests: {{cpu: "{cpu}"{extra_requests}}}
---"""
