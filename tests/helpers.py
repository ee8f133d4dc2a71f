"""Kueue manifests for the tests and benchmarks, and the pure engine driven with them.

The manifest builders the tests and benchmarks share, in one of two forms:

- YAML text (``flavor``, ``cluster_queue``, ``workload`` and the DRA builders), for
  tests that read like the manifests a user writes; they are joined with ``+`` and
  loaded with :meth:`Run.load` (the DRA tests: ``tests.dra.drive.Drive.load``). Their
  ``*_extra`` arguments are YAML lines, put in as they are.
- dicts (``*_manifest`` and the shortcuts built on them), for tests that compute
  their objects, change them, or send them as watch events; loaded with
  :meth:`Run.load_manifests` or :func:`run_manifests`.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kueuestream.admission import drs
from kueuestream.admission.api.config import Configuration
from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action, Decision, Event, EventType, ObjectRef
from kueuestream.admission.timefmt import rfc3339

# A Kueue scheduler-perf generator: one ClusterQueue of 2 cpus and two 1-cpu jobs.
TWO_JOBS = """
cohorts:
- className: cohort
  count: 1
  queuesSets:
  - className: cq
    count: 1
    nominalQuota: 2
    workloadsSets:
    - count: 2
      creationIntervalMs: 100
      workloads:
      - className: job
        runtimeMs: 1000
        priority: 0
        request: 1
"""

T0 = 1_700_000_000_000
# The namespace of the DRA and pipeline tests' objects.
NS = "team"
# One fixed moment: Workloads built as dicts tie on age unless a test says otherwise.
CREATED = "2026-01-01T00:00:00Z"

Manifest = dict[str, Any]


# ============================================================================
# reading manifests
# ============================================================================


def docs_of(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def load_yaml(*paths: Path) -> list[Manifest]:
    """Every document of the files, in order."""
    docs: list[Manifest] = []
    for path in paths:
        docs += docs_of(path.read_text())
    return docs


def created_at(seconds: int) -> str:
    """The creationTimestamp ``seconds`` after :data:`T0`."""
    return rfc3339(T0 + seconds * 1000)


# ============================================================================
# driving the engine
# ============================================================================


def tick_through_wakeups(engine: Engine, time_ms: int) -> tuple[list[Decision], int]:
    """Let time pass to each moment the engine asked for (parked workloads' retries).

    Evicted jobs stop at once on the way, as the embedded runtime has them do.
    Returns the decisions and the time reached.
    """
    out: list[Decision] = []
    while (wakeup := engine.next_wakeup_ms(deadlines=False)) is not None:
        time_ms = max(time_ms, wakeup)
        more = engine.apply(Event(EventType.TICK, time_ms))
        while more:
            out += more
            more = stop_evicted(engine, more, time_ms, at_once=False)
    return out, time_ms


def stop_evicted(
    engine: Engine, decisions: Sequence[Decision], time_ms: int, *, at_once: bool
) -> list[Decision]:
    """What the job controller makes of ``decisions``, as the runtime does: every evicted
    Workload's job stopped (one batch), then a TICK; nothing when none was evicted."""
    evicted = [d.ref for d in decisions if d.action == Action.EVICTED]
    if not evicted:
        return []
    out: list[Decision] = []
    for ref in evicted:
        out += engine.apply(Event(EventType.STOPPED, time_ms, ref=ref, batch=True, stopped_at_once=at_once))
    return out + engine.apply(Event(EventType.TICK, time_ms))


@dataclass
class Run:
    engine: Engine
    decisions: list[Decision] = field(default_factory=list)
    time_ms: int = T0
    # False: the stops come as a cluster's job integration reports them, not from the runtime.
    stops_at_once: bool = True

    def apply(self, event: Event) -> list[Decision]:
        """Apply one event, then play the job controller as the runtime does: the jobs of
        every Workload evicted stop at once, all of them, then a TICK goes on."""
        out: list[Decision] = []
        more = self.engine.apply(event)
        while True:
            out += more
            self.decisions += more
            if any(d.action == Action.EVICTED for d in more):
                more = stop_evicted(self.engine, more, self.time_ms, at_once=self.stops_at_once)
                continue
            # Parked workloads retry once their cohort's requeue is due, as time passes; a
            # test moves the time on past maximum execution times itself (pass_time).
            wakeup = self.engine.next_wakeup_ms(deadlines=False)
            if wakeup is None or event.batch:
                return out
            self.time_ms = max(self.time_ms, wakeup)
            more = self.engine.apply(Event(EventType.TICK, self.time_ms))

    def load(self, text: str) -> list[Decision]:
        return self.load_manifests(docs_of(text))

    def load_manifests(self, docs: Sequence[Manifest]) -> list[Decision]:
        """Apply the documents as one batch (like a listing), then let the engine settle."""
        out: list[Decision] = []
        for i, doc in enumerate(docs):
            out += self.apply(Event(EventType.UPSERT, self.time_ms, manifest=doc, batch=i < len(docs) - 1))
        return out

    def tick(self, ms: int = 1000) -> None:
        self.time_ms += ms

    def pass_time(self, ms: int) -> list[Decision]:
        """Move the time on by ``ms`` and let the engine see it (a clock TICK)."""
        self.time_ms += ms
        return self.apply(Event(EventType.TICK, self.time_ms))

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

    def is_admitted(self, name: str) -> bool:
        """Whether the Workload holds a quota reservation."""
        cond = self.condition(name, "QuotaReserved")
        return cond is not None and cond["status"] == "True"

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

    def admitted_in(self, cluster_queue: str) -> list[str]:
        """The Workloads holding quota in ``cluster_queue``, sorted."""
        return sorted(
            name
            for name, w in self.workloads().items()
            if self.is_admitted(name) and w["status"]["admission"]["clusterQueue"] == cluster_queue
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

    def rejected(self) -> list[Decision]:
        return [d for d in self.decisions if d.action == Action.REJECTED]

    def evictions(self) -> list[tuple[str, str]]:
        """(victim, Preempted reason) for every eviction so far, in order."""
        out = []
        for d in self.decisions:
            if d.action == Action.EVICTED:
                preempted = [c for c in d.status.get("conditions", []) if c["type"] == "Preempted"]
                out.append((d.ref.name, preempted[0]["reason"] if preempted else ""))
        return out

    def share(self, name: str) -> drs.Share:
        """The dominant resource share of a ClusterQueue or Cohort, as fair sharing computes it."""
        node = self.engine.cqs[name].node if name in self.engine.cqs else self.engine.cohorts[name]
        return drs.share(node, drs.flavor_weights(self.engine.flavors))

    def statuses(self) -> dict[tuple[str, str], int]:
        """status.fairSharing.weightedShare of every ClusterQueue and Cohort."""
        return {k: v["weightedShare"] for k, v in self.engine.fair_sharing.statuses().items()}


def run(text: str, config: Configuration | None = None, *, stops_at_once: bool = True) -> Run:
    r = Run(Engine(config), stops_at_once=stops_at_once)
    r.load(text)
    return r


def run_manifests(docs: Sequence[Manifest]) -> Run:
    """A run of the documents as one batch; the engine must accept every one of them."""
    r = Run(Engine())
    r.load_manifests(docs)
    assert not r.rejected(), r.rejected()
    return r


# ============================================================================
# YAML text builders
# ============================================================================


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


# ---------------------------------------------------------------- DRA (YAML text)


def dra_configuration(mappings: dict[str, list[str]], gates: dict[str, bool] | None = None) -> str:
    """A Configuration mapping device classes to logical resources (``resources.deviceClassMappings``)."""
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


def dra_queue(quotas: Mapping[str, int | str], namespace: str = NS) -> str:
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


def claim_template(
    name: str, requests: str, version: str = "v1beta1", namespace: str = NS, uid: str = ""
) -> str:
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
    """A DeviceClass selecting devices with the CEL ``expressions``."""
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
    """A ResourceSlice of ``driver`` publishing ``devices`` devices of ``pool`` (one slice per pool)."""
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


# (pod set name, pod count, [(claim name, template name)])
PodSetSpec = tuple[str, int, list[tuple[str, str]]]


def dra_workload(
    name: str,
    pod_sets: list[PodSetSpec],
    namespace: str = NS,
    cpu: str = "1",
) -> str:
    """A Workload in LocalQueue ``lq``; each pod set is (name, count, [(claim name, template name)]).

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


# ============================================================================
# dict builders
# ============================================================================

# (covered resources, [(flavor, {resource: nominal quota})])
ResourceGroup = tuple[Sequence[str], Sequence[tuple[str, Mapping[str, str | int]]]]


def kueue_api(version: str) -> str:
    return f"kueue.x-k8s.io/{version}"


def flavor_manifest(
    name: str,
    labels: Mapping[str, str] | None = None,
    weights: Mapping[str, str] | None = None,
    *,
    version: str = "v1beta2",
) -> Manifest:
    """A ResourceFlavor with ``nodeLabels`` and ``resourceWeights`` when given."""
    spec: dict[str, Any] = {}
    if labels:
        spec["nodeLabels"] = dict(labels)
    if weights:
        spec["resourceWeights"] = dict(weights)
    return {
        "apiVersion": kueue_api(version),
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": spec,
    }


def cohort_manifest(
    name: str, parent: str = "", weight: str | None = None, *, version: str = "v1beta2"
) -> Manifest:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": kueue_api(version), "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def cluster_queue_manifest(
    name: str,
    groups: Sequence[ResourceGroup],
    *,
    cohort: str = "",
    preemption: Mapping[str, Any] | None = None,
    weight: str | None = None,
    borrowing: int | None = None,
    spec: Mapping[str, Any] | None = None,
    version: str = "v1beta2",
) -> Manifest:
    """A ClusterQueue selecting every namespace.

    ``borrowing`` is every quota's borrowingLimit; ``spec`` holds further spec fields.
    The cohort is ``spec.cohort`` in v1beta1 and ``spec.cohortName`` in v1beta2.
    """

    def quota(resource: str, nominal: str | int) -> dict[str, Any]:
        out: dict[str, Any] = {"name": resource, "nominalQuota": str(nominal)}
        if borrowing is not None:
            out["borrowingLimit"] = str(borrowing)
        return out

    body: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": list(covered),
                "flavors": [
                    {"name": fl, "resources": [quota(r, q) for r, q in quotas.items()]}
                    for fl, quotas in flavors
                ],
            }
            for covered, flavors in groups
        ],
    }
    if cohort:
        body["cohort" if version == "v1beta1" else "cohortName"] = cohort
    if preemption:
        body["preemption"] = dict(preemption)
    if weight is not None:
        body["fairSharing"] = {"weight": weight}
    body.update(spec or {})
    return {
        "apiVersion": kueue_api(version),
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": body,
    }


def local_queue_manifest(
    name: str, cluster_queue: str, namespace: str = "default", *, version: str = "v1beta2"
) -> Manifest:
    return {
        "apiVersion": kueue_api(version),
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def workload_manifest(
    name: str,
    queue: str,
    requests: Mapping[str, str],
    *,
    count: int = 1,
    namespace: str = "default",
    priority: int | None = 0,
    created: str | None = CREATED,
    selector: Mapping[str, str] | None = None,
    version: str = "v1beta2",
) -> Manifest:
    """A Workload of one pod set ``main``, ``count`` pods each asking for ``requests``.

    ``priority=None`` and ``created=None`` leave spec.priority and the creationTimestamp out.
    """
    pod: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": dict(requests)}}]}
    if selector:
        pod["nodeSelector"] = dict(selector)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if created is not None:
        metadata["creationTimestamp"] = created
    spec: dict[str, Any] = {"queueName": queue}
    if priority is not None:
        spec["priority"] = priority
    spec["podSets"] = [{"name": "main", "count": count, "template": {"spec": pod}}]
    return {"apiVersion": kueue_api(version), "kind": "Workload", "metadata": metadata, "spec": spec}


def admitted_workload(
    name: str,
    cluster_queue: str,
    usage: Mapping[str, tuple[str, int]],
    *,
    namespace: str = "default",
    queue: str = "",
    priority: int = 0,
    created: str = CREATED,
    reserved: str = CREATED,
) -> Manifest:
    """A Workload already holding quota: ``usage`` maps resource -> (flavor, total amount)."""
    requests = {r: str(amount) for r, (_, amount) in usage.items()}
    manifest = workload_manifest(
        name, queue or cluster_queue, requests, namespace=namespace, priority=priority, created=created
    )
    manifest["status"] = {
        "admission": {
            "clusterQueue": cluster_queue,
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
                "message": f"Quota reserved in ClusterQueue {cluster_queue}",
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
    }
    return manifest


def finished_workload(manifest: Manifest) -> Manifest:
    """The Workload as the job controller reports it once its job completed."""
    status = {
        "conditions": [
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "Job finished successfully",
                "lastTransitionTime": "2024-01-01T12:00:00Z",
            }
        ]
    }
    return {**manifest, "status": status}


def configuration_manifest(
    *,
    version: str = "v1beta2",
    fair_sharing: Mapping[str, Any] | None = None,
    resources: Mapping[str, Any] | None = None,
    gates: Mapping[str, bool] | None = None,
) -> Manifest:
    """A Kueue Configuration with the given sections (``gates`` are its featureGates)."""
    out: Manifest = {"apiVersion": f"config.kueue.x-k8s.io/{version}", "kind": "Configuration"}
    if fair_sharing is not None:
        out["fairSharing"] = dict(fair_sharing)
    if resources is not None:
        out["resources"] = dict(resources)
    if gates:
        out["featureGates"] = dict(gates)
    return out


# ---------------------------------------------------------------- fair sharing: seed 002's GPUs

GPU = "nvidia.com/gpu"
H100 = "h100-reserved"
A10 = "a10-spot"


def gpu_flavors(weighted: bool) -> list[Manifest]:
    """h100-reserved (8x) and a10-spot (1x), as in seed 002; without the weights when asked."""
    return [
        flavor_manifest(H100, {"accelerator": "nvidia-h100"}, {GPU: "8"} if weighted else None),
        flavor_manifest(A10, {"accelerator": "nvidia-a10"}, {GPU: "1"} if weighted else None),
    ]


def gpu_queue(
    name: str,
    cohort: str,
    quotas: Mapping[str, int],
    preemption: Mapping[str, Any] | None = None,
    weight: str | None = None,
) -> Manifest:
    """A ClusterQueue with one nvidia.com/gpu group, its flavors in the given order."""
    flavors = [(fl, {GPU: q}) for fl, q in quotas.items()]
    return cluster_queue_manifest(
        name, [([GPU], flavors)], cohort=cohort, preemption=preemption, weight=weight
    )


def fair_sharing_config(
    strategies: Sequence[str] | None = None, *, v1beta2: bool = False, **gates: bool
) -> Manifest:
    """Fair sharing on: ``enable: true`` in v1beta1, the mere ``fairSharing`` stanza in v1beta2."""
    fair: dict[str, Any] = {} if v1beta2 else {"enable": True}
    if strategies is not None:
        fair["preemptionStrategies"] = list(strategies)
    return configuration_manifest(version="v1beta2" if v1beta2 else "v1beta1", fair_sharing=fair, gates=gates)


# ---------------------------------------------------------------- the pipeline's cpu clusters

# Kueue's default for the pipeline's queues: lower priorities go first, borrowers are reclaimed from.
PREEMPTING = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}


def cpu_queue(
    name: str,
    cpu: int,
    cohort: str = "",
    *,
    flavors: tuple[str, ...] = ("default",),
    borrowing: int | None = None,
    preemption: Mapping[str, Any] | None = None,
) -> Manifest:
    """A v1beta1 ClusterQueue of ``cpu`` cpus in each flavor (preempting as :data:`PREEMPTING` unless
    told), so that the pipeline tests also run Kueue's older API."""
    return cluster_queue_manifest(
        name,
        [(["cpu"], [(f, {"cpu": cpu}) for f in flavors])],
        cohort=cohort,
        preemption=preemption or PREEMPTING,
        borrowing=borrowing,
        version="v1beta1",
    )


def cpu_workload(
    name: str,
    queue: str,
    cpu: int,
    *,
    priority: int = 0,
    created_s: int = 0,
    count: int = 1,
    namespace: str = NS,
) -> Manifest:
    """A v1beta1 Workload of ``count`` pods asking for ``cpu`` cpus, created ``created_s`` s after T0."""
    return workload_manifest(
        name,
        queue,
        {"cpu": str(cpu)},
        count=count,
        namespace=namespace,
        priority=priority,
        created=created_at(created_s),
        version="v1beta1",
    )


def two_trees() -> list[Manifest]:
    """Two cohort trees (a: a1 a2 under root a, b: b1 under b) plus a lone ClusterQueue."""
    return [
        flavor_manifest("default"),
        flavor_manifest("spot"),
        cohort_manifest("a"),
        cohort_manifest("b"),
        cpu_queue("a1", 6, "a", flavors=("default", "spot")),
        cpu_queue("a2", 6, "a", flavors=("default", "spot")),
        cpu_queue("b1", 8, "b"),
        cpu_queue("solo", 4),
        local_queue_manifest("lq-a1", "a1", NS),
        local_queue_manifest("lq-a2", "a2", NS),
        local_queue_manifest("lq-b1", "b1", NS),
        local_queue_manifest("lq-solo", "solo", NS),
    ]


def moving_cluster(borrowing: int | None = 0) -> list[Manifest]:
    """Trees a (a1, a2) and b (b1), whose queues the handover tests move between them."""
    return [
        flavor_manifest("default"),
        cohort_manifest("a"),
        cohort_manifest("b"),
        cpu_queue("a1", 6, "a", borrowing=borrowing),
        cpu_queue("a2", 6, "a", borrowing=borrowing),
        cpu_queue("b1", 4, "b", borrowing=borrowing),
        local_queue_manifest("lq-a1", "a1", NS),
        local_queue_manifest("lq-a2", "a2", NS),
        local_queue_manifest("lq-b1", "b1", NS),
    ]


# ============================================================================
# changing lists of manifests
# ============================================================================


def strip_weights(docs: Iterable[Manifest]) -> list[Manifest]:
    """The same objects with every ResourceFlavor's resourceWeights removed."""
    out = []
    for doc in docs:
        if doc.get("kind") == "ResourceFlavor":
            doc = {**doc, "spec": {k: v for k, v in doc.get("spec", {}).items() if k != "resourceWeights"}}
        out.append(doc)
    return out


def with_uniform_weights(docs: list[Manifest]) -> list[Manifest]:
    """The same objects, every flavor weighing nvidia.com/gpu 2.5: the weights cancel."""
    return [
        {**d, "spec": {**d.get("spec", {}), "resourceWeights": {GPU: "2.5"}}}
        if d.get("kind") == "ResourceFlavor"
        else d
        for d in docs
    ]


def without(docs: Iterable[Manifest], *names: str) -> list[Manifest]:
    """The documents but the named objects."""
    return [d for d in docs if d.get("metadata", {}).get("name") not in names]


def replaced(docs: Iterable[Manifest], new: Manifest) -> list[Manifest]:
    """The documents with the object of ``new``'s kind and name replaced by it."""
    ident = (new["kind"], new["metadata"]["name"])
    out = [new if (d.get("kind"), d.get("metadata", {}).get("name")) == ident else d for d in docs]
    assert new in out
    return out


def queued_job(
    namespace: str,
    name: str,
    queue: str,
    cpu: str = "1",
    *,
    priority_class: str = "",
    node_selector: dict[str, str] | None = None,
) -> Manifest:
    """A suspended batch/v1 Job of one pod, queued to ``queue`` (Kueue's queue-name label)."""
    labels = {"kueue.x-k8s.io/queue-name": queue}
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node_selector:
        pod["nodeSelector"] = node_selector
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"suspend": True, "parallelism": 1, "completions": 1, "template": {"spec": pod}},
    }


def http_get(port: int, path: str) -> tuple[int, str, bytes]:
    """GET ``path`` from 127.0.0.1:``port``: the status, the Content-Type and the body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        reply = conn.getresponse()
        return reply.status, reply.getheader("Content-Type") or "", reply.read()
    finally:
        conn.close()
