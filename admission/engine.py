"""The admission engine: ``apply(event) -> decisions``.

The engine is Kueue's control plane in one deterministic state machine, in
Kueue's parts:

* :class:`~kueuestream.admission.cache.Cache` — the objects and the quota tree;
* :class:`~kueuestream.admission.queue_manager.QueueManager` — pending workloads per ClusterQueue;
* :class:`~kueuestream.admission.lifecycle.Lifecycle` — every Workload state change;
* :class:`~kueuestream.admission.scheduler.Scheduler` — the scheduling cycle;
* :class:`~kueuestream.admission.status_render.DecisionOutbox` — status out as decisions.

Each event goes to the cache or the lifecycle; unless more of its batch
follows, scheduling cycles then run until nothing more changes, and the
decisions the event caused are returned. Everything is a pure function of the
events applied so far.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kueuestream.admission import job_workload
from kueuestream.admission.api.base import ApiModel
from kueuestream.admission.api.batch import Job
from kueuestream.admission.api.config import Configuration
from kueuestream.admission.api.kueue import ClusterQueue, LocalQueue, ResourceFlavor, Workload
from kueuestream.admission.cache import Cache
from kueuestream.admission.cluster_queue_status import cluster_queue_status
from kueuestream.admission.decode import decode
from kueuestream.admission.events import Action, Decision, Event, EventType, ObjectRef
from kueuestream.admission.fair_sharing import FairSharing
from kueuestream.admission.jobs import is_queued, workload_for_job
from kueuestream.admission.lifecycle import Lifecycle
from kueuestream.admission.queue_manager import QueueManager
from kueuestream.admission.queues import WorkloadKey
from kueuestream.admission.quota import QuotaNode
from kueuestream.admission.scheduler import Scheduler
from kueuestream.admission.state import ClusterQueueRecord, WorkloadRecord
from kueuestream.admission.status_render import DecisionOutbox, workload_status


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while an event is applied, then as it was.

    Settling a large backlog allocates records, queue entries and statuses by
    the hundred thousand; every so many allocations the collector walks the
    whole heap, which took about 45% of settling 15,000 Workloads and found
    nothing to collect. Reference counting still frees what the event drops,
    and the collector runs again between events.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Engine:
    """Kueue's cache, queue manager, workload lifecycle and scheduler behind one ``apply``.

    Scheduling pauses after a cycle that issued preemptions, until the next
    event: whoever stops the evicted jobs (the runtime at once, or a cluster's
    job integration) reports it before the other heads are tried against quota
    the victims still hold. :meth:`next_wakeup_ms` asks for a TICK at once
    while paused, so scheduling goes on even if no stop arrives.
    """

    # A class default, so that a state pickled before the attribute existed still loads.
    paused = False

    def __init__(self, config: Configuration | None = None) -> None:
        self.cache = Cache(config)
        self.queues = QueueManager()
        self.outbox = DecisionOutbox()
        self.lifecycle = Lifecycle(self.cache, self.queues, self.outbox)
        self.fair_sharing = FairSharing(self.cache)
        self.scheduler = Scheduler(self.cache, self.queues, self.lifecycle, self.fair_sharing)
        # Each ClusterQueue as written, for output.
        self.cq_manifests: dict[str, dict[str, Any]] = {}

    # ------------------------------------------------------------------ events

    def apply(self, event: Event) -> list[Decision]:
        with _cyclic_gc_paused():
            return self._apply(event)

    def _apply(self, event: Event) -> list[Decision]:
        lifecycle = self.lifecycle
        lifecycle.now_ms = max(lifecycle.now_ms, event.time_ms)
        if event.type == EventType.UPSERT:
            self._upsert(event)
        elif event.type == EventType.DELETE and event.ref is not None:
            self._delete(event.ref)
        elif event.type == EventType.STOPPED and event.ref is not None:
            rec = self.cache.workloads.get((event.ref.namespace, event.ref.name))
            if rec is not None:
                lifecycle.stopped(rec, at_once=event.stopped_at_once)
        elif event.type == EventType.FINISHED and event.ref is not None:
            rec = self.cache.workloads.get((event.ref.namespace, event.ref.name))
            if rec is not None:
                lifecycle.finish(rec, "Succeeded", "Job finished successfully")
        if not event.batch:
            self._settle()
        cache = self.cache
        fair = self.fair_sharing if cache.config.fair_sharing_enabled and not cache.structure_dirty else None
        return self.outbox.collect(cache.workloads, fair)

    def _upsert(self, event: Event) -> None:
        decoded = decode(event.manifest)
        ref = ObjectRef(decoded.kind, decoded.namespace, decoded.name)
        if decoded.errors:
            self.outbox.emit(Decision(ref, Action.REJECTED, {}, "; ".join(str(e) for e in decoded.errors)))
            self.cache.refuse(ref, decoded.errors)
            return
        obj = decoded.obj
        if obj is None or not decoded.relevant:
            return
        self._store(obj, event.manifest or {})

    def _store(self, obj: ApiModel, manifest: dict[str, Any]) -> None:
        if isinstance(obj, ClusterQueue):
            self.cq_manifests[obj.metadata.name] = manifest
        if isinstance(obj, Workload):
            self.lifecycle.upsert(obj, manifest)
        elif isinstance(obj, Job):
            if is_queued(obj):
                wl = workload_for_job(obj)
                # Printed as Kueue's job framework creates it, with the priority it resolves.
                shown = job_workload.workload_for_job(manifest)
                if obj.metadata.creation_timestamp:
                    # The Workload is created as soon as the Job is seen.
                    shown["metadata"]["creationTimestamp"] = obj.metadata.creation_timestamp
                self.lifecycle.upsert(wl, shown)
                rec = self.cache.workloads.get((wl.metadata.namespace, wl.metadata.name))
                if rec is not None and rec.manifest is shown:
                    shown["spec"]["priority"] = rec.priority
        else:
            self.cache.store(obj)

    def _delete(self, ref: ObjectRef) -> None:
        if ref.kind == "ClusterQueue":
            self.cq_manifests.pop(ref.name, None)
        if ref.kind == "Workload":
            self.lifecycle.delete((ref.namespace, ref.name))
        elif ref.kind == "Job":
            self.lifecycle.delete_job(ref.namespace, ref.name)
        else:
            self.cache.delete(ref)

    def _settle(self) -> None:
        """Rebuild what changed, requeue what is due, then schedule until nothing moves."""
        if self.cache.structure_dirty:
            self._rebuild()
        for key in self.queues.due_held(self.lifecycle.now_ms):
            held = self.cache.workloads.get(key)
            if held is not None:
                self.lifecycle.backoff_finished(held)
        self.lifecycle.exceed_execution_times()
        for root in self.queues.due_roots(self.lifecycle.now_ms):
            node = self.cache.root_named(root)
            if node is not None:
                for cq_node in node.cluster_queues():
                    self.queues.requeue_inadmissible(cq_node.name)
        self.paused = False
        while self.scheduler.schedule():
            if self.scheduler.evicted_in_cycle:
                self.paused = True
                break

    def _rebuild(self) -> None:
        """Rebuild the quota tree and queues from the objects, then refill them.

        Parked workloads stay parked, and the trees the change concerns have
        them retried after the batch period (see :mod:`tree_changes`); after a
        change of what workloads request, every pending workload is tried afresh.
        """
        cache, queues = self.cache, self.queues
        changes = cache.take_changes()
        parked = {} if changes.fresh else queues.parked()
        cache.rebuild()
        queues.reset(cache.cqs, changes.fresh)
        self.lifecycle.drain_stopped_queues()
        self.lifecycle.place_pending(parked)
        if not changes.fresh:
            for root in changes.retried_roots(cache.cqs, cache.cohorts):
                queues.requeue_later(root, self.lifecycle.now_ms)

    def next_wakeup_ms(self, *, deadlines: bool = True) -> int | None:
        """When a TICK would let parked workloads try again or, with ``deadlines``, would find
        a workload past its maximum execution time; None when nothing waits.

        While paused after a preemption, now. A clock that runs to quiescence
        rather than to a wall-clock time leaves ``deadlines`` out: it would
        otherwise run every admitted workload out of time.
        """
        if self.paused:
            return self.lifecycle.now_ms
        wakeup = self.queues.next_wakeup_ms()
        deadline = self.lifecycle.deadlines.next_ms() if deadlines else None
        if deadline is None:
            return wakeup
        return deadline if wakeup is None else min(wakeup, deadline)

    # ----------------------------------------------------------------- output

    def status_of(self, rec: WorkloadRecord) -> dict[str, Any]:
        """The Workload's ``status`` as Kueue writes it."""
        return workload_status(rec)

    def cluster_queue_objects(self) -> list[dict[str, Any]]:
        """Every ClusterQueue of the quota tree as written, with its status counts and usage, by name."""
        out = []
        workloads = self.cache.workloads.values()
        for name in sorted(self.cache.cqs):
            manifest = dict(self.cq_manifests.get(name, {}))
            manifest["status"] = cluster_queue_status(self.cache.cqs[name], workloads)
            out.append(manifest)
        return out

    def workload_objects(self) -> list[dict[str, Any]]:
        """Every workload as a manifest carrying its current status, by namespace and name."""
        out = []
        workloads = self.cache.workloads
        for key in sorted(workloads):
            rec = workloads[key]
            manifest = dict(rec.manifest)
            if rec.deactivated_by:
                # Kueue deactivated it (a Rejected check, its maximum execution time).
                manifest["spec"] = {**manifest.get("spec", {}), "active": False}
            manifest["status"] = workload_status(rec)
            out.append(manifest)
        return out

    # ------------------------------------------------------ what the agents read

    @property
    def config(self) -> Configuration:
        return self.cache.config

    @property
    def warnings(self) -> list[str]:
        return self.cache.warnings

    @property
    def flavors(self) -> dict[str, ResourceFlavor]:
        return self.cache.flavors

    @property
    def local_queues(self) -> dict[WorkloadKey, LocalQueue]:
        return self.cache.local_queues

    @property
    def cqs(self) -> dict[str, ClusterQueueRecord]:
        return self.cache.cqs

    @property
    def cohorts(self) -> dict[str, QuotaNode]:
        return self.cache.cohorts

    @property
    def workloads(self) -> dict[WorkloadKey, WorkloadRecord]:
        return self.cache.workloads

    @property
    def now_ms(self) -> int:
        return self.lifecycle.now_ms

    @property
    def cycles(self) -> int:
        return self.scheduler.cycles

    @property
    def structure_dirty(self) -> bool:
        return self.cache.structure_dirty

    @structure_dirty.setter
    def structure_dirty(self, value: bool) -> None:
        # Set by a shard taking in moved workloads: placing them waits for the next rebuild.
        self.cache.structure_dirty = value
