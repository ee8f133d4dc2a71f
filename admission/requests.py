"""What a pod set asks for, computed the way Kueue computes it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from admission.api.core import Container, PodSpec
from admission.quantity import Quantity, resource_value

Amounts = dict[str, int]


def _container_requests(container: Container) -> Amounts:
    # A limit with no request stands in for the request, as the API server defaults it.
    merged: dict[str, Quantity] = dict(container.resources.limits)
    merged.update(container.resources.requests)
    return {name: resource_value(name, q) for name, q in merged.items()}


def _add(into: Amounts, other: Mapping[str, int]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, 0) + value


def _max(into: Amounts, other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > into.get(name, 0):
            into[name] = value


def pod_requests(spec: PodSpec) -> Amounts:
    """Per-pod requests: max(sum of containers, each init container) plus overhead.

    Sidecars (init containers with restartPolicy Always) keep running, so they
    add to everything that starts after them, as the kubelet accounts them.
    """
    total: Amounts = {}
    for container in spec.containers:
        _add(total, _container_requests(container))
    sidecars: Amounts = {}
    init_peak: Amounts = {}
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
    _add(total, {name: resource_value(name, q) for name, q in spec.overhead.items()})
    return total


def scale(amounts: Mapping[str, int], count: int) -> Amounts:
    return {name: value * count for name, value in amounts.items()}


def without_prefixes(amounts: Mapping[str, int], prefixes: Iterable[str]) -> Amounts:
    prefixes = tuple(prefixes)
    return {name: v for name, v in amounts.items() if not name.startswith(prefixes)}
