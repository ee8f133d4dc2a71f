"""What a namespace's LimitRanges and the cluster's RuntimeClasses add to a pod set, and refuse.

Kueue reads a Workload's pod templates the way the API server will admit its
pods (``workload.AdjustResources``), before counting their requests:

- a pod naming a RuntimeClass and setting no ``overhead`` gets the class's
  ``overhead.podFixed`` (``handlePodOverhead``; a class that does not exist
  changes nothing);
- every container and init container without a limit or a request of its own
  takes the ``default`` and ``defaultRequest`` of the namespace's
  ``Container`` LimitRanges (``handlePodLimitRange``), summarized as
  ``limitrange.Summarize`` does: the lowest ``max``, the highest ``min``, the
  first ``default`` and ``defaultRequest`` met, LimitRanges by name; a pod
  that sets pod-level ``resources`` (KEP-2837) takes those of the ``Pod``
  LimitRanges the same way;
- a limit with no request stands in for the request (``requests.py``).

Then it refuses to queue one whose requests the pods could never run with
(``workload.ValidateAdmissibility``): a request above its container's limit
(``ValidateResources``, pod-level resources too), or a container or pod
outside the namespace's LimitRanges (``ValidateLimitRange``). Both are
``Misconfigured``, with the message Kueue builds from its field errors.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kueuestream.admission.api.base import ApiModel
from kueuestream.admission.api.core import Container, LimitRange, PodSpec, ResourceRequirements, RuntimeClass
from kueuestream.admission.events import ObjectRef
from kueuestream.admission.quantity import Quantity, resource_value
from kueuestream.admission.requests import pod_requests, requests_with_limits

ResourceList = Mapping[str, Quantity]

INVALID_RESOURCES = "resources validation failed"
LIMIT_RANGE_UNSATISFIED = "resources didn't satisfy LimitRange constraints"
REQUEST_ABOVE_LIMIT = "requests must not exceed its limits"
ABOVE_MAX = "requests must not be above the limitRange max"
BELOW_MIN = "requests must not be below the limitRange min"


@dataclass(slots=True)
class LimitSummary:
    """The LimitRange items of one type, merged (an item of Kueue's ``limitrange.Summary``)."""

    max: dict[str, Quantity] = field(default_factory=dict)
    min: dict[str, Quantity] = field(default_factory=dict)
    default: dict[str, Quantity] = field(default_factory=dict)
    default_request: dict[str, Quantity] = field(default_factory=dict)


def _keep_first(into: dict[str, Quantity], other: ResourceList) -> None:
    for name, q in other.items():
        into.setdefault(name, q)


def _keep_min(into: dict[str, Quantity], other: ResourceList) -> None:
    for name, q in other.items():
        if name not in into or q.value < into[name].value:
            into[name] = q


def _keep_max(into: dict[str, Quantity], other: ResourceList) -> None:
    for name, q in other.items():
        if name not in into or q.value > into[name].value:
            into[name] = q


def summarize(ranges: Sequence[LimitRange]) -> dict[str, LimitSummary]:
    """Kueue's ``limitrange.Summarize``: per limit type, the lowest max, the highest min and
    the first default and default request of each resource, in the order given."""
    out: dict[str, LimitSummary] = {}
    for lr in ranges:
        for item in lr.spec.limits:
            summary = out.setdefault(item.type, LimitSummary())
            _keep_min(summary.max, item.max)
            _keep_max(summary.min, item.min)
            _keep_first(summary.default, item.default)
            _keep_first(summary.default_request, item.default_request)
    return out


def _values(resources: ResourceList) -> dict[str, int]:
    return {name: resource_value(name, q) for name, q in resources.items()}


def _greater(a: Mapping[str, int], b: Mapping[str, int]) -> list[str]:
    """Kueue's ``Requests.GreaterKeys``: the resources in both whose amount in ``a`` is larger, by name."""
    return sorted(name for name, value in a.items() if name in b and value > b[name])


def _field_error(path: str, names: list[str], message: str) -> str:
    # As apimachinery prints field.Invalid with a list value: JSON, no spaces.
    return f"{path}: Invalid value: {json.dumps(names, separators=(',', ':'))}: {message}"


def _aggregate(errors: list[str]) -> str:
    """An aggregate error's text: one error alone, else the distinct ones in brackets."""
    distinct = list(dict.fromkeys(errors))
    return distinct[0] if len(distinct) == 1 else "[" + ", ".join(distinct) + "]"


class PodResourceRules:
    """The cluster's LimitRanges and RuntimeClasses, and what they do to a Workload's pod sets."""

    def __init__(self) -> None:
        self.limit_ranges: dict[tuple[str, str], LimitRange] = {}
        self.runtime_classes: dict[str, RuntimeClass] = {}
        # How many LimitRanges each namespace holds, so one without any is skipped at once.
        self._ranges_in: dict[str, int] = {}
        # Per namespace, its LimitRanges summarized, until one of them changes.
        self._summaries: dict[str, dict[str, LimitSummary]] = {}

    def store(self, obj: ApiModel) -> bool:
        """Keep a LimitRange or RuntimeClass; whether ``obj`` was one."""
        if isinstance(obj, LimitRange):
            namespace, key = obj.metadata.namespace, (obj.metadata.namespace, obj.metadata.name)
            if key not in self.limit_ranges:
                self._ranges_in[namespace] = self._ranges_in.get(namespace, 0) + 1
            self.limit_ranges[key] = obj
            self._summaries.pop(namespace, None)
            return True
        if isinstance(obj, RuntimeClass):
            self.runtime_classes[obj.metadata.name] = obj
            return True
        return False

    def delete(self, ref: ObjectRef) -> bool:
        """Forget a LimitRange or RuntimeClass; whether one was forgotten."""
        if ref.kind == "LimitRange":
            if self.limit_ranges.pop((ref.namespace, ref.name), None) is None:
                return False
            self._summaries.pop(ref.namespace, None)
            left = self._ranges_in[ref.namespace] - 1
            if left:
                self._ranges_in[ref.namespace] = left
            else:
                del self._ranges_in[ref.namespace]
            return True
        if ref.kind == "RuntimeClass":
            return self.runtime_classes.pop(ref.name, None) is not None
        return False

    def limits_namespace(self, namespace: str) -> bool:
        """Whether any LimitRange is in ``namespace``."""
        return namespace in self._ranges_in

    def summary(self, namespace: str) -> dict[str, LimitSummary]:
        found = self._summaries.get(namespace)
        if found is None:
            ranges = [self.limit_ranges[key] for key in sorted(self.limit_ranges) if key[0] == namespace]
            found = self._summaries[namespace] = summarize(ranges)
        return found

    def adjusted(self, spec: PodSpec, namespace: str) -> PodSpec:
        """The pod spec as Kueue counts it: RuntimeClass overhead and LimitRange defaults added."""
        if not self.limit_ranges and not self.runtime_classes:
            return spec
        changes: dict[str, object] = {}
        if spec.runtime_class_name is not None and not spec.overhead:
            runtime_class = self.runtime_classes.get(spec.runtime_class_name)
            if runtime_class is not None and runtime_class.overhead is not None:
                changes["overhead"] = dict(runtime_class.overhead.pod_fixed)
        summary = self.summary(namespace) if namespace in self._ranges_in else {}
        container_range = summary.get("Container")
        if container_range is not None and (container_range.default or container_range.default_request):
            changes["init_containers"] = [_defaulted(c, container_range) for c in spec.init_containers]
            changes["containers"] = [_defaulted(c, container_range) for c in spec.containers]
        pod_range = summary.get("Pod")
        if spec.resources is not None and pod_range is not None:
            resources = _with_defaults(spec.resources, pod_range)
            if resources is not spec.resources:
                changes["resources"] = resources
        return spec.model_copy(update=changes) if changes else spec

    def problem(self, specs: Sequence[PodSpec], namespace: str, *, as_written: bool = False) -> str:
        """Why Kueue would not queue pods with these specs, or "" (``ValidateResources``, then
        ``ValidateLimitRange``).

        Its scheduler checks the specs :meth:`adjusted` gives; its workload
        controller, stamping the condition before any cycle, checks them
        ``as_written``, where a pod's total counts requests only.
        """
        errors: list[str] = []
        for i, spec in enumerate(specs):
            base = f"spec.podSets[{i}].template.spec"
            for kind, containers in (
                ("initContainers", spec.init_containers),
                ("containers", spec.containers),
            ):
                for j, container in enumerate(containers):
                    limits = container.resources.limits
                    if not limits:
                        continue
                    names = _greater(_values(requests_with_limits(container.resources)), _values(limits))
                    if names:
                        errors.append(_field_error(f"{base}.{kind}[{j}]", names, REQUEST_ABOVE_LIMIT))
            pod = spec.resources
            if (
                pod is not None
                and pod.limits
                and (names := _greater(_values(requests_with_limits(pod)), _values(pod.limits)))
            ):
                errors.append(_field_error(f"{base}.resources", names, REQUEST_ABOVE_LIMIT))
        if errors:
            return f"{INVALID_RESOURCES}: {_aggregate(errors)}"
        if namespace not in self._ranges_in:
            return ""
        summary = self.summary(namespace)
        for i, spec in enumerate(specs):
            errors += _outside_ranges(spec, summary, f"spec.podSets[{i}].template.spec", as_written)
        return f"{LIMIT_RANGE_UNSATISFIED}: {_aggregate(errors)}" if errors else ""


def _with_defaults(resources: ResourceRequirements, limits: LimitSummary) -> ResourceRequirements:
    new_limits = dict(resources.limits)
    _keep_first(new_limits, limits.default)
    new_requests = dict(resources.requests)
    _keep_first(new_requests, limits.default_request)
    if len(new_limits) == len(resources.limits) and len(new_requests) == len(resources.requests):
        return resources
    return resources.model_copy(update={"limits": new_limits, "requests": new_requests})


def _defaulted(container: Container, limits: LimitSummary) -> Container:
    resources = _with_defaults(container.resources, limits)
    if resources is container.resources:
        return container
    return container.model_copy(update={"resources": resources})


def _without_limits(container: Container) -> Container:
    resources = container.resources.model_copy(update={"limits": {}})
    return container.model_copy(update={"resources": resources})


def _requests_total(spec: PodSpec, as_written: bool) -> dict[str, int]:
    """The pod's requests as Kueue's ``NewRequestsFromPodSpec`` sums them: limits stand in
    for missing requests only once the spec was adjusted."""
    if not as_written:
        return pod_requests(spec)
    pod = spec.resources
    bare = spec.model_copy(
        update={
            "containers": [_without_limits(c) for c in spec.containers],
            "init_containers": [_without_limits(c) for c in spec.init_containers],
            "resources": None if pod is None else pod.model_copy(update={"limits": {}}),
        }
    )
    return pod_requests(bare)


def _outside_ranges(
    spec: PodSpec, summary: Mapping[str, LimitSummary], base: str, as_written: bool
) -> list[str]:
    """Kueue's ``Summary.ValidatePodSpec``: each container, then the pod, against its range."""
    errors: list[str] = []
    container_range = summary.get("Container")
    if container_range is not None:
        top, bottom = _values(container_range.max), _values(container_range.min)
        for kind, containers in (("initContainers", spec.init_containers), ("containers", spec.containers)):
            for j, container in enumerate(containers):
                requests, limits = requests_with_limits(container.resources), container.resources.limits
                low, high = dict(requests), dict(requests)
                _keep_min(low, limits)
                _keep_max(high, limits)
                path = f"{base}.{kind}[{j}]"
                if names := _greater(_values(high), top):
                    errors.append(_field_error(path, names, ABOVE_MAX))
                if names := _greater(bottom, _values(low)):
                    errors.append(_field_error(path, names, BELOW_MIN))
    pod_range = summary.get("Pod")
    if pod_range is not None:
        total = _requests_total(spec, as_written)
        if names := _greater(total, _values(pod_range.max)):
            errors.append(_field_error(base, names, ABOVE_MAX))
        if names := _greater(_values(pod_range.min), total):
            errors.append(_field_error(base, names, BELOW_MIN))
    return errors
