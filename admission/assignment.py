"""Flavor assignment: which flavor each requested resource is charged to.

Flavors are tried in the ClusterQueue's order within each resource group; a
flavor must accept the pod (node labels, taints) and have quota for every
resource of the group that the pod set asks for. flavorFungibility decides
whether a flavor that needs borrowing or preemption ends the search.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from kueuestream.admission.api.core import PodSpec
from kueuestream.admission.api.kueue import ResourceFlavor
from kueuestream.admission.pending_reasons import (
    EXCEEDS_MAX_QUOTA,
    NO_MATCHING_FLAVOR,
    WAITING_FOR_QUOTA,
    least_severe,
    most_severe,
)
from kueuestream.admission.quantity import resource_quantity
from kueuestream.admission.quota import FR, QuotaNode
from kueuestream.admission.selectors import flavor_matches_pod, format_taint, untolerated_taint


class Mode(IntEnum):
    NO_FIT = 0
    PREEMPT = 1
    FIT = 2


@dataclass(frozen=True, slots=True)
class GroupView:
    covered: tuple[str, ...]
    flavors: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class QueueView:
    """What flavor assignment needs to know about a ClusterQueue."""

    name: str
    node: QuotaNode
    groups: tuple[GroupView, ...]
    when_can_borrow: str
    when_can_preempt: str
    # Preemption can make room while borrowing (borrowWithinCohort or fair sharing).
    preempt_while_borrowing: bool
    # Some preemption policy could free quota at all.
    can_preempt: bool


@dataclass(frozen=True, slots=True)
class PodSetRequest:
    name: str
    count: int
    requests: Mapping[str, int]  # totals for the whole pod set
    spec: PodSpec


@dataclass(slots=True)
class PodSetAssignment:
    name: str
    count: int
    flavors: dict[str, str] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class Assignment:
    pod_sets: list[PodSetAssignment]
    mode: Mode
    borrows: bool
    usage: dict[FR, int]
    preempt_frs: set[FR]
    message: str = ""
    skipped_resources: list[str] = field(default_factory=list)
    # Why it does not fit at all (a granular QuotaReserved reason); "" unless mode is NO_FIT.
    no_fit_reason: str = ""


def _group_of(view: QueueView, resource: str) -> int | None:
    for index, group in enumerate(view.groups):
        if resource in group.covered:
            return index
    return None


def _fits_quota(
    view: QueueView, fr: FR, value: int, assumed: int, nominal: int, reasons: list[str]
) -> tuple[Mode, bool]:
    node = view.node
    flavor, resource = fr
    max_capacity = node.potential_available(fr)
    if value > max_capacity:
        reasons.append(
            f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets "
            f"requests ({resource_quantity(resource, assumed)}) + current podset request "
            f"({resource_quantity(resource, value - assumed)}) > maximum capacity "
            f"({resource_quantity(resource, max_capacity)})"
        )
        return Mode.NO_FIT, False
    borrow = node.parent is not None and node.borrowing_with(fr, value)
    available = node.available(fr)
    if value <= available:
        return Mode.FIT, borrow
    reasons.append(
        f"insufficient unused quota for {resource} in flavor {flavor}, "
        f"{resource_quantity(resource, value - available)} more needed"
    )
    if view.can_preempt and (value <= nominal or (borrow and view.preempt_while_borrowing)):
        return Mode.PREEMPT, borrow
    return Mode.NO_FIT, borrow


def _try_next(mode: Mode, borrows: bool, view: QueueView) -> bool:
    if mode == Mode.NO_FIT:
        return True
    if mode == Mode.PREEMPT and view.when_can_preempt == "TryNextFlavor":
        return True
    return borrows and view.when_can_borrow == "TryNextFlavor"


@dataclass(slots=True)
class _Choice:
    mode: Mode = Mode.NO_FIT
    borrows: bool = False
    flavors: dict[str, str] = field(default_factory=dict)
    modes: dict[FR, Mode] = field(default_factory=dict)
    # The least severe reason among the group's flavors that did not fit.
    no_fit_reason: str = ""


def _assign_group(
    view: QueueView,
    group: GroupView,
    requests: Mapping[str, int],
    pod: PodSpec,
    flavors: Mapping[str, ResourceFlavor],
    assumed: Mapping[FR, int],
    reasons: list[str],
) -> _Choice:
    best = _Choice()
    # Why each flavor tried did not fit; any one of them could take the pod set.
    no_fit: list[str] = []
    for flavor_name in group.flavors:
        flavor = flavors.get(flavor_name)
        if flavor is None:
            reasons.append(f"flavor {flavor_name} not found")
            no_fit.append(NO_MATCHING_FLAVOR)
            continue
        taint = untolerated_taint(flavor.spec.node_taints, [*pod.tolerations, *flavor.spec.tolerations])
        if taint is not None:
            reasons.append(f"untolerated taint {format_taint(taint)} in flavor {flavor_name}")
            no_fit.append(NO_MATCHING_FLAVOR)
            continue
        if not flavor_matches_pod(pod, flavor.spec.node_labels):
            reasons.append(f"flavor {flavor_name} doesn't match node affinity")
            no_fit.append(NO_MATCHING_FLAVOR)
            continue
        choice = _Choice(mode=Mode.FIT)
        # Every resource is checked, as Kueue does, so the message names all that are short.
        flavor_no_fit: list[str] = []
        for resource in sorted(requests):
            fr = (flavor_name, resource)
            quota = view.node.quotas.get(fr)
            nominal = quota.nominal if quota else 0
            prior = assumed.get(fr, 0)
            value = requests[resource] + prior
            mode, borrow = _fits_quota(view, fr, value, prior, nominal, reasons)
            if mode == Mode.NO_FIT:
                exceeds = value > view.node.potential_available(fr)
                flavor_no_fit.append(EXCEEDS_MAX_QUOTA if exceeds else WAITING_FOR_QUOTA)
            if choice.mode == Mode.NO_FIT:
                continue
            choice.mode = min(choice.mode, mode)
            choice.borrows = choice.borrows or borrow
            if choice.mode == Mode.NO_FIT:
                continue
            choice.flavors[resource] = flavor_name
            choice.modes[fr] = mode
        if choice.mode == Mode.NO_FIT:
            no_fit.append(most_severe(flavor_no_fit))
        if not _try_next(choice.mode, choice.borrows, view):
            choice.no_fit_reason = least_severe(no_fit)
            return choice
        if choice.mode > best.mode:
            best = choice
    best.no_fit_reason = least_severe(no_fit)
    return best


def assign_flavors(
    view: QueueView,
    pod_sets: Sequence[PodSetRequest],
    flavors: Mapping[str, ResourceFlavor],
    only_declared: bool,
) -> Assignment:
    result = Assignment(pod_sets=[], mode=Mode.FIT, borrows=False, usage={}, preempt_frs=set())
    skipped: set[str] = set()
    # One line per pod set that does not simply fit, as Kueue's ``Assignment.Message`` joins them.
    messages: list[str] = []
    for ps in pod_sets:
        by_group: dict[int, dict[str, int]] = {}
        for resource in sorted(ps.requests):
            amount = ps.requests[resource]
            if amount == 0:
                continue
            index = _group_of(view, resource)
            if index is None:
                if only_declared:
                    skipped.add(resource)
                    continue
                result.mode = Mode.NO_FIT
                messages.append(
                    f"couldn't assign flavors to pod set {ps.name}: "
                    f"resource {resource} unavailable in ClusterQueue"
                )
                result.message = "; ".join(messages)
                result.no_fit_reason = NO_MATCHING_FLAVOR
                return result
            by_group.setdefault(index, {})[resource] = amount
        psa = PodSetAssignment(name=ps.name, count=ps.count)
        reasons: list[str] = []
        # Every group must fit, so the pod set's reason is the most severe of theirs.
        group_reasons: list[str] = []
        for index in sorted(by_group):
            requests = by_group[index]
            said: list[str] = []
            choice = _assign_group(view, view.groups[index], requests, ps.spec, flavors, result.usage, said)
            if choice.mode != Mode.FIT:
                # A group that found a flavor that fits says nothing, as in Kueue.
                reasons += said
            group_reasons.append(choice.no_fit_reason)
            if choice.mode == Mode.NO_FIT:
                result.mode = Mode.NO_FIT
                messages.append(f"couldn't assign flavors to pod set {ps.name}: {', '.join(sorted(reasons))}")
                result.message = "; ".join(messages)
                result.no_fit_reason = most_severe(r for r in group_reasons if r) or NO_MATCHING_FLAVOR
                return result
            result.mode = min(result.mode, choice.mode)
            result.borrows = result.borrows or choice.borrows
            for resource, flavor_name in choice.flavors.items():
                psa.flavors[resource] = flavor_name
                psa.usage[resource] = requests[resource]
                fr = (flavor_name, resource)
                result.usage[fr] = result.usage.get(fr, 0) + requests[resource]
                if choice.modes[fr] == Mode.PREEMPT:
                    result.preempt_frs.add(fr)
        if reasons:
            messages.append(f"couldn't assign flavors to pod set {ps.name}: {', '.join(sorted(reasons))}")
        result.pod_sets.append(psa)
    result.message = "; ".join(messages)
    result.skipped_resources = sorted(skipped)
    return result
