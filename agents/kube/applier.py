"""The cluster applier: each decision written to its object's status subresource.

A Workload decision carries the whole ``status`` stanza the engine wants
(``status.admission`` and the conditions). The applier writes it as a JSON
merge patch of the status subresource that also carries the resourceVersion
it was computed from, so a write never lands on a version it has not seen:

- The conditions the decision names replace those of the same type; any
  other condition (one another controller set) is kept where it is.
  ``status.admission``, ``status.requeueState`` and
  ``status.accumulatedPastExecutionTimeSeconds`` are set, or removed when the
  decision has none.
- A Workload Kueue deactivates itself (an admission check rejected it, it
  ran out of its maximum execution time) gets ``spec.active: false`` once its
  status is written, as Kueue sets it.
- ``status.admissionChecks`` becomes the checks the decision lists, each the
  decision's entry unless the live one has another state and a transition
  time no older than the decision's: that state is a check controller's the
  engine has not seen yet, and it is kept. Unless the decision's entry is the
  reset of that very state (an eviction's "Reset to Pending after eviction.
  Previously: <state>", a Retry counted in ``retryCount``): the engine saw it,
  and the reset is written even in the second of the state it replaces.
- When the object already has that status, nothing is written (``Unchanged``).
- On 409 Conflict the object is read again and the decision re-applied to
  it, but only while it is still the newest decision the applier has for that
  object; otherwise it is dropped (``Superseded``), and so is a decision still
  waiting when a newer one about the same object arrives. Writes to one object
  are never concurrent, so an older decision can never overwrite a newer one.
- On 404 Not Found the object is gone (``Gone``), as is a ``Deleted``
  decision, which has nothing to write.
- A ``Rejected`` decision (an invalid object) is reported as ``Error`` with the
  engine's message; so is any write the server refuses.

ClusterQueue and Cohort decisions (``status.fairSharing``) are merged into
their status subresource the same way, without the resourceVersion: the
engine is their status's only writer.

Every outcome is handed to ``on_outcome`` as an :class:`AppliedRecord`, for
``kueue.applied``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kueuestream.admission import admission_checks as ac
from kueuestream.admission.events import Action
from kueuestream.admission.lifecycle import DEACTIVATED_DUE_TO, REACTIVATED
from kueuestream.admission.status import EVICTED, REQUEUED
from kueuestream.admission.timefmt import parse_rfc3339
from kueuestream.agents.kube.cache import Key, ObjectCache, resource_version
from kueuestream.agents.kube.rest import (
    CLUSTER_QUEUES,
    COHORTS,
    CONFLICT,
    NOT_FOUND,
    WORKLOADS,
    KubeObjects,
    Resource,
    reason_of,
    status_of,
)
from kueuestream.streams.schemas import AppliedRecord, ApplyOutcome, DecisionRecord

log = logging.getLogger(__name__)

Manifest = dict[str, Any]
OutcomeHook = Callable[[AppliedRecord], None]

RESOURCES: dict[str, Resource] = {"Workload": WORKLOADS, "ClusterQueue": CLUSTER_QUEUES, "Cohort": COHORTS}
DEFAULT_CONCURRENCY = 32
# Conflicts in a row on one object before the decision is reported as a Conflict.
MAX_CONFLICTS = 10


def merged_status(live: Manifest, decided: Manifest) -> Manifest:
    """The status a Workload should have: ``decided`` laid over the ``live`` status."""
    live_conditions = [c for c in live.get("conditions") or [] if isinstance(c, dict)]
    decided_conditions = [c for c in decided.get("conditions") or [] if isinstance(c, dict)]
    by_type = {c.get("type"): c for c in decided_conditions}
    conditions = [by_type.get(c.get("type"), c) for c in live_conditions]
    present = {c.get("type") for c in live_conditions}
    conditions += [c for c in decided_conditions if c.get("type") not in present]
    return {
        "admission": decided.get("admission"),
        "conditions": conditions,
        "requeueState": decided.get("requeueState"),
        "admissionChecks": _merged_checks(live.get("admissionChecks"), decided.get("admissionChecks"))
        or None,
        "accumulatedPastExecutionTimeSeconds": decided.get("accumulatedPastExecutionTimeSeconds"),
    }


def _merged_checks(live: Any, decided: Any) -> list[Manifest]:
    """The decided check states, but where a controller wrote a newer state since, that one."""
    live_by_name = {c.get("name"): c for c in live or [] if isinstance(c, dict)}
    out: list[Manifest] = []
    for entry in decided or []:
        current = live_by_name.get(entry.get("name"))
        newer = (
            current is not None
            and current.get("state") != entry.get("state")
            and _time(current.get("lastTransitionTime")) >= _time(entry.get("lastTransitionTime"))
            and not _resets(entry, current)
        )
        out.append(current if newer and current is not None else entry)
    return out


def _resets(entry: Manifest, current: Manifest) -> bool:
    """Whether the decided ``entry`` is the eviction's reset of the ``current`` state."""
    state = current.get("state")
    if not isinstance(state, str) or entry.get("message") != ac.RESET_MESSAGE + state:
        return False
    if state != ac.RETRY:
        return True
    # A Retry set again after the reset carries the count the reset left; the reset's is higher.
    return _count(entry.get("retryCount")) > _count(current.get("retryCount"))


def _count(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _time(value: Any) -> int:
    when = parse_rfc3339(value) if isinstance(value, str) else None
    return -1 if when is None else when


def needs_deactivation(live: Manifest, decided: Manifest) -> bool:
    """Whether the decided status evicts the Workload as Kueue deactivates it itself (a
    Rejected check, its maximum execution time: ``DeactivatedDueTo...``) and it was not
    reactivated since, while the live Workload is still active."""
    by_type = {c.get("type"): c for c in decided.get("conditions") or [] if isinstance(c, dict)}
    evicted = by_type.get(EVICTED) or {}
    requeued = by_type.get(REQUEUED) or {}
    reason = evicted.get("reason")
    deactivated = (
        evicted.get("status") == "True" and isinstance(reason, str) and reason.startswith(DEACTIVATED_DUE_TO)
    )
    reactivated = requeued.get("status") == "True" and requeued.get("reason") == REACTIVATED
    spec = live.get("spec") if isinstance(live.get("spec"), dict) else {}
    return deactivated and not reactivated and (spec or {}).get("active") is not False


def has_status(live: Manifest, wanted: Manifest) -> bool:
    """Whether the live status already holds everything ``wanted`` sets (None meaning absent)."""
    for key, value in wanted.items():
        current = live.get(key)
        if value is None or value == []:
            if current not in (None, []):
                return False
        elif current != value:
            return False
    return True


@dataclass(slots=True)
class ApplierCounters:
    outcomes: dict[str, int] = field(default_factory=dict)
    conflicts: int = 0

    def count(self, outcome: ApplyOutcome) -> None:
        self.outcomes[outcome.value] = self.outcomes.get(outcome.value, 0) + 1


@dataclass(slots=True)
class _Slot:
    """The decisions of one object: the one being written and the newest waiting."""

    newest: int = 0  # arrival number of the newest decision received
    waiting: tuple[int, DecisionRecord] | None = None
    busy: bool = False


class ClusterApplier:
    def __init__(
        self,
        objects: KubeObjects,
        cache: ObjectCache,
        on_outcome: OutcomeHook,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        self.objects = objects
        self.cache = cache
        self.on_outcome = on_outcome
        self.counters = ApplierCounters()
        self._slots: dict[Key, _Slot] = {}
        self._arrivals = 0
        self._gate = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()

    # --- input ---------------------------------------------------------------------

    def submit(self, decision: DecisionRecord) -> None:
        """Queue a decision; decisions about one object must be submitted in the order made."""
        ref = decision.ref
        key: Key = (ref.kind, ref.namespace, ref.name)
        self._arrivals += 1
        slot = self._slots.setdefault(key, _Slot())
        slot.newest = self._arrivals
        if slot.waiting is not None:
            self._report(
                slot.waiting[1], ApplyOutcome.SUPERSEDED, "a newer decision arrived before it was written"
            )
        slot.waiting = (self._arrivals, decision)
        if not slot.busy:
            self._start(key, slot)

    def _start(self, key: Key, slot: _Slot) -> None:
        assert slot.waiting is not None
        arrival, decision = slot.waiting
        slot.waiting, slot.busy = None, True
        task = asyncio.ensure_future(self._run(key, slot, arrival, decision))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, key: Key, slot: _Slot, arrival: int, decision: DecisionRecord) -> None:
        try:
            async with self._gate:
                outcome, detail = await self._apply(key, arrival, decision)
        except Exception as exc:  # one object's failure never stops the others
            outcome, detail = ApplyOutcome.ERROR, reason_of(exc)
        self._report(decision, outcome, detail)
        slot.busy = False
        if slot.waiting is not None:
            self._start(key, slot)

    def _report(self, decision: DecisionRecord, outcome: ApplyOutcome, detail: str) -> None:
        self.counters.count(outcome)
        if outcome is ApplyOutcome.ERROR:
            log.warning("%s %s/%s: %s", decision.ref.kind, decision.ref.namespace, decision.ref.name, detail)
        self.on_outcome(AppliedRecord.for_decision(decision, outcome, detail))

    async def idle(self) -> None:
        """Wait until every submitted decision has an outcome."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def is_idle(self) -> bool:
        return not self._tasks

    # --- one decision --------------------------------------------------------------

    async def _apply(self, key: Key, arrival: int, decision: DecisionRecord) -> tuple[ApplyOutcome, str]:
        kind = decision.ref.kind
        if decision.action is Action.REJECTED:
            return ApplyOutcome.ERROR, decision.message
        if decision.action is Action.DELETED:
            return ApplyOutcome.GONE, f"{kind} deleted in the cluster; nothing to write"
        resource = RESOURCES.get(kind)
        if resource is None:
            return ApplyOutcome.ERROR, f"no status to write for a {kind}"
        if kind != "Workload":
            return await self._merge_status(resource, key, decision.status)
        live = self.cache.get(key)
        conflicts = 0
        while True:
            if live is None:
                try:
                    live = await self.objects.get(resource, key[1], key[2])
                except Exception as exc:
                    if status_of(exc) == NOT_FOUND:
                        self.cache.forget(key)
                        return ApplyOutcome.GONE, f"Workload {key[1]}/{key[2]} no longer exists"
                    raise
                self.cache.put(key, live)
            current = live.get("status") if isinstance(live.get("status"), dict) else {}
            wanted = merged_status(current or {}, decision.status)
            if has_status(current or {}, wanted):
                await self._deactivate(resource, key, live, decision.status)
                return ApplyOutcome.UNCHANGED, f"resourceVersion {resource_version(live)}"
            body = {"metadata": {"resourceVersion": resource_version(live)}, "status": wanted}
            try:
                written = await self.objects.patch(resource, key[1], key[2], body, subresource="status")
            except Exception as exc:
                status = status_of(exc)
                if status == NOT_FOUND:
                    self.cache.forget(key)
                    return ApplyOutcome.GONE, f"Workload {key[1]}/{key[2]} no longer exists"
                if status != CONFLICT:
                    return ApplyOutcome.ERROR, f"the API server refused the status: {reason_of(exc)}"
                self.counters.conflicts += 1
                conflicts += 1
                slot = self._slots[key]
                if slot.newest != arrival:
                    return ApplyOutcome.SUPERSEDED, "changed meanwhile, and a newer decision is waiting"
                if conflicts >= MAX_CONFLICTS:
                    return ApplyOutcome.CONFLICT, f"changed {conflicts} times while being written"
                live = None  # read it again
                continue
            self.cache.put(key, written)
            await self._deactivate(resource, key, written, decision.status)
            return ApplyOutcome.APPLIED, f"resourceVersion {resource_version(written)}"

    async def _deactivate(self, resource: Resource, key: Key, live: Manifest, status: Manifest) -> None:
        """Set ``spec.active`` false on a Workload Kueue deactivates itself (a Rejected check,
        its maximum execution time), as Kueue does.

        A write the server refuses is logged and left: the Workload stays
        deactivated in the engine whatever its spec says.
        """
        if not needs_deactivation(live, status):
            return
        try:
            written = await self.objects.patch(resource, key[1], key[2], {"spec": {"active": False}})
        except Exception as exc:
            log.warning("Workload %s/%s: spec.active not set to false: %s", key[1], key[2], reason_of(exc))
            return
        self.cache.put(key, written)

    async def _merge_status(self, resource: Resource, key: Key, status: Manifest) -> tuple[ApplyOutcome, str]:
        try:
            written = await self.objects.patch(
                resource, key[1], key[2], {"status": status}, subresource="status"
            )
        except Exception as exc:
            if status_of(exc) == NOT_FOUND:
                return ApplyOutcome.GONE, f"{key[0]} {key[2]} no longer exists"
            return ApplyOutcome.ERROR, f"the API server refused the status: {reason_of(exc)}"
        return ApplyOutcome.APPLIED, f"resourceVersion {resource_version(written)}"
