"""Kueue's job integration for batch/v1 Jobs, against a real cluster.

For each Job with the ``kueue.x-k8s.io/queue-name`` label it does what Kueue's
``JobReconciler.ReconcileGenericJob`` does for a top-level batch Job, in the
same order, from the latest versions of the Job, its Workload and the
ResourceFlavors that the watch brought (:class:`~.cache.ObjectCache`):

1. a Workload that is Finished: drop its ``resource-in-use`` finalizer;
2. a Workload being deleted: stop the Job, then drop the finalizer;
3. a Job that completed or failed: mark the Workload Finished (reason
   ``Succeeded`` or ``Failed``, the Job condition's message), which releases
   its quota once the engine sees it;
4. no Workload yet: create it (:func:`kueuestream.admission.job_workload.workload_for_job`), unless
   the Job still has active pods;
5. an evicted Workload: stop the Job (suspend it, then restore its pod
   template), and once it has no active pods clear the Workload's quota
   reservation (``Requeued``, ``QuotaReserved=False`` with reason
   ``PendingEvaluation``, ``Admitted=False``, no ``status.admission``): that
   is what tells the engine the job stopped
   (:func:`kueuestream.agents.kube.stop_signal.job_stopped`);
6. a suspended Job whose Workload is admitted: unsuspend it with the
   admission merged into its pod template; an admission that cannot be merged
   marks the Workload Finished with reason ``FailedToStart``;
7. a running Job whose Workload is not admitted: stop it.

MultiKueue, as upstream's ``ensureOneWorkload`` and the MultiKueue Job adapter:

- a Job labelled ``kueue.x-k8s.io/prebuilt-workload-name`` (a worker's copy)
  uses the Workload of that name instead of creating one: it waits for it to
  exist, and makes itself its controller (``EnsurePrebuiltWorkloadOwnership``)
  when no other object controls it;
- a Job whose admitted Workload carries an admission check of the MultiKueue
  controller (a manager's Job), or whose ``spec.managedBy`` is
  ``kueue.x-k8s.io/multikueue``, is never unsuspended here: a worker runs it.

There is no admission webhook: Jobs must be created with ``suspend: true``
(as with Kueue's ``manageJobsWithoutQueueName: false`` and no webhook), and a
Job created running is suspended as soon as it is seen, step 7.

Every write carries the resourceVersion it was computed from. A write refused
with 409 Conflict is dropped: the newer version that made it stale comes
through the watch and the Job is reconciled again from it. Deleting a Job's
Workload when the Job is gone is left to the cluster's garbage collector,
through the owner reference, as with Kueue.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kueuestream.admission import job_workload as jw
from kueuestream.admission.jobs import JOB_UID_LABEL
from kueuestream.admission.multikueue.names import CONTROLLER_NAME as MULTIKUEUE_CONTROLLER
from kueuestream.admission.multikueue.names import PREBUILT_WORKLOAD_LABEL
from kueuestream.admission.status import (
    ADMITTED,
    EVICTED,
    FINISHED,
    MSG_NO_RESERVATION,
    QUOTA_RESERVED,
    REASON_NO_RESERVATION,
    REQUEUED,
)
from kueuestream.admission.timefmt import rfc3339
from kueuestream.agents.kube import job_pods as jp
from kueuestream.agents.kube.cache import Key, ObjectCache, resource_version
from kueuestream.agents.kube.rest import (
    CONFLICT,
    JOBS,
    NOT_FOUND,
    WORKLOADS,
    KubeObjects,
    reason_of,
    status_of,
)
from kueuestream.agents.kube.stop_signal import REASON_PENDING_EVALUATION
from kueuestream.streams.schemas import WatchEvent

log = logging.getLogger(__name__)

Manifest = dict[str, Any]
JobKey = tuple[str, str]  # namespace, name

CACHED_KINDS = frozenset({"Job", "Workload", "ResourceFlavor", "AdmissionCheck"})
FAILED_TO_START = "FailedToStart"
# Eviction reasons after which Kueue marks the Workload Requeued=True.
REQUEUE_REASONS = ("Preempted", "NodeFailures")
DEFAULT_CONCURRENCY = 16
MAX_PROBLEMS = 100


@dataclass(slots=True)
class JobCounters:
    """What the integration did, for operators and benchmarks."""

    workloads_created: int = 0
    jobs_started: int = 0
    jobs_stopped: int = 0
    reservations_cleared: int = 0
    workloads_finished: int = 0
    finalizers_removed: int = 0
    conflicts: int = 0
    # The latest problems only: a long run must not grow without bound.
    problems: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_PROBLEMS))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def with_condition(conditions: list[Manifest], cond: Manifest) -> list[Manifest]:
    """``conditions`` with ``cond`` set as ``meta.SetStatusCondition`` sets it.

    The transition time moves only when the status changes; a condition of a
    new type is appended.
    """
    out: list[Manifest] = []
    placed = False
    for current in conditions:
        if current.get("type") != cond["type"]:
            out.append(current)
            continue
        placed = True
        if current.get("status") == cond["status"]:
            out.append(
                {**cond, "lastTransitionTime": current.get("lastTransitionTime", cond["lastTransitionTime"])}
            )
        else:
            out.append(cond)
    if not placed:
        out.append(cond)
    return out


def _condition(type_: str, status: bool, reason: str, message: str, when_ms: int) -> Manifest:
    return {
        "type": type_,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": rfc3339(when_ms),
    }


def finished_status(workload: Manifest, reason: str, message: str, when_ms: int) -> Manifest:
    """``workload/finish.Finish``: the Finished condition set to True."""
    return {
        "conditions": with_condition(
            jp.conditions(workload), _condition(FINISHED, True, reason, message, when_ms)
        )
    }


def cleared_status(workload: Manifest, when_ms: int) -> Manifest:
    """The reservation of an evicted Workload whose Job stopped, cleared as Kueue clears it.

    ``SetRequeuedCondition`` (True after a preemption or node failures), then
    ``UnsetQuotaReservationWithCondition`` with the eviction's message.
    """
    evicted = jp.condition(workload, EVICTED) or {}
    reason = str(evicted.get("reason", ""))
    message = str(evicted.get("message", ""))
    conditions = jp.conditions(workload)
    for cond in (
        _condition(REQUEUED, reason in REQUEUE_REASONS, reason, message, when_ms),
        _condition(QUOTA_RESERVED, False, REASON_PENDING_EVALUATION, message, when_ms),
        _condition(ADMITTED, False, REASON_NO_RESERVATION, MSG_NO_RESERVATION, when_ms),
    ):
        conditions = with_condition(conditions, cond)
    return {"admission": None, "conditions": conditions}


def prebuilt_workload(job: Manifest) -> str:
    """The prebuilt Workload a Job names in its ``prebuilt-workload-name`` label, or ""."""
    return jw.labels_of(job).get(PREBUILT_WORKLOAD_LABEL, "")


def has_controller(obj: Manifest) -> bool:
    refs = jw.as_list(jw.metadata_of(obj).get("ownerReferences"))
    return any(isinstance(r, dict) and r.get("controller") is True for r in refs)


class JobIntegration:
    """Reconciles queued Jobs with their Workloads; fed watch events, acting on the cluster."""

    def __init__(
        self,
        objects: KubeObjects,
        cache: ObjectCache,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.objects = objects
        self.cache = cache
        self.concurrency = concurrency
        self.clock = clock
        self.counters = JobCounters()
        self._queue: dict[JobKey, None] = {}
        self._running: set[JobKey] = set()
        self._again: set[JobKey] = set()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    # --- input ---------------------------------------------------------------------

    def observe(self, event: WatchEvent, *, reconcile: bool = True) -> None:
        """Take in a watch event; queue the Job it concerns unless ``reconcile`` is False."""
        # A deleted Workload's owner is only known from the version before.
        before = self.cache.get((event.kind, event.namespace, event.name))
        key = self.cache.observe(event)
        if key is None or not reconcile:
            return
        job = self._job_of(key, event.object or before)
        if job is None and key[0] == "Workload" and event.object is not None:
            # A prebuilt Workload that its Job does not control yet.
            job = self._prebuilt_user(key[1], key[2])
        if job is not None:
            self.enqueue(job)

    @staticmethod
    def _job_of(key: Key, obj: Manifest | None) -> JobKey | None:
        kind, namespace, name = key
        if kind == "Job":
            return (namespace, name)
        if kind == "Workload" and obj is not None:
            owner = jp.owner_job(obj)
            if owner is not None:
                return (namespace, owner)
        return None

    def _prebuilt_user(self, namespace: str, workload: str) -> JobKey | None:
        """The Job that names ``workload`` as its prebuilt Workload, if the cache has one."""
        for _, ns, name in self.cache.keys("Job"):
            job = self.cache.get(("Job", ns, name))
            if ns == namespace and job is not None and prebuilt_workload(job) == workload:
                return (ns, name)
        return None

    def enqueue(self, key: JobKey) -> None:
        if key in self._running:
            self._again.add(key)
            return
        self._queue[key] = None
        self._idle.clear()
        self._wake.set()

    def enqueue_all(self) -> None:
        """Queue every known Job (after a start, once the cache holds what the log had)."""
        for _, namespace, name in self.cache.keys("Job"):
            self.enqueue((namespace, name))

    async def idle(self) -> None:
        """Wait until nothing is queued or being reconciled."""
        await self._idle.wait()

    def is_idle(self) -> bool:
        return not self._queue and not self._running

    # --- the loop ------------------------------------------------------------------

    async def run(self) -> None:
        """Reconcile queued Jobs, ``concurrency`` at a time, until cancelled."""
        tasks: set[asyncio.Task[None]] = set()
        try:
            while True:
                while self._queue and len(tasks) < self.concurrency:
                    key = next(iter(self._queue))
                    del self._queue[key]
                    self._running.add(key)
                    task = asyncio.ensure_future(self._reconcile_one(key))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    # The loop may be waiting already when the task is discarded: wake it.
                    task.add_done_callback(lambda _: self._wake.set())
                if not self._queue and not tasks:
                    self._idle.set()
                self._wake.clear()
                if self._queue and len(tasks) >= self.concurrency:
                    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                else:
                    await self._wake.wait()
        finally:
            for task in tasks:
                task.cancel()

    async def _reconcile_one(self, key: JobKey) -> None:
        try:
            await self.reconcile(*key)
        except Exception as exc:  # a failure of one Job never stops the others
            self._problem(f"Job {key[0]}/{key[1]}: reconcile failed: {reason_of(exc)}")
        finally:
            self._running.discard(key)
            if key in self._again:
                self._again.discard(key)
                self._queue[key] = None

    def _problem(self, message: str) -> None:
        log.warning("%s", message)
        self.counters.problems.append(message)

    # --- one Job -------------------------------------------------------------------

    def _flavors(self) -> dict[str, Manifest]:
        out: dict[str, Manifest] = {}
        for key in self.cache.keys("ResourceFlavor"):
            flavor = self.cache.get(key)
            if flavor is not None:
                out[key[2]] = flavor
        return out

    async def reconcile(self, namespace: str, name: str) -> None:
        job = self.cache.get(("Job", namespace, name))
        if job is None or not jw.queue_name(job):
            return
        prebuilt = prebuilt_workload(job)
        wl_key: Key = ("Workload", namespace, prebuilt or jw.job_workload_name(job))
        workload = self.cache.get(wl_key)
        if prebuilt and workload is None:
            return  # created by the manager that dispatched this Job; it comes through the watch
        if prebuilt and workload is not None and not has_controller(workload):
            workload = await self._take_ownership(job, wl_key, workload)
            if workload is None:
                return
        if workload is not None and jp.owner_job(workload) != name:
            self._problem(
                f"Job {namespace}/{name}: Workload {wl_key[2]} exists but is not controlled by this Job; "
                "it is left alone"
            )
            return
        if workload is not None and jp.condition_true(workload, FINISHED):
            await self._drop_finalizer(wl_key, workload)
            return
        if workload is not None and jw.metadata_of(workload).get("deletionTimestamp"):
            if await self._stop(job, workload):
                await self._drop_finalizer(wl_key, workload)
            return
        done, succeeded, message = jp.finished(job)
        if done:
            if workload is not None:
                reason = "Succeeded" if succeeded else "Failed"
                await self._finish(wl_key, workload, reason, message)
            return
        if workload is None:
            if not jp.is_active(job):
                await self._create_workload(job)
            return
        if jp.condition_true(workload, EVICTED):
            if not await self._stop(job, workload):
                return
            current = self.cache.get(("Job", namespace, name)) or job
            if jp.condition_true(workload, QUOTA_RESERVED) and not jp.is_active(current):
                await self._clear_reservation(wl_key, workload)
            return
        if jp.is_suspended(job):
            if jp.condition_true(workload, ADMITTED) and not self.runs_remotely(job, workload):
                await self._start(job, wl_key, workload)
            return
        if not jp.condition_true(workload, ADMITTED):
            await self._stop(job, workload)

    def runs_remotely(self, job: Manifest, workload: Manifest) -> bool:
        """Whether a MultiKueue worker runs this Job, so that it stays suspended here."""
        spec = job.get("spec")
        if isinstance(spec, dict) and spec.get("managedBy") == MULTIKUEUE_CONTROLLER:
            return True
        status = workload.get("status")
        checks = status.get("admissionChecks") if isinstance(status, dict) else None
        for state in jw.as_list(checks):
            if not isinstance(state, dict):
                continue
            check = self.cache.get(("AdmissionCheck", "", str(state.get("name", ""))))
            check_spec = check.get("spec") if check is not None else None
            if isinstance(check_spec, dict) and check_spec.get("controllerName") == MULTIKUEUE_CONTROLLER:
                return True
        return False

    # --- writes --------------------------------------------------------------------

    async def _write(self, what: str, key: Key, call: Callable[[], Any]) -> Manifest | None:
        """Run one write; the object it returns, or None when refused (a reason is recorded)."""
        try:
            result: Manifest = await call()
        except Exception as exc:
            status = status_of(exc)
            if status == CONFLICT:
                self.counters.conflicts += 1
                return None  # a newer version is on its way through the watch
            if status == NOT_FOUND:
                self.cache.forget(key)
                return None
            self._problem(f"{key[0]} {key[1]}/{key[2]}: {what} failed: {reason_of(exc)}")
            return None
        self.cache.put(key, result)
        return result

    async def _create_workload(self, job: Manifest) -> None:
        body = jw.workload_for_job(job)
        meta = body["metadata"]
        key: Key = ("Workload", meta["namespace"], meta["name"])
        try:
            created = await self.objects.create(WORKLOADS, meta["namespace"], body)
        except Exception as exc:
            if status_of(exc) == CONFLICT:
                return  # it exists; its watch event is on its way
            self._problem(
                f"Job {meta['namespace']}/{jw.metadata_of(job).get('name')}: creating Workload "
                f"{meta['name']} failed: {reason_of(exc)}"
            )
            return
        self.cache.put(key, created)
        self.counters.workloads_created += 1

    async def _take_ownership(self, job: Manifest, key: Key, workload: Manifest) -> Manifest | None:
        """``EnsurePrebuiltWorkloadOwnership``: the Job becomes the prebuilt Workload's controller."""
        meta = jw.metadata_of(job)
        uid = str(meta.get("uid", ""))
        owner = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": meta.get("name", ""),
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
        refs = [r for r in jw.as_list(jw.metadata_of(workload).get("ownerReferences")) if isinstance(r, dict)]
        patch_meta: Manifest = {
            "resourceVersion": resource_version(workload),
            "ownerReferences": [*refs, owner],
        }
        if uid:
            patch_meta["labels"] = {JOB_UID_LABEL: uid}
        return await self._write(
            "taking ownership of the prebuilt Workload",
            key,
            lambda: self.objects.patch(WORKLOADS, key[1], key[2], {"metadata": patch_meta}),
        )

    async def _patch_job(self, job: Manifest, patch: Manifest, what: str) -> Manifest | None:
        meta = jw.metadata_of(job)
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        body = {**patch, "metadata": {**patch.get("metadata", {}), "resourceVersion": resource_version(job)}}
        return await self._write(
            what, ("Job", namespace, name), lambda: self.objects.patch(JOBS, namespace, name, body)
        )

    async def _patch_workload_status(self, key: Key, workload: Manifest, status: Manifest, what: str) -> bool:
        body = {"metadata": {"resourceVersion": resource_version(workload)}, "status": status}
        written = await self._write(
            what, key, lambda: self.objects.patch(WORKLOADS, key[1], key[2], body, subresource="status")
        )
        return written is not None

    async def _start(self, job: Manifest, wl_key: Key, workload: Manifest) -> None:
        try:
            info = jp.start_info(workload, self._flavors())
            patch = jp.start_patch(job, info)
        except jp.PodSetConflict as exc:
            await self._finish(wl_key, workload, FAILED_TO_START, str(exc))
            return
        if await self._patch_job(job, patch, "unsuspending the Job") is not None:
            self.counters.jobs_started += 1

    async def _stop(self, job: Manifest, workload: Manifest) -> bool:
        """Suspend the Job, then restore its pod template (``Job.Stop``); True once both are done.

        Two writes, as Kueue does: the pod template of a Job may only change
        while it is suspended. The ``stopping`` annotation marks a Job whose
        template is not restored yet, so a stop cut short is finished later.
        """
        current: Manifest | None = job
        if not jp.is_suspended(job):
            patch = {"spec": {"suspend": True}, "metadata": {"annotations": {jp.STOPPING_ANNOTATION: "true"}}}
            current = await self._patch_job(job, patch, "suspending the Job")
            if current is None:
                return False
            self.counters.jobs_stopped += 1
        assert current is not None
        status = current.get("status")
        if isinstance(status, dict) and status.get("startTime"):
            # The Job controller lets the template change only for a Job that has not started.
            meta = jw.metadata_of(current)
            ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
            body = {"metadata": {"resourceVersion": resource_version(current)}, "status": {"startTime": None}}
            current = await self._write(
                "resetting the Job's start time",
                ("Job", ns, name),
                lambda: self.objects.patch(JOBS, ns, name, body, subresource="status"),
            )
            if current is None:
                return False
        restore = jp.restore_patch(current, workload)
        stopping = jw.annotations_of(current).get(jp.STOPPING_ANNOTATION) is not None
        if restore is None and not stopping:
            return True
        patch = restore or {}
        if stopping:
            patch["metadata"] = {"annotations": {jp.STOPPING_ANNOTATION: None}}
        return await self._patch_job(current, patch, "restoring the Job's pod template") is not None

    async def _clear_reservation(self, key: Key, workload: Manifest) -> None:
        status = cleared_status(workload, self.clock())
        if await self._patch_workload_status(key, workload, status, "clearing the quota reservation"):
            self.counters.reservations_cleared += 1

    async def _finish(self, key: Key, workload: Manifest, reason: str, message: str) -> None:
        if jp.condition_true(workload, FINISHED):
            return
        status = finished_status(workload, reason, message, self.clock())
        if await self._patch_workload_status(
            key, workload, status, f"marking the Workload Finished ({reason})"
        ):
            self.counters.workloads_finished += 1

    async def _drop_finalizer(self, key: Key, workload: Manifest) -> None:
        finalizers = [f for f in jw.as_list(jw.metadata_of(workload).get("finalizers")) if isinstance(f, str)]
        if jw.RESOURCE_IN_USE_FINALIZER not in finalizers:
            return
        kept = [f for f in finalizers if f != jw.RESOURCE_IN_USE_FINALIZER]
        body = {"metadata": {"resourceVersion": resource_version(workload), "finalizers": kept or None}}
        written = await self._write(
            "removing the resource-in-use finalizer",
            key,
            lambda: self.objects.patch(WORKLOADS, key[1], key[2], body),
        )
        if written is not None:
            self.counters.finalizers_removed += 1
