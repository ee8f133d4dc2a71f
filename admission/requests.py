"""What a pod set asks for, computed the way Kueue computes it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from kueuestream.admission.api.core import Container, PodSpec, ResourceRequirements
from kueuestream.admission.quantity import Quantity, exact_resource_value

Amounts = dict[str, int]
# Exact amounts while a pod is summed up; Kueue rounds once, per pod, at the end.
_Exact = dict[str, Fraction]


def requests_with_limits(resources: ResourceRequirements) -> dict[str, Quantity]:
    """The requests, a limit standing in for each missing one, as the API server defaults them.

    To be read, not changed: without limits it is ``resources.requests`` itself.
    """
    if not resources.limits:
        return resources.requests
    merged: dict[str, Quantity] = dict(resources.limits)
    merged.update(resources.requests)
    return merged


def _container_requests(container: Container) -> _Exact:
    return {name: q.value for name, q in requests_with_limits(container.resources).items()}


def containers_shape(spec: PodSpec) -> tuple[object, ...]:
    """Each container's and init container's requests, limits standing in for missing
    ones, and the overhead: the resource part of Kueue's ``utilpod.SpecShape``."""

    def each(containers: list[Container]) -> tuple[tuple[tuple[str, Fraction], ...], ...]:
        return tuple(tuple(sorted(_container_requests(c).items())) for c in containers)

    overhead = tuple(sorted((name, q.value) for name, q in spec.overhead.items()))
    pod = spec.resources
    pod_level = None if pod is None else tuple(sorted((name, q.value) for name, q in pod.requests.items()))
    return (each(spec.containers), each(spec.init_containers), overhead, pod_level)


def _add(into: _Exact, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        # Fraction arithmetic is slow: the first amount of a resource is taken as it is.
        before = into.get(name)
        into[name] = value if before is None else before + value


def _max(into: _Exact, other: Mapping[str, Fraction]) -> None:
    # As k8s maxResourceList: a resource not there yet is taken even at zero, so an init
    # container's request of 0 still names the resource the pod set asks for.
    for name, value in other.items():
        before = into.get(name)
        if before is None or value > before:
            into[name] = value


# The resources a pod may ask for as a whole (k8s IsSupportedPodLevelResource).
_POD_LEVEL = ("cpu", "memory")
_HUGE_PAGES = "hugepages-"


def _pod_level(spec: PodSpec) -> _Exact | None:
    """The pod-level requests that replace the containers' sum (KEP-2837), limits standing in for
    missing ones, or None when the pod sets none of the resources that may be asked for so."""
    resources = spec.resources
    if resources is None or not (resources.requests or resources.limits):
        return None
    found = {
        name: q.value
        for name, q in requests_with_limits(resources).items()
        if name in _POD_LEVEL or name.startswith(_HUGE_PAGES)
    }
    return found or None


def pod_requests(spec: PodSpec) -> Amounts:
    """Per-pod requests: max(sum of containers, each init container) plus overhead.

    Sidecars (init containers with restartPolicy Always) keep running, so they
    add to everything that starts after them, as the kubelet accounts them.
    The sum is exact (k8s PodRequests adds Quantities); only the per-pod total
    is rounded up to Kueue's int64 (millicores for cpu), as totalRequestsFromPodSets does.
    """
    pod_level = _pod_level(spec) if spec.resources is not None else None
    if pod_level is None and not spec.init_containers and not spec.overhead and len(spec.containers) == 1:
        # One container, the common case: its amounts are the pod's, with nothing to add.
        return {
            name: max(0, exact_resource_value(name, value))
            for name, value in _container_requests(spec.containers[0]).items()
        }
    total: _Exact = {}
    for container in spec.containers:
        _add(total, _container_requests(container))
    if pod_level is None and not spec.init_containers and not spec.overhead:
        return {name: max(0, exact_resource_value(name, value)) for name, value in total.items()}
    sidecars: _Exact = {}
    init_peak: _Exact = {}
    for container in spec.init_containers:
        req = _container_requests(container)
        if container.restart_policy == "Always":
            _add(sidecars, req)
            continue
        running = dict(sidecars)
        _add(running, req)
        _max(init_peak, running)
    _add(total, sidecars)
    _max(total, init_peak)
    if pod_level is not None:
        # k8s PodRequests: what the pod asks for as a whole replaces its containers' sum.
        total.update(pod_level)
    _add(total, {name: q.value for name, q in spec.overhead.items()})
    return {name: max(0, exact_resource_value(name, value)) for name, value in total.items()}


def scale(amounts: Mapping[str, int], count: int) -> Amounts:
    return {name: value * count for name, value in amounts.items()}


def without_prefixes(amounts: Mapping[str, int], prefixes: Iterable[str]) -> Amounts:
    prefixes = tuple(prefixes)
    return {name: v for name, v in amounts.items() if not name.startswith(prefixes)}
