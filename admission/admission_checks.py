"""Admission checks: which a Workload needs, the states their controllers report, and the messages.

A ClusterQueue names AdmissionChecks, each for every flavor or for some
(Kueue's ``NewAdmissionChecks``, pkg/util/admissioncheck). A Workload needs a
check once its admission uses one of the check's flavors; before it has an
admission, only the checks that apply to all of the ClusterQueue's flavors
(``AdmissionChecksForWorkload``). Its ``status.admissionChecks`` lists exactly
those, by name, new ones ``Pending`` (``syncAdmissionCheckConditions``). The
checks' controllers are not part of the core: their states arrive with the
Workload's watch events, and are taken unless they are older than what the
engine already holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kueuestream.admission.api.kueue import AdmissionCheckState, ClusterQueueSpec
from kueuestream.admission.timefmt import rfc3339

PENDING = "Pending"
READY = "Ready"
RETRY = "Retry"
REJECTED = "Rejected"
# The message of a check an eviction put back to Pending, followed by the state it had.
RESET_MESSAGE = "Reset to Pending after eviction. Previously: "

# Controllers whose checks Kueue's cache holds to extra rules (pkg/cache/scheduler clusterqueue.go).
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"

# Check name -> the flavors it applies to.
CheckFlavors = Mapping[str, frozenset[str]]


@dataclass(slots=True)
class CheckState:
    """One entry of ``status.admissionChecks``."""

    name: str
    state: str
    time_ms: int
    message: str = ""
    requeue_after_seconds: int | None = None
    retry_count: int | None = None
    pod_set_updates: list[dict[str, Any]] = field(default_factory=list)
    # The state an eviction reset and its transition time to the second; not part of the status.
    replaced: tuple[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "state": self.state,
            "lastTransitionTime": rfc3339(self.time_ms),
            "message": self.message,
        }
        if self.requeue_after_seconds is not None:
            out["requeueAfterSeconds"] = self.requeue_after_seconds
        if self.retry_count is not None:
            out["retryCount"] = self.retry_count
        if self.pod_set_updates:
            out["podSetUpdates"] = self.pod_set_updates
        return out


def all_flavors(spec: ClusterQueueSpec) -> frozenset[str]:
    return frozenset(f.name for group in spec.resource_groups for f in group.flavors)


def cluster_queue_checks(spec: ClusterQueueSpec) -> dict[str, frozenset[str]]:
    """The checks a ClusterQueue requires and their flavors (Kueue's ``NewAdmissionChecks``).

    A rule without ``onFlavors``, and every name in v1beta1's ``admissionChecks``
    (which Kueue converts to such rules), applies to all the ClusterQueue's flavors.
    """
    every = all_flavors(spec)
    strategy = spec.admission_checks_strategy
    if strategy is not None:
        return {r.name: frozenset(r.on_flavors) if r.on_flavors else every for r in strategy.admission_checks}
    return {name: every for name in spec.admission_checks}


def required_checks(checks: CheckFlavors, every: frozenset[str], assigned: frozenset[str] | None) -> set[str]:
    """The checks a Workload needs (Kueue's ``AdmissionChecksForWorkload``).

    With an admission (``assigned`` its flavors): every check on one of them.
    Without one: the checks on all the ClusterQueue's flavors.
    """
    if assigned is None:
        return {name for name, flavors in checks.items() if flavors >= every}
    return {name for name, flavors in checks.items() if flavors & assigned}


def sync_checks(current: list[CheckState], required: set[str], now_ms: int) -> list[CheckState] | None:
    """``current`` with the missing required checks added as Pending and the others dropped, by name.

    Kueue's ``syncAdmissionCheckConditions``; None when nothing changes.
    """
    have = {c.name for c in current}
    if have == required:
        return None
    kept = [c for c in current if c.name in required]
    kept += [CheckState(name, PENDING, now_ms) for name in sorted(required - have)]
    return sorted(kept, key=lambda c: c.name)


def from_status(
    states: Iterable[AdmissionCheckState], parse_time: Callable[[str], int | None], now_ms: int
) -> list[CheckState]:
    """The check states a Workload arrived with, by name."""
    out = []
    for s in states:
        when = parse_time(s.last_transition_time) if s.last_transition_time else None
        out.append(
            CheckState(
                s.name,
                s.state,
                now_ms if when is None else when,
                s.message,
                s.requeue_after_seconds,
                s.retry_count,
                list(s.pod_set_updates),
            )
        )
    return sorted(out, key=lambda c: c.name)


def take_reported(
    current: list[CheckState],
    reported: Iterable[AdmissionCheckState],
    parse_time: Callable[[str], int | None],
    now_ms: int,
) -> bool:
    """Take the states the checks' controllers wrote; True when one changed.

    Like Kueue's ``SetAdmissionCheckState``: a new state moves the transition
    time (to the one reported, else now), and the message, requeue delay and pod
    set updates are the controller's. A report for a check the Workload does not need is
    ignored, and so is one whose transition time is older (by the second, as
    the API keeps it) than the state held: it is a stale copy of an earlier
    status, such as the echo of a status written before an eviction reset the
    checks. The state an eviction reset, reported with a transition time no
    newer than the one it had, is such an echo too, even in the second of the
    reset: taking it back would evict the Workload again at its next reservation.
    """
    by_name = {c.name: c for c in current}
    changed = False
    for s in reported:
        held = by_name.get(s.name)
        if held is None:
            continue
        when = parse_time(s.last_transition_time) if s.last_transition_time else None
        if when is not None and when < held.time_ms - held.time_ms % 1000:
            continue
        replaced = held.replaced
        if when is not None and replaced is not None and s.state == replaced[0] and when <= replaced[1]:
            continue
        if (s.state, s.message, s.requeue_after_seconds, s.pod_set_updates) == (
            held.state,
            held.message,
            held.requeue_after_seconds,
            held.pod_set_updates,
        ):
            continue
        if s.state != held.state:
            held.state = s.state
            held.time_ms = now_ms if when is None else when
            held.replaced = None
        held.message = s.message
        held.requeue_after_seconds = s.requeue_after_seconds
        held.pod_set_updates = list(s.pod_set_updates)
        changed = True
    return changed


def all_ready(checks: Iterable[CheckState]) -> bool:
    """Every check Ready, or none at all (Kueue's ``HasAllChecksReady``)."""
    return all(c.state == READY for c in checks)


def in_state(checks: Iterable[CheckState], state: str) -> list[CheckState]:
    return [c for c in checks if c.state == state]


def checks_message(checks: list[CheckState], state: str) -> str:
    """``AdmissionCheck(s) in <state> state: "a" (message); "b"``, by name.

    Kueue's ``buildAdmissionChecksMessage``.
    """
    parts = [
        f'"{c.name}" ({c.message})' if c.message else f'"{c.name}"'
        for c in sorted(checks, key=lambda c: c.name)
    ]
    noun = "AdmissionChecks" if len(checks) > 1 else "AdmissionCheck"
    return f"{noun} in {state} state: {'; '.join(parts)}"


def retry_time_ms(checks: Iterable[CheckState]) -> int | None:
    """The latest transition time plus requeue delay over the Retry checks (``GetMaxRetryTime``)."""
    times = [
        c.time_ms + c.requeue_after_seconds * 1000
        for c in checks
        if c.state == RETRY and c.requeue_after_seconds is not None
    ]
    return max(times) if times else None


def reset_on_eviction(checks: list[CheckState], now_ms: int) -> None:
    """Every check not Pending back to Pending, a Retry counted (Kueue's ``resetChecksOnEviction``)."""
    for c in checks:
        if c.state == PENDING:
            continue
        # Only a Retry is counted; any other state leaves no count behind.
        c.retry_count = (c.retry_count or 0) + 1 if c.state == RETRY else None
        c.replaced = (c.state, c.time_ms - c.time_ms % 1000)
        c.message = RESET_MESSAGE + c.state
        c.pod_set_updates = []
        c.state = PENDING
        c.time_ms = now_ms
