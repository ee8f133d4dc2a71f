"""Flavor assignment: which flavor each requested resource is charged to.

Flavors are tried in the ClusterQueue's order within each resource group; a
flavor must accept the pod (node labels, taints) and have quota for every
resource of the group that the pod set asks for. flavorFungibility decides
whether a flavor that needs borrowing or preemption ends the search; one
where preemption would find no candidates never does.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from functools import lru_cache

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

PODS = "pods"


class Mode(IntEnum):
    NO_FIT = 0
    PREEMPT = 1
    FIT = 2


class Granular(IntEnum):
    """How a flavor can take a resource, worst first (Kueue's ``preemptionMode``)."""

    NO_FIT = 0
    # Quota would let preemption make room, but there is nothing to preempt.
    NO_CANDIDATES = 1
    # Room comes from preempting workloads of the same ClusterQueue.
    PREEMPT = 2
    # Room comes only from reclaiming quota other ClusterQueues borrowed.
    RECLAIM = 3
    FIT = 4

    @property
    def mode(self) -> Mode:
        if self == Granular.FIT:
            return Mode.FIT
        return Mode.NO_FIT if self == Granular.NO_FIT else Mode.PREEMPT


@dataclass(frozen=True, slots=True)
class FlavorMode:
    """A flavor's mode and borrowing level (Kueue's ``granularMode``)."""

    preemption: Granular
    borrowing: int


BEST = FlavorMode(Granular.FIT, 0)
WORST = FlavorMode(Granular.NO_FIT, sys.maxsize)
# Looked up once: the flavor search runs for every head of every cycle.
_FIT, _NO_FIT = Granular.FIT, Granular.NO_FIT
_MODE_OF = {g: g.mode for g in Granular}

# What preemption would do for one resource of a flavor: Kueue's
# ``preemptionOracle.SimulatePreemption``, given the pair and the amount the
# pod sets need in it; answers the mode and the borrowing level once the
# victims are gone.
Oracle = Callable[["FR", int], tuple[Granular, int]]


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
    preference: str | None = None
    # The resource group covering each resource, looked up for every pod set of every head.
    group_index: Mapping[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, int] = {}
        for number, group in enumerate(self.groups):
            for resource in group.covered:
                index.setdefault(resource, number)
        object.__setattr__(self, "group_index", index)


@dataclass(frozen=True, slots=True)
class PodSetRequest:
    name: str
    count: int
    requests: Mapping[str, int]  # totals for the whole pod set
    spec: PodSpec
    # The fewest pods the pod set may run with (partial admission); None means all.
    min_count: int | None = None
    per_pod: Mapping[str, int] = field(default_factory=dict)

    def scaled_to(self, count: int) -> PodSetRequest:
        """The same pod set with ``count`` pods (Kueue's ``PodSetResources.ScaledTo``)."""
        requests = {name: value * count for name, value in self.per_pod.items()}
        return PodSetRequest(self.name, count, requests, self.spec, self.min_count, self.per_pod)


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
    # How high in the cohort tree the assignment borrows: 0 within the
    # ClusterQueue's own quota (Kueue's ``Assignment.Borrowing``).
    borrowing: int
    usage: dict[FR, int]
    preempt_frs: set[FR]
    message: str = ""
    skipped_resources: list[str] = field(default_factory=list)
    # Why it does not fit at all (a granular QuotaReserved reason); "" unless mode is NO_FIT.
    no_fit_reason: str = ""
    # Where the flavor search stopped, per pod set tried: each assigned resource's
    # flavor index, or -1 when the search reached the group's last flavor (Kueue's
    # ``LastTriedFlavorIdx``). A pod set that found no flavor has an empty entry, and
    # the pod sets after it none.
    tried: list[dict[str, int]] = field(default_factory=list)
    # Per pod set whose search resumed, the flavor each resumed group's previous search stopped at.
    resumed_after: dict[str, list[str]] = field(default_factory=dict)


def pending_flavors(tried: Sequence[Mapping[str, int]]) -> bool:
    """Whether a search stopped before its group's last flavor (Kueue's ``PendingFlavors``)."""
    return any(index != -1 for indexes in tried for index in indexes.values())


def no_candidates(fr: FR, value: int) -> tuple[Granular, int]:
    """The oracle of a ClusterQueue whose preemption policies are all Never."""
    return Granular.NO_CANDIDATES, 0


def _fits_quota(
    view: QueueView,
    fr: FR,
    value: int,
    assumed: int,
    nominal: int,
    reasons: list[str],
    oracle: Oracle,
) -> tuple[Granular, int]:
    """How the flavor can take ``value`` of the pair (Kueue's ``fitsResourceQuota``)."""
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
        return _NO_FIT, 0
    borrowing, may_reclaim_in_tree = node.borrowing_height(fr, value)
    available = max(0, node.available(fr))
    if value <= available:
        return _FIT, borrowing
    reasons.append(
        f"insufficient unused quota for {resource} in flavor {flavor}, "
        f"{resource_quantity(resource, value - available)} more needed"
    )
    if value <= nominal or may_reclaim_in_tree or view.preempt_while_borrowing:
        if not view.can_preempt:
            # Every policy is Never: the simulation could not find a single candidate.
            return Granular.NO_CANDIDATES, borrowing
        preemption, after = oracle(fr, value)
        return preemption, borrowing if preemption == Granular.NO_CANDIDATES else after
    return _NO_FIT, borrowing


def is_preferred(a: FlavorMode, b: FlavorMode, preference: str | None) -> bool:
    """Whether mode ``a`` beats ``b`` under the fungibility preference (Kueue's ``isPreferred``)."""
    if a.preemption == Granular.NO_FIT:
        return False
    if b.preemption == Granular.NO_FIT:
        return True
    a_none, b_none = a.preemption == Granular.NO_CANDIDATES, b.preemption == Granular.NO_CANDIDATES
    if a_none != b_none:
        return not a_none
    if preference == "PreemptionOverBorrowing":
        if a.borrowing != b.borrowing:
            return a.borrowing < b.borrowing
        return a.preemption > b.preemption
    if a.preemption != b.preemption:
        return a.preemption > b.preemption
    return a.borrowing < b.borrowing


def should_try_next_flavor(mode: FlavorMode, when_can_borrow: str, when_can_preempt: str) -> bool:
    """Whether the search goes on past a flavor in ``mode`` (Kueue's ``shouldTryNextFlavor``).

    A flavor that does not fit, or where preemption would find no candidates,
    never ends the search, whatever the policies say.
    """
    if mode.preemption in (Granular.NO_FIT, Granular.NO_CANDIDATES):
        return True
    if mode.preemption in (Granular.PREEMPT, Granular.RECLAIM) and when_can_preempt == "TryNextFlavor":
        return True
    return mode.borrowing > 0 and when_can_borrow == "TryNextFlavor"


@dataclass(slots=True)
class _Choice:
    mode: FlavorMode = WORST
    flavors: dict[str, str] = field(default_factory=dict)
    modes: dict[FR, Mode] = field(default_factory=dict)
    borrowing: int = 0
    # The least severe reason among the group's flavors that did not fit.
    no_fit_reason: str = ""
    # The index of the flavor the search stopped at, or -1 when it reached the last one.
    tried: int = -1


@lru_cache(maxsize=1024)
def request_order(resource: str) -> tuple[int, str]:
    """Where ``resource`` comes among a pod set's requests in Kueue's ``SliceRequests``.

    With ``VectorizedResourceRequests`` (beta, on by default since 0.19) requests
    are kept sorted by the 64-bit FNV-1a hash of the resource name, then by name.
    """
    digest = 0xCBF29CE484222325
    for byte in resource.encode():
        digest = ((digest ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return digest, resource


def _assign_group(
    view: QueueView,
    group: GroupView,
    requests: Mapping[str, int],
    pod: PodSpec,
    flavors: Mapping[str, ResourceFlavor],
    assumed: Mapping[FR, int],
    reasons: list[str],
    oracle: Oracle,
    start: int = 0,
) -> _Choice:
    """The flavor for one resource group (Kueue's ``findFlavorForPodSets``).

    The search begins at flavor index ``start``, where an earlier cycle's left off.
    """
    best = _Choice()
    # Why each flavor tried did not fit; any one of them could take the pod set.
    no_fit: list[str] = []
    last = len(group.flavors) - 1
    for index in range(start, last + 1):
        flavor_name = group.flavors[index]
        flavor = flavors.get(flavor_name)
        if flavor is None:
            reasons.append(f"flavor {flavor_name} not found")
            no_fit.append(NO_MATCHING_FLAVOR)
            continue
        taints = flavor.spec.node_taints
        taint = untolerated_taint(taints, [*pod.tolerations, *flavor.spec.tolerations]) if taints else None
        if taint is not None:
            reasons.append(f"untolerated taint {format_taint(taint)} in flavor {flavor_name}")
            no_fit.append(NO_MATCHING_FLAVOR)
            continue
        if not flavor_matches_pod(pod, flavor.spec.node_labels):
            reasons.append(f"flavor {flavor_name} doesn't match node affinity")
            no_fit.append(NO_MATCHING_FLAVOR)
            continue
        choice = _Choice(mode=BEST)
        # Every resource is checked, as Kueue does, so the message names all that are short.
        flavor_no_fit: list[str] = []
        for resource in sorted(requests):
            fr = (flavor_name, resource)
            quota = view.node.quotas.get(fr)
            nominal = quota.nominal if quota else 0
            prior = assumed.get(fr, 0)
            value = requests[resource] + prior
            granular, borrowing = _fits_quota(view, fr, value, prior, nominal, reasons, oracle)
            if granular is _NO_FIT:
                exceeds = value > view.node.potential_available(fr)
                flavor_no_fit.append(EXCEEDS_MAX_QUOTA if exceeds else WAITING_FOR_QUOTA)
            if choice.mode.preemption is _NO_FIT:
                continue
            # The flavor is as good as its worst resource; one that fits in its own quota is no worse.
            if granular is not _FIT or borrowing:
                mode = FlavorMode(granular, borrowing)
                if is_preferred(choice.mode, mode, view.preference):
                    choice.mode = mode
                if choice.mode.preemption is _NO_FIT:
                    continue
            choice.flavors[resource] = flavor_name
            choice.modes[fr] = _MODE_OF[granular]
            if borrowing > choice.borrowing:
                choice.borrowing = borrowing
        if flavor_no_fit:
            no_fit.append(most_severe(flavor_no_fit))
        # A flavor that fits in the queue's own quota always ends the search.
        if choice.mode is BEST or not should_try_next_flavor(
            choice.mode, view.when_can_borrow, view.when_can_preempt
        ):
            choice.no_fit_reason = least_severe(no_fit)
            choice.tried = -1 if index == last else index
            return choice
        if is_preferred(choice.mode, best.mode, view.preference):
            best = choice
    best.no_fit_reason = least_severe(no_fit)
    return best


def assign_flavors(
    view: QueueView,
    pod_sets: Sequence[PodSetRequest],
    flavors: Mapping[str, ResourceFlavor],
    only_declared: bool,
    oracle: Oracle = no_candidates,
    resume: Sequence[Mapping[str, int]] = (),
) -> Assignment:
    """Flavors for every pod set (Kueue's ``FlavorAssigner.Assign``).

    ``oracle`` answers what preemption could do where quota is short; without
    one, preemption is taken to find no candidates. ``resume`` is where an
    earlier search stopped (its ``tried``): each group's search begins at the
    flavor after it (Kueue's ``NextFlavorToTryForPodSetResource``).
    """
    result = Assignment(pod_sets=[], mode=Mode.FIT, borrowing=0, usage={}, preempt_frs=set())
    skipped: set[str] = set()
    # One line per pod set that does not simply fit, as Kueue's ``Assignment.Message`` joins them.
    messages: list[str] = []
    # A ClusterQueue with quota for "pods" counts each pod set's pods as a request of it.
    group_index = view.group_index
    pods_group = group_index.get(PODS)
    for ps in pod_sets:
        by_group: dict[int, dict[str, int]] = {}
        asked = ps.requests if pods_group is None else {**ps.requests, PODS: ps.count}
        # Kueue walks a pod set's requests in its SliceRequests order, searching a
        # group's flavors when it reaches the group's first resource and stopping at
        # the first resource no group covers: that order decides which failure is told.
        steps: list[int | str] = []
        for resource in sorted(asked, key=request_order):
            amount = asked[resource]
            covering = group_index.get(resource)
            if covering is not None:
                # A group is searched for all it covers (filterRequestedResources), zero requests included.
                if covering not in by_group:
                    steps.append(covering)
                by_group.setdefault(covering, {})[resource] = amount
            # A request of zero for a resource the queue does not cover asks for nothing (#8079).
            elif amount != 0:
                if only_declared:
                    skipped.add(resource)
                elif not any(isinstance(step, str) for step in steps):
                    steps.append(resource)
        psa = PodSetAssignment(name=ps.name, count=ps.count)
        reasons: list[str] = []
        # Every group must fit, so the pod set's reason is the most severe of theirs.
        group_reasons: list[str] = []
        left_off = resume[len(result.tried)] if len(result.tried) < len(resume) else {}
        tried: dict[str, int] = {}
        for step in steps:
            if isinstance(step, str):
                result.mode = Mode.NO_FIT
                messages.append(
                    f"couldn't assign flavors to pod set {ps.name}: "
                    f"resource {step} unavailable in ClusterQueue"
                )
                result.message = "; ".join(messages)
                # The reason comes from the flavors the groups before it tried (resolveNoFitReason).
                result.no_fit_reason = most_severe(r for r in group_reasons if r) or NO_MATCHING_FLAVOR
                result.tried.append({})
                return result
            index = step
            requests = by_group[index]
            said: list[str] = []
            # Every resource of a group was charged to the same flavor, so any one tells where it stopped.
            start = left_off.get(min(requests), -1) + 1
            if 0 < start <= len(view.groups[index].flavors):
                result.resumed_after.setdefault(ps.name, []).append(view.groups[index].flavors[start - 1])
            choice = _assign_group(
                view, view.groups[index], requests, ps.spec, flavors, result.usage, said, oracle, start
            )
            group_reasons.append(choice.no_fit_reason)
            if choice.mode.preemption == Granular.NO_FIT:
                result.mode = Mode.NO_FIT
                # The failing group's status replaces what the groups before it said (assignFlavors).
                messages.append(f"couldn't assign flavors to pod set {ps.name}: {', '.join(sorted(said))}")
                result.message = "; ".join(messages)
                result.no_fit_reason = most_severe(r for r in group_reasons if r) or NO_MATCHING_FLAVOR
                # The groups that found a flavor count for nothing once one did not (Kueue's
                # assignFlavors drops the pod set's flavors).
                result.tried.append({})
                return result
            if choice.mode.preemption is not _FIT:
                # A group that found a flavor that fits says nothing, as in Kueue.
                reasons += said
            # The worst resource decides, even where the preference ranked the flavor by borrowing.
            result.mode = min(result.mode, *choice.modes.values())
            result.borrowing = max(result.borrowing, choice.borrowing)
            for resource, flavor_name in choice.flavors.items():
                tried[resource] = choice.tried
                psa.flavors[resource] = flavor_name
                psa.usage[resource] = requests[resource]
                fr = (flavor_name, resource)
                result.usage[fr] = result.usage.get(fr, 0) + requests[resource]
                if choice.modes[fr] == Mode.PREEMPT:
                    result.preempt_frs.add(fr)
        if reasons:
            messages.append(f"couldn't assign flavors to pod set {ps.name}: {', '.join(sorted(reasons))}")
        result.pod_sets.append(psa)
        result.tried.append(tried)
    result.message = "; ".join(messages)
    result.skipped_resources = sorted(skipped)
    return result
