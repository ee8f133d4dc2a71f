"""Checks Kueue's webhooks make beyond field types, as field errors."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from kueuestream.admission.api.batch import Job
from kueuestream.admission.api.config import Configuration
from kueuestream.admission.api.core import LIMIT_TYPES, LimitRange, RuntimeClass
from kueuestream.admission.api.kueue import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    Workload,
)
from kueuestream.admission.errors import FieldError
from kueuestream.admission.jobs import (
    INT32_MAX,
    MAX_EXEC_TIME_LABEL,
    MIN_PARALLELISM_ANNOTATION,
    atoi,
    min_parallelism,
    pods_count,
)
from kueuestream.admission.multikueue.validation import validate_multikueue_settings
from kueuestream.admission.names import subdomain_problem

MAX_RESOURCE_GROUPS = 16
MAX_FLAVORS = 64
MAX_POD_SETS = 8
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _prefixed_name_problem(value: str) -> str | None:
    """What every prefixed name must satisfy: not empty, at most 253, a DNS subdomain prefix."""
    if not value:
        return "must not be empty"
    if len(value) > 253:
        return f"must be no more than 253 characters, got {len(value)}"
    prefix, slash, _ = value.rpartition("/")
    if slash and not _DNS_SUBDOMAIN.fullmatch(prefix):
        return (
            f"prefix {prefix!r} must be a DNS subdomain: lower-case alphanumerics, '-' and '.', "
            "starting and ending with an alphanumeric"
        )
    return None


def qualified_name_problem(value: str) -> str | None:
    """A Kubernetes qualified name: an optional DNS subdomain prefix and '/', then a label."""
    if problem := _prefixed_name_problem(value):
        return problem
    label = value.rpartition("/")[2]
    if not _DNS_LABEL.fullmatch(label) or len(label) > 63:
        return (
            f"name {label!r} must be a DNS label: lower-case alphanumerics or '-', "
            "starting and ending with an alphanumeric, at most 63 characters"
        )
    return None


def _resource_groups(groups: Sequence[ResourceGroup], base: str, has_parent: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    if len(groups) > MAX_RESOURCE_GROUPS:
        errors.append(FieldError(base, f"at most {MAX_RESOURCE_GROUPS} resource groups, got {len(groups)}"))
    seen_resources: dict[str, int] = {}
    seen_flavors: dict[str, int] = {}
    for gi, group in enumerate(groups):
        gpath = f"{base}[{gi}]"
        if not group.covered_resources:
            errors.append(FieldError(f"{gpath}.coveredResources", "must list at least one resource"))
        for ri, res in enumerate(group.covered_resources):
            if res in seen_resources:
                errors.append(
                    FieldError(
                        f"{gpath}.coveredResources[{ri}]",
                        f"resource {res} is already covered by resourceGroups[{seen_resources[res]}]; "
                        "a resource may belong to one resource group only",
                    )
                )
            seen_resources.setdefault(res, gi)
        if not group.flavors:
            errors.append(FieldError(f"{gpath}.flavors", "must list at least one flavor"))
        if len(group.flavors) > MAX_FLAVORS:
            errors.append(FieldError(f"{gpath}.flavors", f"at most {MAX_FLAVORS} flavors"))
        for fi, flavor in enumerate(group.flavors):
            fpath = f"{gpath}.flavors[{fi}]"
            if flavor.name in seen_flavors:
                errors.append(
                    FieldError(
                        f"{fpath}.name",
                        f"flavor {flavor.name} already appears in "
                        f"resourceGroups[{seen_flavors[flavor.name]}]; "
                        "a flavor may appear in one resource group only",
                    )
                )
            seen_flavors.setdefault(flavor.name, gi)
            names = [r.name for r in flavor.resources]
            if names != list(group.covered_resources):
                errors.append(
                    FieldError(
                        f"{fpath}.resources",
                        f"must list exactly the covered resources in the same order "
                        f"{list(group.covered_resources)}, got {names}",
                    )
                )
            for qi, quota in enumerate(flavor.resources):
                qpath = f"{fpath}.resources[{qi}]"
                if quota.nominal_quota.value < 0:
                    errors.append(
                        FieldError(f"{qpath}.nominalQuota", f"must be >= 0, got {quota.nominal_quota}")
                    )
                if quota.borrowing_limit is not None:
                    if quota.borrowing_limit.value < 0:
                        errors.append(
                            FieldError(
                                f"{qpath}.borrowingLimit", f"must be >= 0, got {quota.borrowing_limit}"
                            )
                        )
                    if not has_parent:
                        errors.append(
                            FieldError(
                                f"{qpath}.borrowingLimit",
                                "must be unset when there is no cohort to borrow from",
                            )
                        )
                if quota.lending_limit is not None:
                    if quota.lending_limit.value < 0:
                        errors.append(
                            FieldError(f"{qpath}.lendingLimit", f"must be >= 0, got {quota.lending_limit}")
                        )
                    elif quota.lending_limit.value > quota.nominal_quota.value:
                        errors.append(
                            FieldError(
                                f"{qpath}.lendingLimit",
                                f"must be <= nominalQuota ({quota.nominal_quota}), got {quota.lending_limit}",
                            )
                        )
                    if not has_parent:
                        errors.append(
                            FieldError(
                                f"{qpath}.lendingLimit",
                                "must be unset when there is no cohort to lend to",
                            )
                        )
    return errors


def _weight(weight: Any, path: str) -> list[FieldError]:
    if weight is not None and weight.value < 0:
        return [FieldError(path, f"must be >= 0, got {weight}")]
    return []


def validate_resource_flavor(rf: ResourceFlavor) -> list[FieldError]:
    # KEP-8902: a weight multiplies a resource's share; zero or less would hide usage.
    return [
        FieldError(
            f"spec.resourceWeights[{resource}]",
            f"weight of {resource} must be greater than 0, got {weight}; "
            'use a positive quantity such as "1", "8" or "0.5"',
        )
        for resource, weight in sorted(rf.spec.resource_weights.items())
        if weight.value <= 0
    ]


def validate_cluster_queue(cq: ClusterQueue) -> list[FieldError]:
    spec = cq.spec
    errors = _resource_groups(spec.resource_groups, "spec.resourceGroups", bool(spec.cohort))
    if spec.cohort and (problem := qualified_name_problem(spec.cohort)) and "/" not in spec.cohort:
        errors.append(FieldError("spec.cohortName", problem))
    p = spec.preemption
    if p.borrow_within_cohort.policy != "Never" and p.reclaim_within_cohort == "Never":
        errors.append(
            FieldError(
                "spec.preemption.borrowWithinCohort.policy",
                "requires reclaimWithinCohort to be LowerPriority or Any",
            )
        )
    if spec.fair_sharing is not None:
        errors += _weight(spec.fair_sharing.weight, "spec.fairSharing.weight")
    errors += _admission_checks(cq)
    return errors


def _admission_checks(cq: ClusterQueue) -> list[FieldError]:
    """The checks a ClusterQueue names: each once, in one of the two fields, as names."""
    spec = cq.spec
    errors: list[FieldError] = []
    strategy = spec.admission_checks_strategy
    if spec.admission_checks and strategy is not None:
        errors.append(
            FieldError(
                "spec.admissionChecks",
                "cannot be used along with spec.admissionChecksStrategy; list the checks in one of them",
            )
        )
    named = [(f"spec.admissionChecks[{i}]", name) for i, name in enumerate(spec.admission_checks)]
    if strategy is not None:
        path = "spec.admissionChecksStrategy.admissionChecks"
        if len(strategy.admission_checks) > MAX_FLAVORS:
            errors.append(
                FieldError(path, f"at most {MAX_FLAVORS} rules, got {len(strategy.admission_checks)}")
            )
        for i, rule in enumerate(strategy.admission_checks):
            named.append((f"{path}[{i}].name", rule.name))
            if len(set(rule.on_flavors)) != len(rule.on_flavors):
                errors.append(FieldError(f"{path}[{i}].onFlavors", "lists a flavor more than once"))
    seen: set[str] = set()
    for path, name in named:
        if problem := subdomain_problem(name):
            errors.append(FieldError(path, problem))
        elif name in seen:
            errors.append(FieldError(path, f"AdmissionCheck {name!r} is listed more than once"))
        seen.add(name)
    return errors


def validate_admission_check(ac: AdmissionCheck) -> list[FieldError]:
    spec = ac.spec
    errors: list[FieldError] = []
    if not spec.controller_name:
        errors.append(FieldError("spec.controllerName", "must not be empty"))
    elif len(spec.controller_name) > 253:
        errors.append(
            FieldError(
                "spec.controllerName", f"must be no more than 253 characters, got {len(spec.controller_name)}"
            )
        )
    params = spec.parameters
    if params is not None:
        for field, value in (("apiGroup", params.api_group), ("kind", params.kind), ("name", params.name)):
            if not value:
                errors.append(FieldError(f"spec.parameters.{field}", "required field is missing"))
    return errors


def validate_cohort(cohort: Cohort) -> list[FieldError]:
    spec = cohort.spec
    errors = _resource_groups(spec.resource_groups, "spec.resourceGroups", bool(spec.parent_name))
    if spec.parent_name and spec.parent_name == cohort.metadata.name:
        errors.append(FieldError("spec.parentName", "a Cohort cannot be its own parent"))
    if spec.fair_sharing is not None:
        errors += _weight(spec.fair_sharing.weight, "spec.fairSharing.weight")
    return errors


def validate_local_queue(lq: LocalQueue) -> list[FieldError]:
    if not lq.spec.cluster_queue:
        return [FieldError("spec.clusterQueue", "required field is missing")]
    return []


def validate_workload(wl: Workload) -> list[FieldError]:
    errors: list[FieldError] = []
    max_exec = wl.spec.maximum_execution_time_seconds
    if max_exec is not None and not 0 < max_exec <= INT32_MAX:
        errors.append(
            FieldError(
                "spec.maximumExecutionTimeSeconds", f"must be between 1 and {INT32_MAX}, got {max_exec}"
            )
        )
    accumulated = wl.status.accumulated_past_execution_time_seconds
    if accumulated is not None and not -INT32_MAX - 1 <= accumulated <= INT32_MAX:
        errors.append(
            FieldError(
                "status.accumulatedPastExecutionTimeSeconds",
                f"must be a 32-bit whole number of seconds, got {accumulated}",
            )
        )
    pod_sets = wl.spec.pod_sets
    if not pod_sets:
        errors.append(FieldError("spec.podSets", "must list at least one pod set"))
    if len(pod_sets) > MAX_POD_SETS:
        errors.append(FieldError("spec.podSets", f"at most {MAX_POD_SETS} pod sets, got {len(pod_sets)}"))
    seen: set[str] = set()
    for i, ps in enumerate(pod_sets):
        path = f"spec.podSets[{i}]"
        if ps.name in seen:
            errors.append(FieldError(f"{path}.name", f"duplicate pod set name {ps.name!r}"))
        seen.add(ps.name)
        if not _DNS_LABEL.fullmatch(ps.name) or len(ps.name) > 63:
            errors.append(
                FieldError(
                    f"{path}.name",
                    f"{ps.name!r} must be a DNS label: lower-case alphanumerics or '-', "
                    "starting and ending with an alphanumeric, at most 63 characters",
                )
            )
        if ps.count < 0:
            errors.append(FieldError(f"{path}.count", f"must be >= 0, got {ps.count}"))
        if ps.min_count is not None and not 0 < ps.min_count <= ps.count:
            errors.append(
                FieldError(
                    f"{path}.minCount", f"must be between 1 and count ({ps.count}), got {ps.min_count}"
                )
            )
        for kind, containers in (
            ("containers", ps.template.spec.containers),
            ("initContainers", ps.template.spec.init_containers),
        ):
            for ci, c in enumerate(containers):
                for rname, q in sorted(c.resources.requests.items()):
                    if q.value < 0:
                        errors.append(
                            FieldError(
                                f"{path}.template.spec.{kind}[{ci}].resources.requests[{rname}]",
                                f"must be >= 0, got {q}",
                            )
                        )
    checks_seen: set[str] = set()
    for i, check in enumerate(wl.status.admission_checks):
        if check.name in checks_seen:
            errors.append(
                FieldError(
                    f"status.admissionChecks[{i}].name",
                    f"AdmissionCheck {check.name!r} is listed more than once",
                )
            )
        checks_seen.add(check.name)
    return errors


def validate_limit_range(lr: LimitRange) -> list[FieldError]:
    """What the API server requires of each item's ``type`` (core/v1 validation)."""
    errors: list[FieldError] = []
    for i, item in enumerate(lr.spec.limits):
        path = f"spec.limits[{i}].type"
        if not item.type:
            errors.append(FieldError(path, f"required field is missing; one of {', '.join(LIMIT_TYPES)}"))
        elif item.type not in LIMIT_TYPES:
            errors.append(
                FieldError(path, f"unsupported value {item.type!r}; one of {', '.join(LIMIT_TYPES)}")
            )
    return errors


def validate_runtime_class(rc: RuntimeClass) -> list[FieldError]:
    if not rc.handler:
        return [FieldError("handler", "required field is missing")]
    return []


def validate_job(job: Job) -> list[FieldError]:
    errors: list[FieldError] = []
    if job.spec.parallelism is not None and job.spec.parallelism < 0:
        errors.append(FieldError("spec.parallelism", f"must be >= 0, got {job.spec.parallelism}"))
    # As Kueue's Job webhook checks it (validateCreateForMaxExecTime): Go's strconv.Atoi, then > 0.
    raw_max = job.metadata.labels.get(MAX_EXEC_TIME_LABEL)
    if raw_max is not None and (atoi(raw_max) or 0) <= 0:
        errors.append(
            FieldError(
                f"metadata.labels[{MAX_EXEC_TIME_LABEL}]",
                f"must be a whole number of seconds greater than 0, got {raw_max!r}",
            )
        )
    # As Kueue's Job webhook checks it (validatePartialAdmissionCreate).
    raw = job.metadata.annotations.get(MIN_PARALLELISM_ANNOTATION)
    if raw is not None:
        path = f"metadata.annotations[{MIN_PARALLELISM_ANNOTATION}]"
        minimum, pods = min_parallelism(job), pods_count(job)
        if minimum is None:
            errors.append(FieldError(path, f"must be a whole number of pods, got {raw!r}"))
        elif pods < 2:
            errors.append(FieldError(path, f"needs a Job of 2 or more pods; this one runs {pods}"))
        elif not 0 < minimum < pods:
            errors.append(
                FieldError(
                    path,
                    f"must be between 1 and {pods - 1} (fewer than the Job's {pods} pods), got {minimum}",
                )
            )
    return errors


def validate_configuration(config: Configuration) -> list[FieldError]:
    errors: list[FieldError] = []

    def device_name_problem(value: str) -> str | None:
        # KEP-2941: an optional DNS subdomain prefix and "/", then a name of lower-case
        # alphanumerics, '-' and '.' that starts and ends with an alphanumeric (the
        # seed's own classes are named like gpu.example.com); at most 253 characters.
        if problem := _prefixed_name_problem(value):
            return problem
        _, slash, name = value.rpartition("/")
        if not _DNS_SUBDOMAIN.fullmatch(name):
            return (
                f"name {name!r} must consist of lower-case alphanumerics, '-' and '.', "
                "starting and ending with an alphanumeric"
            )
        if slash and len(name) > 63:
            return f"name {name!r} after the prefix must be no more than 63 characters, got {len(name)}"
        return None

    mapping_names: dict[str, int] = {}
    seen: dict[str, tuple[int, str]] = {}
    for mi, mapping in enumerate(config.resources.device_class_mappings):
        path = f"resources.deviceClassMappings[{mi}]"
        if problem := device_name_problem(mapping.name):
            errors.append(FieldError(f"{path}.name", problem))
        if mapping.name in mapping_names:
            errors.append(
                FieldError(
                    f"{path}.name",
                    f"duplicate mapping name {mapping.name}, already used by "
                    f"resources.deviceClassMappings[{mapping_names[mapping.name]}]",
                )
            )
        mapping_names.setdefault(mapping.name, mi)
        if not mapping.device_class_names:
            errors.append(FieldError(f"{path}.deviceClassNames", "must list at least one device class"))
        for ci, cls in enumerate(mapping.device_class_names):
            cpath = f"{path}.deviceClassNames[{ci}]"
            if problem := device_name_problem(cls):
                errors.append(FieldError(cpath, problem))
            if cls not in seen:
                seen[cls] = (mi, mapping.name)
                continue
            first_index, first_name = seen[cls]
            if first_index == mi:
                errors.append(
                    FieldError(cpath, f"device class {cls} is listed twice in mapping {mapping.name}")
                )
            else:
                errors.append(
                    FieldError(
                        cpath,
                        f"device class {cls} is mapped by both {first_name} "
                        f"(resources.deviceClassMappings[{first_index}]) and {mapping.name} "
                        f"(resources.deviceClassMappings[{mi}]); "
                        "a device class may map to one resource name only",
                    )
                )
    if config.fair_sharing is not None:
        strategies = list(config.fair_sharing.preemption_strategies)
        allowed = (
            ["LessThanOrEqualToFinalShare"],
            ["LessThanInitialShare"],
            ["LessThanOrEqualToFinalShare", "LessThanInitialShare"],
        )
        if strategies not in allowed:
            errors.append(
                FieldError(
                    "fairSharing.preemptionStrategies",
                    f"unsupported combination {strategies}; accepted: "
                    "[LessThanOrEqualToFinalShare], [LessThanInitialShare], "
                    "or [LessThanOrEqualToFinalShare, LessThanInitialShare]",
                )
            )
    if config.multi_kueue is not None:
        errors += validate_multikueue_settings(config.multi_kueue)
    return errors


def config_warnings(config: Configuration) -> list[str]:
    if config.quota_check == "OnlyDeclared" and config.resources.exclude_resource_prefixes:
        return [
            "resources.excludeResourcePrefixes is ignored because resources.quotaCheck is "
            "OnlyDeclared: only the resources a ClusterQueue covers are checked"
        ]
    return []
