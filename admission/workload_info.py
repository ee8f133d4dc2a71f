"""What scheduling needs to know about a Workload: its priority and what it requests.

Kueue computes the same once per Workload into a ``workload.Info``
(pkg/workload): the effective priority (``priority.Priority``), the total
requests of every pod set after excluded resource prefixes and DRA devices,
and the scheduling-equivalence hash of workloads that ask for the same thing.
"""

from __future__ import annotations

from kueuestream.admission import dra
from kueuestream.admission.api.core import PodSpec
from kueuestream.admission.api.kueue import Workload
from kueuestream.admission.assignment import PodSetRequest
from kueuestream.admission.cache import Cache
from kueuestream.admission.jobs import WORKLOAD_PRIORITY_CLASS_SOURCE
from kueuestream.admission.requests import containers_shape, pod_requests, scale, without_prefixes
from kueuestream.admission.state import WorkloadRecord

_NO_DEVICES = dra.Counted({}, "")


def resolve_priority(wl: Workload, workload_classes: dict[str, int], pod_classes: dict[str, int]) -> int:
    """``spec.priority``, else its priority class's value, else the first pod's; 0 without any."""
    spec = wl.spec
    if spec.priority is not None:
        return spec.priority
    ref = spec.priority_class_ref
    name = ref.name if ref and ref.name else spec.priority_class_name
    kind = ref.kind if ref and ref.kind else ""
    if name:
        from_workload_class = kind == "WorkloadPriorityClass" or (
            spec.priority_class_source == WORKLOAD_PRIORITY_CLASS_SOURCE
        )
        if from_workload_class or (not kind and name in workload_classes):
            if name in workload_classes:
                return workload_classes[name]
        elif name in pod_classes:
            return pod_classes[name]
    for ps in spec.pod_sets:
        pod = ps.template.spec
        if pod.priority is not None:
            return pod.priority
        if pod.priority_class_name in pod_classes:
            return pod_classes[pod.priority_class_name]
    return 0


def ensure_requests(rec: WorkloadRecord, cache: Cache) -> None:
    """Count what each pod set requests, unless nothing it depends on changed since last time.

    Sets ``rec.pod_sets`` and ``rec.equivalence``, or ``rec.pod_sets = None``
    with ``rec.requests_problem`` saying why the requests cannot be counted. The
    pod sets are read as Kueue's ``AdjustResources`` leaves them (RuntimeClass
    overhead, LimitRange defaults); ``rec.resources_problem`` says why Kueue
    would refuse them (see :mod:`pod_resource_rules`).
    """
    if rec.requests_generation == cache.requests_generation:
        return
    rec.requests_generation = cache.requests_generation
    rec.requests_problem = rec.resources_problem = rec.written_resources_problem = ""
    # A flavor search recorded for other requests says nothing about these.
    rec.last_assignment = None
    config = cache.config
    prefixes = config.resources.exclude_resource_prefixes
    # With only the declared resources counted, no prefix is excluded.
    excluded = prefixes if prefixes and config.quota_check != "OnlyDeclared" else None
    pod_sets = rec.obj.spec.pod_sets
    devices = _NO_DEVICES
    if config.gate("DynamicResourceAllocation") and any(ps.template.spec.resource_claims for ps in pod_sets):
        devices = cache.dra.count(rec.obj, config)
    if devices.problem:
        rec.pod_sets, rec.requests_problem = None, devices.problem
        return
    out: list[PodSetRequest] = []
    # What makes workloads interchangeable, per pod set.
    alike: list[tuple[object, ...]] = []
    rules, namespace = cache.pod_rules, rec.key[0]
    specs = [rules.adjusted(ps.template.spec, namespace) for ps in pod_sets]
    rec.resources_problem = rules.problem(specs, namespace)
    if rules.limits_namespace(namespace):
        written = [ps.template.spec for ps in pod_sets]
        rec.written_resources_problem = rules.problem(written, namespace, as_written=True)
    else:
        # Without LimitRanges the specs differ only by a RuntimeClass's overhead, which
        # only a Pod LimitRange would check.
        rec.written_resources_problem = rec.resources_problem
    for ps, spec in zip(pod_sets, specs, strict=True):
        per_pod = pod_requests(spec)
        if excluded:
            per_pod = without_prefixes(per_pod, excluded)
        if devices.per_pod:
            for resource, amount in devices.per_pod.get(ps.name, {}).items():
                per_pod[resource] = per_pod.get(resource, 0) + amount
        requests = scale(per_pod, ps.count)
        out.append(PodSetRequest(ps.name, ps.count, requests, spec, ps.min_count, per_pod))
        alike.append((ps.name, ps.count, ps.min_count, tuple(sorted(requests.items())), _shape(spec)))
    rec.pod_sets = out
    # No namespace: Kueue's computeSchedulingHash is the priority and the pod sets' shape, so
    # equivalent Workloads of a ClusterQueue may come from several namespaces.
    rec.equivalence = (rec.priority, tuple(alike))


def _shape(spec: PodSpec) -> object:
    """The pod spec as Kueue's ``computeSchedulingHash`` sees it (``utilpod.SpecShape``):
    each container's requests rather than their sum, init containers, overhead, the
    constraints that decide which flavors may take it, the pod priority and the
    resource claims. Two pod sets with the same total are not alike when one has a
    sidecar the other folds into its container."""
    plain = len(spec.containers) == 1 and not (spec.init_containers or spec.overhead or spec.resources)
    unconstrained = not spec.node_selector and spec.affinity is None and not spec.tolerations
    if plain and unconstrained and spec.priority is None and not spec.resource_claims:
        # The common case: the one container's requests are the pod set's, already in
        # the workload's equivalence; never the shape of any other case.
        return ""
    fields = {"node_selector", "affinity", "tolerations", "priority", "resource_claims"}
    return (containers_shape(spec), spec.model_dump_json(include=fields))
