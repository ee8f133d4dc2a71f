"""The MultiKueue executor: each decision of ``kueue.multikueue`` carried out, its outcome recorded.

The dispatcher decides; this writes. Decisions about one object are applied
one at a time in log order (a lane per object: the copies of one Workload in
one worker, one manager Workload's status, one manager Job, one
MultiKueueCluster, one AdmissionCheck); lanes run side by side, at most
``concurrency`` calls at a time per API server, so a worker that does not
answer holds up only the writes to it. Each decision gets one
:class:`~kueuestream.streams.schemas.MultiKueueApplied` record (``decision`` =
its offset in ``kueue.multikueue``), handed to ``on_outcome``; at a start,
every decision without one is applied again (:meth:`MultiKueueExecutor.restore`),
so every write here is idempotent:

- ``CreateRemote``: the objects in the worker, in order (the dispatcher sends
  a Workload copy, or the winner's Job copy). An
  object that exists already is ``unchanged`` when it carries our origin label
  and ``conflict`` when it does not (someone else's object: left alone); one
  still being deleted (an earlier copy held by a finalizer) is waited for, up
  to a minute, and then replaced.
- ``DeleteRemote``: the Job copy, then the Workload copy; ``not-found`` when
  none was there.
- ``SetCheckState``: the manager Workload's entry of the check in
  ``status.admissionChecks`` (state, message, a new ``lastTransitionTime`` when
  the state changes) and ``status.clusterName`` (removed when the decision's is
  empty); ``SetNominatedClusters``: ``status.nominatedClusterNames``. Such
  decisions about one Workload that wait in its lane one after another are
  written as one patch, as upstream's ``syncAdmittingRemoteState`` sets the
  check Ready and clears the nominated clusters in one write; each still gets
  its own outcome.
- ``SyncJobStatus``: the manager Job's ``status`` becomes the worker Job's.
- ``FinishWorkload``: ``Finished=True`` with the decision's reason and message.
- ``SetClusterStatus`` / ``SetAdmissionCheckActive``: the ``Active`` condition
  of the MultiKueueCluster / AdmissionCheck.

Status writes carry the resourceVersion they were computed from and are
computed again after a 409 Conflict. A write the target already reflects is
``unchanged``; a manager object that is gone is ``not-found``. While a worker
has no connection (its link is reconnecting, or its API server does not
answer) its lanes wait and try again: a copy whose creation was decided is
created when the worker is back, and a deletion decided meanwhile follows it
in the same lane. A decision for a worker the manager has no link to at all
(its MultiKueueCluster is gone) is ``unreachable``; any other refusal is
``failed`` with the server's message.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kueuestream.admission.multikueue.decisions import MultiKueueAction
from kueuestream.admission.multikueue.names import ACTIVE_CONDITION, ORIGIN_LABEL
from kueuestream.admission.timefmt import rfc3339
from kueuestream.agents.kube.client import is_transient
from kueuestream.agents.kube.jobs import finished_status, with_condition
from kueuestream.agents.kube.rest import (
    CONFLICT,
    JOBS,
    NOT_FOUND,
    WORKLOADS,
    KubeObjects,
    Resource,
    reason_of,
    status_of,
)
from kueuestream.streams import codec
from kueuestream.streams.codec import DecodeError
from kueuestream.streams.schemas import MultiKueueApplied, MultiKueueDecision

log = logging.getLogger(__name__)

Manifest = dict[str, Any]
OutcomeHook = Callable[[MultiKueueApplied], None]

MULTIKUEUE_CLUSTERS = Resource("kueue.x-k8s.io", "v1beta2", "multikueueclusters", "MultiKueueCluster")
ADMISSION_CHECKS = Resource("kueue.x-k8s.io", "v1beta2", "admissionchecks", "AdmissionCheck")
REMOTE_RESOURCES = {"Workload": WORKLOADS, "Job": JOBS}

APPLIED = "applied"
UNCHANGED = "unchanged"
NOT_FOUND_OUTCOME = "not-found"
CONFLICT_OUTCOME = "conflict"
UNREACHABLE = "unreachable"
FAILED = "failed"

MANAGER = ""  # the target of the manager's own writes
DEFAULT_CONCURRENCY = 16
Lane = tuple[str, str, str, str]  # target cluster, what, namespace, name
# Decisions that write the same manager Workload share its lane.
WORKLOAD_STATUS = (MultiKueueAction.SET_CHECK_STATE, MultiKueueAction.SET_NOMINATED, MultiKueueAction.FINISH)
# Those whose status fields are their own, so that consecutive ones can go in one write.
MERGEABLE = (MultiKueueAction.SET_CHECK_STATE, MultiKueueAction.SET_NOMINATED)
# A Job's pods go with it (the API's default for batch/v1 Jobs is to orphan them).
BACKGROUND = "Background"
MAX_CONFLICTS = 10
RETRY_S = 0.5
MAX_RETRY_S = 5.0
# How long a create waits for an earlier copy of the same name to finish its deletion.
TERMINATING_WAIT_S = 60.0


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class WorkerAway(Exception):
    """The worker has no connection now; its lane tries again later."""


class StillTerminating(Exception):
    """A copy of the same name is being deleted in the worker; its lane tries again later."""


@dataclass(slots=True)
class ExecutorCounters:
    outcomes: dict[str, int] = field(default_factory=dict)
    remote_creates: int = 0
    remote_deletes: int = 0
    retries: int = 0


def _conditions(obj: Manifest) -> list[Manifest]:
    status = obj.get("status")
    items = status.get("conditions") if isinstance(status, dict) else None
    return [c for c in items or [] if isinstance(c, dict)]


def _status(obj: Manifest) -> Manifest:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def _rv(obj: Manifest) -> str:
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion", "")) if isinstance(meta, dict) else ""


def _labels(obj: Manifest) -> dict[str, Any]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


def check_entries(workload: Manifest, decision: MultiKueueDecision, when_ms: int) -> list[Manifest] | None:
    """``status.admissionChecks`` with the decision's state for its check; None if already so."""
    entries = [dict(e) for e in _status(workload).get("admissionChecks") or [] if isinstance(e, dict)]
    for entry in entries:
        if entry.get("name") != decision.check:
            continue
        if entry.get("state") == decision.state and entry.get("message", "") == decision.message:
            return None
        if entry.get("state") != decision.state:
            entry["lastTransitionTime"] = rfc3339(when_ms)
        entry["state"] = decision.state
        entry["message"] = decision.message
        return entries
    entries.append(
        {
            "name": decision.check,
            "state": decision.state,
            "message": decision.message,
            "lastTransitionTime": rfc3339(when_ms),
        }
    )
    return entries


def replaced_status(live: Manifest, wanted: Manifest) -> Manifest:
    """A merge patch that turns status ``live`` into ``wanted``: fields ``wanted`` lacks are removed."""
    patch: Manifest = {k: None for k in live if k not in wanted}
    patch.update(wanted)
    return patch


def active_condition(active: bool, reason: str, message: str, when_ms: int) -> Manifest:
    return {
        "type": ACTIVE_CONDITION,
        "status": "True" if active else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": rfc3339(when_ms),
    }


def _same_condition(current: list[Manifest], cond: Manifest) -> bool:
    return any(
        c.get("type") == cond["type"]
        and c.get("status") == cond["status"]
        and c.get("reason") == cond["reason"]
        and c.get("message", "") == cond["message"]
        for c in current
    )


def lane_of(decision: MultiKueueDecision) -> Lane:
    """The lane of a decision: its target cluster and the object it writes."""
    action = decision.action
    if action in (MultiKueueAction.CREATE_REMOTE, MultiKueueAction.DELETE_REMOTE):
        return (decision.cluster, "copies", decision.namespace, decision.name)
    what = "Workload" if action in WORKLOAD_STATUS else str(action)
    return (MANAGER, what, decision.namespace, decision.name)


def _mergeable_head(queue: deque[tuple[int, MultiKueueDecision]]) -> list[tuple[int, MultiKueueDecision]]:
    """The lane's next decision, with those of :data:`MERGEABLE` that follow it if it is one."""
    head = queue[0]
    if head[1].action not in MERGEABLE:
        return [head]
    rest = itertools.islice(queue, 1, None)
    return [head, *itertools.takewhile(lambda item: item[1].action in MERGEABLE, rest)]


Workers = Callable[[str], KubeObjects | None]
Known = Callable[[str], bool]
# The manager's latest version of an object (kind, namespace, name) as its watch brought it, if known.
Cached = Callable[[str, str, str], Manifest | None]


class MultiKueueExecutor:
    """Applies MultiKueue decisions to the manager (``manager``) and the workers (``workers(name)``).

    ``workers(name)`` is the worker's client while it is connected, else None;
    ``known(name)`` says whether the manager has a link to that worker at all.
    """

    def __init__(
        self,
        manager: KubeObjects,
        workers: Workers,
        known: Known,
        on_outcome: OutcomeHook,
        *,
        clock: Callable[[], int] = now_ms,
        retry_s: float = RETRY_S,
        concurrency: int = DEFAULT_CONCURRENCY,
        cached: Cached | None = None,
    ) -> None:
        self.manager = manager
        self.workers = workers
        self.known = known
        self.on_outcome = on_outcome
        self.clock = clock
        self.retry_s = retry_s
        self.counters = ExecutorCounters()
        self.done: set[int] = set()
        self.concurrency = concurrency
        self.cached = cached
        self._lanes: dict[Lane, deque[tuple[int, MultiKueueDecision]]] = {}
        self._tasks: dict[Lane, asyncio.Task[None]] = {}
        self._gates: dict[str, asyncio.Semaphore] = {}
        self._pending = 0
        self._idle = asyncio.Event()
        self._idle.set()

    # --- input ---------------------------------------------------------------------

    def restore(self, decisions: Iterable[tuple[int, bytes]], applied: Iterable[bytes]) -> int:
        """Queue the log's decisions that have no outcome yet; how many."""
        for raw in applied:
            with contextlib.suppress(DecodeError):
                self.done.add(codec.decode(raw, MultiKueueApplied).decision)
        queued = 0
        for offset, raw in decisions:
            try:
                decision = codec.decode(raw, MultiKueueDecision)
            except DecodeError:
                continue
            if offset not in self.done:
                self.submit(offset, decision)
                queued += 1
        return queued

    def submit(self, offset: int, decision: MultiKueueDecision) -> None:
        """Queue one decision (its offset in ``kueue.multikueue``) unless it has an outcome already."""
        if offset in self.done:
            return
        lane = lane_of(decision)
        queue = self._lanes.get(lane)
        if queue is None:
            queue = self._lanes[lane] = deque()
        queue.append((offset, decision))
        self._pending += 1
        self._idle.clear()
        if lane not in self._tasks:
            self._tasks[lane] = asyncio.create_task(self._run_lane(lane, queue), name=f"mk-lane-{lane}")

    async def idle(self) -> None:
        """Wait until every queued decision has an outcome."""
        await self._idle.wait()

    def is_idle(self) -> bool:
        return self._pending == 0

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- lanes ---------------------------------------------------------------------

    async def _run_lane(self, lane: Lane, queue: deque[tuple[int, MultiKueueDecision]]) -> None:
        try:
            while queue:
                batch = _mergeable_head(queue)
                outcomes = await self._apply_until_answered(lane[0], [d for _, d in batch])
                for (offset, _), (outcome, message) in zip(batch, outcomes, strict=True):
                    queue.popleft()
                    self._record(offset, outcome, message)
        finally:
            if not queue:
                self._lanes.pop(lane, None)
            self._tasks.pop(lane, None)

    def _record(self, offset: int, outcome: str, message: str) -> None:
        self.done.add(offset)
        self.counters.outcomes[outcome] = self.counters.outcomes.get(outcome, 0) + 1
        if outcome in (FAILED, CONFLICT_OUTCOME, UNREACHABLE):
            log.warning("MultiKueue decision %d: %s: %s", offset, outcome, message)
        self.on_outcome(MultiKueueApplied(decision=offset, outcome=outcome, message=message))
        self._pending -= 1
        if self._pending == 0:
            self._idle.set()

    async def _apply_until_answered(
        self, target: str, decisions: list[MultiKueueDecision]
    ) -> list[tuple[str, str]]:
        """The outcome of each decision, once answered: one alone, or merged status decisions
        (:func:`_mergeable_head`) as one write."""
        decision = decisions[0]
        gate = self._gates.get(target)
        if gate is None:
            gate = self._gates[target] = asyncio.Semaphore(self.concurrency)
        pause = self.retry_s
        waited = 0.0
        while True:
            try:
                async with gate:
                    if len(decisions) == 1:
                        return [await self.apply(decision)]
                    return await self._set_status_fields(decisions)
            except StillTerminating as exc:
                if waited >= TERMINATING_WAIT_S:
                    message = f"{exc} still being deleted after {TERMINATING_WAIT_S:g}s"
                    return [(CONFLICT_OUTCOME, message)] * len(decisions)
                waited += pause
            except WorkerAway:
                if not self.known(decision.cluster):
                    message = f"no connection to cluster {decision.cluster!r} (no MultiKueueCluster)"
                    return [(UNREACHABLE, message)] * len(decisions)
            except Exception as exc:
                if not is_transient(exc):
                    if status_of(exc) == 0:
                        # Not the server's answer: a fault of ours or of the client, worth its traceback.
                        log.warning(
                            "MultiKueue %s in cluster %s failed", decision.action, target, exc_info=exc
                        )
                    return [(FAILED, reason_of(exc))] * len(decisions)
            self.counters.retries += 1
            await asyncio.sleep(pause)
            pause = min(pause * 2, MAX_RETRY_S)

    # --- the actions ---------------------------------------------------------------

    async def apply(self, decision: MultiKueueDecision) -> tuple[str, str]:
        """Carry out one decision once: ``(outcome, message)``.

        Raises :class:`WorkerAway` for a worker without a connection, and the
        client's exception for a transient failure; the lane tries again.
        """
        action = decision.action
        if action == MultiKueueAction.CREATE_REMOTE:
            return await self._create_remote(decision)
        if action == MultiKueueAction.DELETE_REMOTE:
            return await self._delete_remote(decision)
        if action in MERGEABLE:
            return await self._status_write(
                WORKLOADS, decision.namespace, decision.name, self._status_fields(decision)
            )
        if action == MultiKueueAction.SYNC_JOB_STATUS:
            return await self._sync_job_status(decision)
        if action == MultiKueueAction.FINISH:
            return await self._finish(decision)
        if action == MultiKueueAction.SET_CLUSTER_STATUS:
            return await self._set_active(MULTIKUEUE_CLUSTERS, decision)
        if action == MultiKueueAction.SET_CHECK_ACTIVE:
            return await self._set_active(ADMISSION_CHECKS, decision)
        return FAILED, f"unknown action {action!r}"

    def _worker(self, name: str) -> KubeObjects:
        objects = self.workers(name)
        if objects is None:
            raise WorkerAway(name)
        return objects

    @staticmethod
    async def _on_worker(name: str, call: Awaitable[Manifest]) -> Manifest:
        """The answer of one call to worker ``name``; a lost connection is :class:`WorkerAway`."""
        try:
            return await call
        except Exception as exc:
            if status_of(exc) == 0 and is_transient(exc):
                raise WorkerAway(name) from exc
            raise

    async def _create_remote(self, decision: MultiKueueDecision) -> tuple[str, str]:
        created, existing = [], []
        for obj in decision.objects:
            kind = str(obj.get("kind", ""))
            resource = REMOTE_RESOURCES.get(kind)
            meta = obj.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
            if resource is None:
                return FAILED, f"{kind} {namespace}/{name}: not a kind MultiKueue copies"
            worker = self._worker(decision.cluster)
            try:
                await self._on_worker(decision.cluster, worker.create(resource, namespace, obj))
            except WorkerAway:
                raise
            except Exception as exc:
                if status_of(exc) != CONFLICT:
                    raise
                there = await self._on_worker(decision.cluster, worker.get(resource, namespace, name))
                meta_there = there.get("metadata")
                if isinstance(meta_there, dict) and meta_there.get("deletionTimestamp"):
                    # An earlier copy whose deletion is not finished (a finalizer): not this copy.
                    raise StillTerminating(
                        f"{kind} {namespace}/{name} in cluster {decision.cluster}"
                    ) from None
                if _labels(there).get(ORIGIN_LABEL) != _labels(obj).get(ORIGIN_LABEL):
                    return CONFLICT_OUTCOME, (
                        f"{kind} {namespace}/{name} exists in cluster {decision.cluster} without our "
                        f"origin label {ORIGIN_LABEL}={_labels(obj).get(ORIGIN_LABEL)}; left alone"
                    )
                existing.append(f"{kind} {namespace}/{name}")
                continue
            self.counters.remote_creates += 1
            created.append(f"{kind} {namespace}/{name}")
        if not created:
            return UNCHANGED, f"already in cluster {decision.cluster}: {', '.join(existing)}"
        return APPLIED, f"created in cluster {decision.cluster}: {', '.join(created)}"

    async def _delete_remote(self, decision: MultiKueueDecision) -> tuple[str, str]:
        deleted = []
        for ref in decision.objects:
            kind = str(ref.get("kind", ""))
            resource = REMOTE_RESOURCES.get(kind)
            namespace, name = str(ref.get("namespace", "")), str(ref.get("name", ""))
            if resource is None:
                return FAILED, f"{kind} {namespace}/{name}: not a kind MultiKueue copies"
            worker = self._worker(decision.cluster)
            try:
                await self._on_worker(decision.cluster, worker.delete(resource, namespace, name, BACKGROUND))
            except WorkerAway:
                raise
            except Exception as exc:
                if status_of(exc) != NOT_FOUND:
                    raise
                continue
            self.counters.remote_deletes += 1
            deleted.append(f"{kind} {namespace}/{name}")
        if not deleted:
            return NOT_FOUND_OUTCOME, f"nothing to delete in cluster {decision.cluster}"
        return APPLIED, f"deleted in cluster {decision.cluster}: {', '.join(deleted)}"

    async def _status_write(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        compute: Callable[[Manifest], Manifest | None],
    ) -> tuple[str, str]:
        """Read the object, compute its status patch (None: already so), write it with its version.

        The first try starts from the version the manager's watch brought, when
        there is one; a conflict (or a patch that would change nothing) reads it.
        """
        known = self.cached(resource.kind, namespace, name) if self.cached is not None else None
        for attempt in range(MAX_CONFLICTS):
            live: Manifest | None = known if attempt == 0 else None
            if live is None or compute(live) is None:
                try:
                    live = await self.manager.get(resource, namespace, name)
                except Exception as exc:
                    if status_of(exc) == NOT_FOUND:
                        return NOT_FOUND_OUTCOME, f"{resource.kind} {namespace}/{name} not found"
                    raise
            status = compute(live)
            if status is None:
                return UNCHANGED, ""
            body = {"metadata": {"resourceVersion": _rv(live)}, "status": status}
            try:
                await self.manager.patch(resource, namespace, name, body, subresource="status")
            except Exception as exc:
                if status_of(exc) == CONFLICT:
                    continue
                if status_of(exc) == NOT_FOUND:
                    return NOT_FOUND_OUTCOME, f"{resource.kind} {namespace}/{name} not found"
                raise
            return APPLIED, ""
        return CONFLICT_OUTCOME, f"{resource.kind} {namespace}/{name}: {MAX_CONFLICTS} conflicts in a row"

    def _status_fields(self, d: MultiKueueDecision) -> Callable[[Manifest], Manifest | None]:
        """The status patch of a ``SetCheckState`` or ``SetNominatedClusters`` (None: already so)."""
        if d.action == MultiKueueAction.SET_NOMINATED:

            def nominated(live: Manifest) -> Manifest | None:
                current = _status(live).get("nominatedClusterNames") or []
                if current == d.clusters:
                    return None
                return {"nominatedClusterNames": list(d.clusters) or None}

            return nominated
        when = self.clock()

        def check_state(live: Manifest) -> Manifest | None:
            entries = check_entries(live, d, when)
            current = _status(live).get("clusterName") or ""
            if entries is None and current == d.clusterName:
                return None
            out: Manifest = {"clusterName": d.clusterName or None}
            if entries is not None:
                out["admissionChecks"] = entries
            return out

        return check_state

    async def _set_status_fields(self, decisions: list[MultiKueueDecision]) -> list[tuple[str, str]]:
        """Decisions of :data:`MERGEABLE` about one Workload, in order, as one status write."""
        computes = [self._status_fields(d) for d in decisions]
        changed: list[bool] = []

        def compute(live: Manifest) -> Manifest | None:
            changed.clear()
            status, patch = dict(_status(live)), {}
            for one in computes:
                part = one({**live, "status": status})
                changed.append(part is not None)
                if part is not None:
                    patch.update(part)
                    # A merge patch's null removes the field.
                    status = {k: v for k, v in {**status, **part}.items() if v is not None}
            return patch or None

        first = decisions[0]
        outcome, message = await self._status_write(WORKLOADS, first.namespace, first.name, compute)
        if outcome != APPLIED:
            return [(outcome, message)] * len(decisions)
        return [(APPLIED, "") if wrote else (UNCHANGED, "") for wrote in changed]

    async def _sync_job_status(self, d: MultiKueueDecision) -> tuple[str, str]:
        wanted = dict(d.object or {})

        def compute(live: Manifest) -> Manifest | None:
            current = _status(live)
            if current == wanted:
                return None
            return replaced_status(current, wanted)

        return await self._status_write(JOBS, d.namespace, d.name, compute)

    async def _finish(self, d: MultiKueueDecision) -> tuple[str, str]:
        when = self.clock()

        def compute(live: Manifest) -> Manifest | None:
            if any(c.get("type") == "Finished" and c.get("status") == "True" for c in _conditions(live)):
                return None
            return finished_status(live, d.reason, d.message, when)

        return await self._status_write(WORKLOADS, d.namespace, d.name, compute)

    async def _set_active(self, resource: Resource, d: MultiKueueDecision) -> tuple[str, str]:
        cond = active_condition(bool(d.active), d.reason, d.message, self.clock())

        def compute(live: Manifest) -> Manifest | None:
            current = _conditions(live)
            if _same_condition(current, cond):
                return None
            return {"conditions": with_condition(current, cond)}

        return await self._status_write(resource, "", d.name, compute)
