"""The admission engine: ``apply(event) -> decisions``.

It keeps the objects Kueue's cache and queue manager keep, and after each
event (or batch of events) runs scheduling cycles until nothing more changes.
Everything here is a pure function of the events applied so far.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction
from typing import Any

from kueuestream.admission import dra
from kueuestream.admission.api.base import ApiModel
from kueuestream.admission.api.batch import Job
from kueuestream.admission.api.config import Configuration
from kueuestream.admission.api.core import Namespace, PodSpec
from kueuestream.admission.api.kueue import (
    ClusterQueue,
    Cohort,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    Workload,
    WorkloadPriorityClass,
)
from kueuestream.admission.api.scheduling import PriorityClass
from kueuestream.admission.assignment import (
    Assignment,
    GroupView,
    Mode,
    PodSetAssignment,
    PodSetRequest,
    QueueView,
    assign_flavors,
)
from kueuestream.admission.decode import decode, dump
from kueuestream.admission.events import Action, Decision, Event, EventType, ObjectRef
from kueuestream.admission.fair_sharing import FairSharing
from kueuestream.admission.jobs import JOB_UID_LABEL, is_queued, workload_for_job
from kueuestream.admission.preemption import (
    Candidate,
    Preemptor,
    Target,
    classical_targets,
    fits,
    preemption_message,
)
from kueuestream.admission.quantity import resource_quantity, resource_value
from kueuestream.admission.queues import PendingQueue, WorkloadKey
from kueuestream.admission.quota import FR, Quota, QuotaNode, compute_subtree_quotas
from kueuestream.admission.requests import pod_requests, scale, without_prefixes
from kueuestream.admission.selectors import label_selector_matches
from kueuestream.admission.state import ClusterQueueRecord, Phase, WorkloadRecord
from kueuestream.admission.status import (
    ADMITTED,
    EVICTED,
    FINISHED,
    MSG_ADMITTED,
    MSG_NO_RESERVATION,
    PREEMPTED,
    QUOTA_RESERVED,
    REASON_INADMISSIBLE,
    REASON_NO_RESERVATION,
    REASON_PENDING,
    REQUEUED,
    Conditions,
)
from kueuestream.admission.timefmt import parse_rfc3339
from kueuestream.admission.validation import config_warnings

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
MSG_NO_LONGER_FITS = "Workload no longer fits after processing another workload"
MSG_OVERLAPPING = "Workload has overlapping preemption targets with another workload"
MSG_NAMESPACE_MISMATCH = "Workload namespace doesn't match ClusterQueue selector"
MSG_DEACTIVATED = "The workload is deactivated"
# Kueue moves a cohort tree's inadmissible workloads back to their queues a second
# after capacity frees there, in one batch for everything freed meanwhile.
REQUEUE_BATCH_MS = 1000


class EntryKind(Enum):
    NOT_NOMINATED = 0
    FIT = 1
    PREEMPT = 2


@dataclass(slots=True)
class Entry:
    rec: WorkloadRecord
    cq: ClusterQueueRecord
    kind: EntryKind
    assignment: Assignment | None = None
    targets: list[Target] = field(default_factory=list)
    message: str = ""
    reason: str = REASON_PENDING
    # NamespaceMismatch never goes straight back to the head, even under StrictFIFO.
    namespace_mismatch: bool = False


@dataclass(slots=True)
class CycleState:
    """Usage a cycle has promised but not yet made real, undone when it ends."""

    undo: list[tuple[QuotaNode, FR, int]] = field(default_factory=list)
    targets: set[WorkloadKey] = field(default_factory=set)

    def take(self, node: QuotaNode, usage: dict[FR, int]) -> None:
        for fr, amount in sorted(usage.items()):
            node.add_usage(fr, amount)
            self.undo.append((node, fr, amount))

    def release(self, node: QuotaNode, usage: dict[FR, int]) -> None:
        for fr, amount in sorted(usage.items()):
            node.remove_usage(fr, amount)
            self.undo.append((node, fr, -amount))

    def rollback(self) -> None:
        for node, fr, amount in reversed(self.undo):
            if amount > 0:
                node.remove_usage(fr, amount)
            else:
                node.add_usage(fr, -amount)
        self.undo.clear()


def _constraints(spec: PodSpec) -> str:
    """What of a pod spec decides which flavors may take it, as comparable text."""
    return spec.model_dump_json(include={"node_selector", "affinity", "tolerations"})


def _quota_value(resource: str, q: Any) -> int:
    return resource_value(resource, q)


class AdmittedView(Mapping[str, Sequence[Candidate]]):
    """Admitted workloads per ClusterQueue as preemption candidates, built on first look."""

    def __init__(self, build: Callable[[str], list[Candidate]], names: Sequence[str]) -> None:
        self._build = build
        self._names = names
        self._cache: dict[str, list[Candidate]] = {}

    def __getitem__(self, cq_name: str) -> list[Candidate]:
        if cq_name not in self._names:
            raise KeyError(cq_name)
        if cq_name not in self._cache:
            self._cache[cq_name] = self._build(cq_name)
        return self._cache[cq_name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class Engine:
    """Kueue's cache, queue manager and scheduler as one deterministic state machine."""

    def __init__(self, config: Configuration | None = None) -> None:
        # A configuration given here wins over any in the log: it is how what-if runs work.
        self.pinned_config = config is not None
        self.config = config or Configuration()
        self.warnings: list[str] = config_warnings(self.config)
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cq_objs: dict[str, ClusterQueue] = {}
        self.cohort_objs: dict[str, Cohort] = {}
        self.local_queues: dict[WorkloadKey, LocalQueue] = {}
        self.workload_classes: dict[str, int] = {}
        self.pod_classes: dict[str, int] = {}
        self.namespaces: dict[str, dict[str, str]] = {}
        self.dra = dra.DraState()
        self.cqs: dict[str, ClusterQueueRecord] = {}
        self.cq_names: list[str] = []
        self.cq_nodes: dict[str, QuotaNode] = {}
        self.cohorts: dict[str, QuotaNode] = {}
        self.cohort_problems: dict[str, str] = {}
        self.workloads: dict[WorkloadKey, WorkloadRecord] = {}
        # Admitted workloads by ClusterQueue, so preemption looks only where it may act.
        self.admitted: dict[str, dict[WorkloadKey, WorkloadRecord]] = {}
        # Preemption candidates per ClusterQueue, dropped whenever its admitted set changes.
        self.candidate_cache: dict[str, list[Candidate]] = {}
        # Pending workloads that no ClusterQueue can take, with the reason.
        self.orphans: dict[WorkloadKey, str] = {}
        self.structure_dirty = True
        self.requests_generation = 0
        # Cohort trees with freed capacity, and when their parked workloads get another try.
        self.requeue_due: dict[str, int] = {}
        # ClusterQueues whose queue may have a workload to try.
        self.ready: set[str] = set()
        self.changed: dict[WorkloadKey, None] = {}
        self.pending_decisions: list[Decision] = []
        self.node_status: dict[tuple[str, str], dict[str, Any]] = {}
        self.now_ms = 0
        self.cycles = 0
        self.fair_sharing = FairSharing(self)

    # ------------------------------------------------------------------ events

    def apply(self, event: Event) -> list[Decision]:
        self.now_ms = max(self.now_ms, event.time_ms)
        if event.type == EventType.UPSERT:
            self._upsert(event)
        elif event.type == EventType.DELETE and event.ref is not None:
            self._delete(event.ref)
        elif event.type == EventType.STOPPED and event.ref is not None:
            rec = self.workloads.get((event.ref.namespace, event.ref.name))
            if rec is not None:
                self._stopped(rec)
        elif event.type == EventType.FINISHED and event.ref is not None:
            rec = self.workloads.get((event.ref.namespace, event.ref.name))
            if rec is not None:
                self._finish(rec, "Succeeded", "Job finished successfully")
        if not event.batch:
            self._settle()
        return self._collect()

    def _reject(self, ref: ObjectRef, message: str) -> None:
        self.pending_decisions.append(Decision(ref, Action.REJECTED, {}, message))

    def _upsert(self, event: Event) -> None:
        decoded = decode(event.manifest)
        ref = ObjectRef(decoded.kind, decoded.namespace, decoded.name)
        if decoded.errors:
            self._reject(ref, "; ".join(str(e) for e in decoded.errors))
            if self.dra.refuse(ref, decoded.errors):
                self._invalidate_requests()
            return
        obj = decoded.obj
        if obj is None or not decoded.relevant:
            return
        self._store(obj, event.manifest or {})

    def _store(self, obj: ApiModel, manifest: dict[str, Any]) -> None:
        if isinstance(obj, Workload):
            self._upsert_workload(obj, manifest)
        elif isinstance(obj, Job):
            if is_queued(obj):
                wl = workload_for_job(obj)
                self._upsert_workload(wl, dump(wl))
        elif isinstance(obj, Configuration):
            if not self.pinned_config:
                self.config = obj
                self.warnings = config_warnings(obj)
                self._invalidate_requests()
        elif isinstance(obj, ResourceFlavor):
            self.flavors[obj.metadata.name] = obj
            self.structure_dirty = True
        elif isinstance(obj, ClusterQueue):
            self.cq_objs[obj.metadata.name] = obj
            self.structure_dirty = True
        elif isinstance(obj, Cohort):
            self.cohort_objs[obj.metadata.name] = obj
            self.structure_dirty = True
        elif isinstance(obj, LocalQueue):
            self.local_queues[(obj.metadata.namespace, obj.metadata.name)] = obj
            self.structure_dirty = True
        elif isinstance(obj, Namespace):
            self.namespaces[obj.metadata.name] = dict(obj.metadata.labels)
            self.structure_dirty = True
        elif isinstance(obj, WorkloadPriorityClass):
            self.workload_classes[obj.metadata.name] = obj.value
        elif isinstance(obj, PriorityClass):
            self.pod_classes[obj.metadata.name] = obj.value
        elif self.dra.store(obj):
            self._invalidate_requests()

    def _invalidate_requests(self) -> None:
        self.requests_generation += 1
        self.structure_dirty = True

    def _delete(self, ref: ObjectRef) -> None:
        kind, key = ref.kind, (ref.namespace, ref.name)
        if kind == "Workload":
            self._delete_workload(key)
        elif kind == "Job":
            # The Workload is named job-<name>-<5 hex>; the suffix tells same-named owners apart.
            prefix = f"job-{ref.name}-"
            for wkey in sorted(self.workloads):
                name = wkey[1]
                if wkey[0] == ref.namespace and name.startswith(prefix) and len(name) == len(prefix) + 5:
                    self._delete_workload(wkey)
        elif kind == "ResourceFlavor":
            self.structure_dirty |= self.flavors.pop(ref.name, None) is not None
        elif kind == "ClusterQueue":
            self.structure_dirty |= self.cq_objs.pop(ref.name, None) is not None
        elif kind == "Cohort":
            self.structure_dirty |= self.cohort_objs.pop(ref.name, None) is not None
        elif kind == "LocalQueue":
            self.structure_dirty |= self.local_queues.pop(key, None) is not None
        elif kind == "Namespace":
            self.structure_dirty |= self.namespaces.pop(ref.name, None) is not None
        elif kind == "WorkloadPriorityClass":
            self.workload_classes.pop(ref.name, None)
        elif kind == "PriorityClass":
            self.pod_classes.pop(ref.name, None)
        elif kind == "Configuration":
            if not self.pinned_config:
                self.config = Configuration()
                self.warnings = []
                self._invalidate_requests()
        elif self.dra.delete(ref):
            self._invalidate_requests()

    # --------------------------------------------------------------- workloads

    def _resolve_priority(self, wl: Workload) -> int:
        spec = wl.spec
        if spec.priority is not None:
            return spec.priority
        ref = spec.priority_class_ref
        name = ref.name if ref and ref.name else spec.priority_class_name
        kind = ref.kind if ref and ref.kind else ""
        if name:
            from_workload_class = kind == "WorkloadPriorityClass" or (
                spec.priority_class_source == "kueue.x-k8s.io/workloadpriorityclass"
            )
            if from_workload_class or (not kind and name in self.workload_classes):
                if name in self.workload_classes:
                    return self.workload_classes[name]
            elif name in self.pod_classes:
                return self.pod_classes[name]
        for ps in spec.pod_sets:
            pod = ps.template.spec
            if pod.priority is not None:
                return pod.priority
            if pod.priority_class_name in self.pod_classes:
                return self.pod_classes[pod.priority_class_name]
        return 0

    def _upsert_workload(self, wl: Workload, manifest: dict[str, Any]) -> None:
        key = (wl.metadata.namespace, wl.metadata.name)
        rec = self.workloads.get(key)
        finished = any(c.type == FINISHED and c.status == "True" for c in wl.status.conditions)
        if rec is not None:
            self._update_workload(rec, wl, manifest, finished)
            return
        created = parse_rfc3339(wl.metadata.creation_timestamp or "")
        conditions = Conditions.from_list(wl.status.conditions, parse_rfc3339, self.now_ms)
        rec = WorkloadRecord(
            key=key,
            obj=wl,
            manifest=manifest,
            created_ms=self.now_ms if created is None else created,
            priority=self._resolve_priority(wl),
            conditions=conditions,
        )
        self.workloads[key] = rec
        admission = wl.status.admission
        if finished:
            rec.phase = Phase.FINISHED
            rec.last_action = Action.FINISHED
        elif admission is not None and conditions.is_true(QUOTA_RESERVED):
            self._adopt_admitted(rec, admission.cluster_queue, admission.pod_set_assignments)
        else:
            self._place(rec)
        # What it arrived with is what the cluster already shows; only changes are decisions.
        rec.last_status = self.status_of(rec) if wl.status.conditions else {}
        self.changed[key] = None

    def _update_workload(
        self, rec: WorkloadRecord, wl: Workload, manifest: dict[str, Any], finished: bool
    ) -> None:
        was_active = rec.active
        rec.obj, rec.manifest = wl, manifest
        if rec.phase == Phase.FINISHED:
            return
        if finished:
            fin = next(c for c in wl.status.conditions if c.type == FINISHED)
            self._finish(rec, fin.reason or "Succeeded", fin.message)
            return
        if rec.phase == Phase.ADMITTED:
            # An admitted workload's pod sets are immutable; only deactivation matters.
            if was_active and not wl.spec.active and not rec.evicting:
                self._evict(rec, "Deactivated", MSG_DEACTIVATED, None)
            return
        rec.requests_generation = -1
        if wl.spec.priority is not None:
            rec.priority = wl.spec.priority
        self._unplace(rec)
        self._place(rec)
        self.changed[rec.key] = None

    def _adopt_admitted(self, rec: WorkloadRecord, cq_name: str, assignments: Iterable[Any]) -> None:
        """A workload admitted before we started: its usage is a fact, not a decision."""
        rec.phase = Phase.ADMITTED
        rec.cluster_queue = cq_name
        rec.last_action = Action.ADMITTED
        reserved = rec.conditions.get(QUOTA_RESERVED)
        rec.reserved_ms = reserved.time_ms if reserved else self.now_ms
        rec.evicting = rec.conditions.is_true(EVICTED)
        usage: dict[FR, int] = {}
        pod_sets = {ps.name: ps for ps in rec.obj.spec.pod_sets}
        for psa in assignments:
            ps = pod_sets.get(psa.name)
            count = psa.count if psa.count is not None else (ps.count if ps else 0)
            out = PodSetAssignment(name=psa.name, count=count)
            for resource, flavor in sorted(psa.flavors.items()):
                if resource in psa.resource_usage:
                    amount = resource_value(resource, psa.resource_usage[resource])
                elif ps is not None:
                    amount = scale(pod_requests(ps.template.spec), out.count).get(resource, 0)
                else:
                    amount = 0
                out.flavors[resource] = flavor
                out.usage[resource] = amount
                usage[(flavor, resource)] = usage.get((flavor, resource), 0) + amount
            rec.assignment.append(out)
        rec.usage = usage
        self.admitted.setdefault(cq_name, {})[rec.key] = rec
        self.candidate_cache.pop(cq_name, None)
        if not self.structure_dirty and cq_name in self.cqs:
            node = self.cqs[cq_name].node
            for fr, amount in sorted(usage.items()):
                node.add_usage(fr, amount)

    def _delete_workload(self, key: WorkloadKey) -> None:
        rec = self.workloads.pop(key, None)
        if rec is None:
            return
        if rec.phase == Phase.ADMITTED:
            self._release(rec)
        self._unplace(rec)
        self.changed.pop(key, None)
        self.pending_decisions.append(
            Decision(ObjectRef("Workload", key[0], key[1]), Action.DELETED, {}, "deleted")
        )

    def _release(self, rec: WorkloadRecord) -> None:
        self.admitted.get(rec.cluster_queue, {}).pop(rec.key, None)
        self.candidate_cache.pop(rec.cluster_queue, None)
        cq = self.cqs.get(rec.cluster_queue)
        if cq is not None and not self.structure_dirty:
            for fr, amount in sorted(rec.usage.items()):
                cq.node.remove_usage(fr, amount)
            self._requeue_later(cq.node.root.name)
        rec.usage = {}
        rec.assignment = []

    def _finish(self, rec: WorkloadRecord, reason: str, message: str) -> None:
        if rec.phase == Phase.ADMITTED:
            self._release(rec)
        else:
            self._unplace(rec)
        rec.phase = Phase.FINISHED
        rec.evicting = False
        rec.conditions.set(FINISHED, True, reason, message, self.now_ms)
        self._mark(rec, Action.FINISHED)

    def _mark(self, rec: WorkloadRecord, action: Action) -> None:
        rec.last_action = action
        self.changed[rec.key] = None

    def _ensure_requests(self, rec: WorkloadRecord) -> None:
        if rec.requests_generation == self.requests_generation:
            return
        rec.requests_generation = self.requests_generation
        rec.requests_problem = ""
        config = self.config
        prefixes = config.resources.exclude_resource_prefixes
        only_declared = config.quota_check == "OnlyDeclared"
        devices = (
            self.dra.count(rec.obj, config)
            if config.gate("DynamicResourceAllocation")
            else dra.Counted({}, "")
        )
        if devices.problem:
            rec.pod_sets, rec.requests_problem = None, devices.problem
            return
        out: list[PodSetRequest] = []
        for ps in rec.obj.spec.pod_sets:
            per_pod = pod_requests(ps.template.spec)
            if not only_declared and prefixes:
                per_pod = without_prefixes(per_pod, prefixes)
            for resource, amount in devices.per_pod.get(ps.name, {}).items():
                per_pod[resource] = per_pod.get(resource, 0) + amount
            out.append(PodSetRequest(ps.name, ps.count, scale(per_pod, ps.count), ps.template.spec))
        rec.pod_sets = out
        rec.equivalence = (
            rec.key[0],
            rec.priority,
            tuple(
                (ps.name, ps.count, tuple(sorted(ps.requests.items())), _constraints(ps.spec)) for ps in out
            ),
        )

    def _set_pending(self, rec: WorkloadRecord, reason: str, message: str) -> None:
        before = rec.conditions.get(QUOTA_RESERVED)
        if before and before.status == "False" and (before.reason, before.message) == (reason, message):
            return
        rec.conditions.set(QUOTA_RESERVED, False, reason, message, self.now_ms)
        self._mark(rec, Action.PENDING)

    def _orphan(self, rec: WorkloadRecord, message: str) -> None:
        self.orphans[rec.key] = message
        rec.cluster_queue = ""
        self._set_pending(rec, REASON_INADMISSIBLE, message)

    def _place(self, rec: WorkloadRecord) -> None:
        """Put a pending workload in its ClusterQueue's queue, or say why it cannot be."""
        if self.structure_dirty:
            return  # the rebuild places every pending workload
        if not rec.active:
            self._orphan(rec, MSG_DEACTIVATED)
            return
        self._ensure_requests(rec)
        if rec.pod_sets is None:
            self._orphan(rec, rec.requests_problem)
            return
        lq_name = rec.obj.spec.queue_name
        lq = self.local_queues.get((rec.key[0], lq_name))
        if lq is None:
            self._orphan(rec, f"LocalQueue {lq_name} doesn't exist")
            return
        if lq.spec.stop_policy != "None":
            self._orphan(rec, f"LocalQueue {lq_name} is inactive")
            return
        cq = self.cqs.get(lq.spec.cluster_queue)
        if cq is None:
            self._orphan(rec, f"ClusterQueue {lq.spec.cluster_queue} doesn't exist")
            return
        if cq.inactive_reason:
            self._orphan(rec, f"ClusterQueue {cq.name} is inactive")
            return
        self.orphans.pop(rec.key, None)
        rec.cluster_queue = cq.name
        stated = rec.conditions.get(QUOTA_RESERVED) is not None
        cq.queue.activate(rec.key, rec.order_key(), rec.equivalence, stated)
        self.ready.add(cq.name)

    def _unplace(self, rec: WorkloadRecord) -> None:
        self.orphans.pop(rec.key, None)
        cq = self.cqs.get(rec.cluster_queue)
        if cq is not None:
            cq.queue.remove(rec.key)

    # ------------------------------------------------------------- structure

    def _rebuild(self) -> None:
        """Rebuild the quota tree and queues from the objects, then refill them."""
        self.structure_dirty = False
        self.cohorts = {}
        self.cohort_problems = {}

        def cohort_node(name: str) -> QuotaNode:
            node = self.cohorts.get(name)
            if node is None:
                node = QuotaNode(name, is_cluster_queue=False)
                obj = self.cohort_objs.get(name)
                if obj is not None:
                    node.quotas = self._quotas(obj.spec.resource_groups)
                    node.fair_weight = self._weight(obj.spec.fair_sharing)
                self.cohorts[name] = node
            return node

        for name in sorted(self.cohort_objs):
            cohort_node(name)
        for name in sorted(self.cq_objs):
            if self.cq_objs[name].spec.cohort:
                cohort_node(self.cq_objs[name].spec.cohort)
        for name in sorted(self.cohorts):
            obj = self.cohort_objs.get(name)
            if obj is not None and obj.spec.parent_name:
                parent = cohort_node(obj.spec.parent_name)
                child = self.cohorts[name]
                if self._creates_cycle(child, parent):
                    self.cohort_problems[name] = (
                        f"Cohort {name} cannot have parent {parent.name}: it would make a cycle"
                    )
                    continue
                child.parent = parent
                parent.children.append(child)

        self.cqs = {}
        for name in sorted(self.cq_objs):
            cq_obj = self.cq_objs[name]
            node = QuotaNode(name, is_cluster_queue=True)
            node.quotas = self._quotas(cq_obj.spec.resource_groups)
            node.fair_weight = self._weight(cq_obj.spec.fair_sharing)
            if cq_obj.spec.cohort:
                parent = self.cohorts[cq_obj.spec.cohort]
                node.parent = parent
                parent.children.append(node)
            self.cqs[name] = ClusterQueueRecord(
                obj=cq_obj,
                node=node,
                view=self._view(cq_obj, node),
                queue=PendingQueue(strict_fifo=cq_obj.spec.queueing_strategy == "StrictFIFO"),
                inactive_reason=self._inactive_reason(cq_obj),
            )
        self.cq_names = sorted(self.cqs)
        self.cq_nodes = {name: self.cqs[name].node for name in self.cq_names}
        for node in self.cohorts.values():
            node.children.sort(key=lambda n: (n.is_cluster_queue, n.name))
        for root in self._roots():
            compute_subtree_quotas(root)

        for key in sorted(self.workloads):
            rec = self.workloads[key]
            if rec.phase == Phase.ADMITTED and rec.cluster_queue in self.cqs:
                node = self.cqs[rec.cluster_queue].node
                for fr, amount in sorted(rec.usage.items()):
                    node.add_usage(fr, amount)
        self._drain_stopped_queues()
        # Every pending workload is placed again; inadmissible ones get another try.
        self.orphans.clear()
        for key in sorted(self.workloads):
            rec = self.workloads[key]
            if rec.phase == Phase.PENDING:
                self._place(rec)

    def _creates_cycle(self, child: QuotaNode, parent: QuotaNode) -> bool:
        node: QuotaNode | None = parent
        while node is not None:
            if node is child:
                return True
            node = node.parent
        return False

    def _roots(self) -> list[QuotaNode]:
        roots = [n for n in self.cohorts.values() if n.parent is None]
        roots += [cq.node for cq in self.cqs.values() if cq.node.parent is None]
        return sorted(roots, key=lambda n: (n.is_cluster_queue, n.name))

    def _inactive_reason(self, obj: ClusterQueue) -> str:
        if obj.spec.stop_policy != "None":
            return "Stopped"
        for group in obj.spec.resource_groups:
            for flavor in group.flavors:
                if flavor.name not in self.flavors:
                    return f"FlavorNotFound: {flavor.name}"
        node = self.cohorts.get(obj.spec.cohort) if obj.spec.cohort else None
        while node is not None:
            if node.name in self.cohort_problems:
                return self.cohort_problems[node.name]
            node = node.parent
        return ""

    def _drain_stopped_queues(self) -> None:
        for key in sorted(self.workloads):
            rec = self.workloads[key]
            if rec.phase != Phase.ADMITTED or rec.evicting:
                continue
            cq_obj = self.cq_objs.get(rec.cluster_queue)
            lq = self.local_queues.get((key[0], rec.obj.spec.queue_name))
            if cq_obj is not None and cq_obj.spec.stop_policy == "HoldAndDrain":
                self._evict(rec, "ClusterQueueStopped", "The ClusterQueue is stopped", None)
            elif lq is not None and lq.spec.stop_policy == "HoldAndDrain":
                self._evict(rec, "LocalQueueStopped", "The LocalQueue is stopped", None)

    @staticmethod
    def _weight(fair: Any) -> Fraction:
        if fair is None or fair.weight is None:
            return Fraction(1)
        weight: Fraction = fair.weight.value
        return weight

    @staticmethod
    def _quotas(groups: list[ResourceGroup]) -> dict[FR, Quota]:
        quotas: dict[FR, Quota] = {}
        for group in groups:
            for flavor in group.flavors:
                for rq in flavor.resources:
                    quotas[(flavor.name, rq.name)] = Quota(
                        nominal=_quota_value(rq.name, rq.nominal_quota),
                        borrowing_limit=None
                        if rq.borrowing_limit is None
                        else _quota_value(rq.name, rq.borrowing_limit),
                        lending_limit=None
                        if rq.lending_limit is None
                        else _quota_value(rq.name, rq.lending_limit),
                    )
        return quotas

    def _view(self, obj: ClusterQueue, node: QuotaNode) -> QueueView:
        spec = obj.spec
        fair = self.config.fair_sharing_enabled
        p = spec.preemption
        return QueueView(
            name=obj.metadata.name,
            node=node,
            groups=tuple(
                GroupView(tuple(g.covered_resources), tuple(f.name for f in g.flavors))
                for g in spec.resource_groups
            ),
            when_can_borrow=spec.flavor_fungibility.when_can_borrow,
            when_can_preempt=spec.flavor_fungibility.when_can_preempt,
            preempt_while_borrowing=p.borrow_within_cohort.policy != "Never"
            or (fair and p.reclaim_within_cohort != "Never"),
            can_preempt=p.within_cluster_queue != "Never" or p.reclaim_within_cohort != "Never",
        )

    # -------------------------------------------------------------- scheduling

    def _settle(self) -> None:
        if self.structure_dirty:
            self._rebuild()
        for root in sorted(self.requeue_due):
            if self.requeue_due[root] > self.now_ms:
                continue
            del self.requeue_due[root]
            node = self.cohorts.get(root) or (self.cqs[root].node if root in self.cqs else None)
            if node is None:
                continue
            for cq_node in node.cluster_queues():
                if self.cqs[cq_node.name].queue.requeue_inadmissible():
                    self.ready.add(cq_node.name)
        while self._cycle():
            pass

    def _requeue_later(self, root: str) -> None:
        # Like Kueue's delaying work queue: due a batch period after the first request,
        # and later requests until then ride along.
        self.requeue_due.setdefault(root, self.now_ms + REQUEUE_BATCH_MS)

    def next_wakeup_ms(self) -> int | None:
        """When a TICK would let parked workloads try again, or None when nothing waits."""
        return min(self.requeue_due.values()) if self.requeue_due else None

    def _namespace_labels(self, namespace: str) -> dict[str, str]:
        labels = dict(self.namespaces.get(namespace, {}))
        labels.setdefault(NAMESPACE_NAME_LABEL, namespace)
        return labels

    def _candidates(self, cq_name: str) -> list[Candidate]:
        cached = self.candidate_cache.get(cq_name)
        if cached is None:
            found = self.admitted.get(cq_name, {})
            cached = [self._candidate(found[key]) for key in sorted(found)]
            self.candidate_cache[cq_name] = cached
        return cached

    @staticmethod
    def _candidate(rec: WorkloadRecord) -> Candidate:
        return Candidate(
            key=rec.key,
            cluster_queue=rec.cluster_queue,
            priority=rec.priority,
            created_ms=rec.created_ms,
            reserved_ms=rec.reserved_ms,
            usage=rec.usage,
            evicting=rec.evicting,
        )

    def _nominate(self, rec: WorkloadRecord, cq: ClusterQueueRecord) -> Entry:
        labels = self._namespace_labels(rec.key[0])
        if not label_selector_matches(cq.obj.spec.namespace_selector, labels):
            return Entry(
                rec, cq, EntryKind.NOT_NOMINATED, message=MSG_NAMESPACE_MISMATCH, namespace_mismatch=True
            )
        assert rec.pod_sets is not None
        only_declared = self.config.quota_check == "OnlyDeclared"
        assignment = assign_flavors(cq.view, rec.pod_sets, self.flavors, only_declared)
        if assignment.mode == Mode.FIT:
            return Entry(rec, cq, EntryKind.FIT, assignment)
        if assignment.mode == Mode.PREEMPT:
            targets = self._targets(rec, cq, assignment)
            if targets:
                return Entry(rec, cq, EntryKind.PREEMPT, assignment, targets, assignment.message)
        return Entry(rec, cq, EntryKind.NOT_NOMINATED, assignment, message=assignment.message)

    def _targets(self, rec: WorkloadRecord, cq: ClusterQueueRecord, assignment: Assignment) -> list[Target]:
        pre = Preemptor(
            cluster_queue=cq.name,
            priority=rec.priority,
            created_ms=rec.created_ms,
            usage=assignment.usage,
            preempt_frs=frozenset(assignment.preempt_frs),
        )
        nodes = self.cq_nodes
        admitted = AdmittedView(self._candidates, self.cq_names)
        if self.config.fair_sharing_enabled:
            return self.fair_sharing.targets(pre, cq, nodes, admitted)
        return classical_targets(pre, cq.obj.spec.preemption, cq.node, nodes, admitted)

    def _cycle(self) -> bool:
        heads: list[Entry] = []
        for name in sorted(self.ready):
            cq = self.cqs.get(name)
            key = cq.queue.pop() if cq is not None and not cq.inactive_reason else None
            if cq is None or key is None:
                self.ready.discard(name)
            else:
                heads.append(self._nominate(self.workloads[key], cq))
        if not heads:
            return False
        self.cycles += 1
        state = CycleState()
        progress = False
        try:
            for entry in self._ordered(heads):
                progress |= self._process(entry, state)
        finally:
            state.rollback()
        return progress

    def _ordered(self, entries: list[Entry]) -> Iterable[Entry]:
        if self.config.fair_sharing_enabled:
            return self.fair_sharing.order(entries)
        by_priority = self.config.gate("PrioritySortingWithinCohort")

        def key(e: Entry) -> tuple[object, ...]:
            borrows = e.assignment.borrows if e.assignment else False
            prio = -e.rec.priority if by_priority else 0
            return (borrows, prio, e.rec.created_ms, e.rec.key)

        return sorted(entries, key=key)

    def _requeue(self, entry: Entry, immediate: bool) -> bool:
        """Back to the head, or parked until its cohort changes; True when parked."""
        rec, cq = entry.rec, entry.cq
        if immediate or (cq.queue.strict_fifo and not entry.namespace_mismatch):
            cq.queue.activate(rec.key, rec.order_key(), rec.equivalence)
            self.ready.add(cq.name)
            return False
        # Equivalent workloads wait with it and, if they never had one, take its reason.
        for key in cq.queue.park(rec.key, rec.order_key(), rec.equivalence):
            self._set_pending(self.workloads[key], entry.reason, entry.message)
        return True

    def _process(self, entry: Entry, state: CycleState) -> bool:
        rec, cq = entry.rec, entry.cq
        if entry.kind == EntryKind.NOT_NOMINATED:
            rec.sticky = False
            self._set_pending(rec, entry.reason, entry.message)
            return self._requeue(entry, immediate=False)
        assignment = entry.assignment
        assert assignment is not None
        if entry.kind == EntryKind.FIT:
            if fits(cq.node, assignment.usage, allow_borrowing=True):
                self._admit(rec, cq, assignment)
                return True
            self._set_pending(rec, REASON_PENDING, MSG_NO_LONGER_FITS)
            self._requeue(entry, immediate=True)
            return False
        if any(t.candidate.key in state.targets for t in entry.targets):
            self._set_pending(rec, REASON_PENDING, MSG_OVERLAPPING)
            self._requeue(entry, immediate=True)
            return False
        mark = len(state.undo)
        for target in entry.targets:
            victim_node = self.cqs[target.candidate.cluster_queue].node
            state.release(victim_node, dict(target.candidate.usage))
        if not fits(cq.node, assignment.usage, allow_borrowing=True):
            while len(state.undo) > mark:
                node, fr, amount = state.undo.pop()
                node.add_usage(fr, -amount)
            self._set_pending(rec, REASON_PENDING, MSG_NO_LONGER_FITS)
            self._requeue(entry, immediate=True)
            return False
        state.take(cq.node, assignment.usage)
        state.targets.update(t.candidate.key for t in entry.targets)
        issued = self._issue_preemptions(rec, entry.targets)
        rec.sticky = True
        self._set_pending(
            rec,
            REASON_PENDING,
            f"{entry.message}. Pending the preemption of {len(entry.targets)} workload(s)",
        )
        self._requeue(entry, immediate=True)
        return issued > 0

    def _issue_preemptions(self, preemptor: WorkloadRecord, targets: list[Target]) -> int:
        uid = preemptor.obj.metadata.uid or "UNKNOWN"
        job_uid = preemptor.obj.metadata.labels.get(JOB_UID_LABEL) or "UNKNOWN"
        issued = 0
        for target in sorted(targets, key=lambda t: t.candidate.key):
            victim = self.workloads[target.candidate.key]
            if victim.evicting:
                continue
            message = preemption_message(target.reason, uid, job_uid)
            self._evict(victim, "Preempted", message, target.reason)
            issued += 1
        return issued

    def _evict(self, rec: WorkloadRecord, reason: str, message: str, preempted_reason: str | None) -> None:
        rec.evicting = True
        self.candidate_cache.pop(rec.cluster_queue, None)
        rec.conditions.set(EVICTED, True, reason, message, self.now_ms)
        if preempted_reason is not None:
            rec.conditions.set(PREEMPTED, True, preempted_reason, message, self.now_ms)
        self._mark(rec, Action.EVICTED)

    def _stopped(self, rec: WorkloadRecord) -> None:
        """The evicted workload's job stopped: its quota is free and it queues again."""
        if rec.phase != Phase.ADMITTED or not rec.evicting:
            return
        evicted = rec.conditions.get(EVICTED)
        reason = evicted.reason if evicted else "Preempted"
        message = evicted.message if evicted else ""
        self._release(rec)
        rec.phase = Phase.PENDING
        rec.evicting = False
        rec.conditions.set(REQUEUED, reason in ("Preempted", "NodeFailures"), reason, message, self.now_ms)
        rec.conditions.set(QUOTA_RESERVED, False, REASON_PENDING, message, self.now_ms)
        rec.conditions.set(ADMITTED, False, REASON_NO_RESERVATION, MSG_NO_RESERVATION, self.now_ms)
        self._mark(rec, Action.REQUEUED)
        self._place(rec)

    def _admit(self, rec: WorkloadRecord, cq: ClusterQueueRecord, assignment: Assignment) -> None:
        rec.phase = Phase.ADMITTED
        rec.cluster_queue = cq.name
        rec.assignment = assignment.pod_sets
        rec.usage = dict(assignment.usage)
        self.admitted.setdefault(cq.name, {})[rec.key] = rec
        self.candidate_cache.pop(cq.name, None)
        rec.reserved_ms = self.now_ms
        rec.sticky = False
        rec.evicting = False
        for fr, amount in sorted(rec.usage.items()):
            cq.node.add_usage(fr, amount)
        now = self.now_ms
        rec.conditions.set(
            QUOTA_RESERVED, True, "QuotaReserved", f"Quota reserved in ClusterQueue {cq.name}", now
        )
        rec.conditions.set(ADMITTED, True, "Admitted", MSG_ADMITTED, now)
        for kind in (EVICTED, PREEMPTED):
            cond = rec.conditions.get(kind)
            if cond is not None and cond.status == "True":
                rec.conditions.set(kind, False, "QuotaReserved", f"Previously: {cond.message}", now)
        self._mark(rec, Action.ADMITTED)

    # ----------------------------------------------------------------- output

    def status_of(self, rec: WorkloadRecord) -> dict[str, Any]:
        status: dict[str, Any] = {}
        if rec.phase != Phase.PENDING and rec.assignment:
            status["admission"] = {
                "clusterQueue": rec.cluster_queue,
                "podSetAssignments": [
                    {
                        "name": psa.name,
                        "flavors": dict(sorted(psa.flavors.items())),
                        "resourceUsage": {r: resource_quantity(r, v) for r, v in sorted(psa.usage.items())},
                        "count": psa.count,
                    }
                    for psa in rec.assignment
                ],
            }
        conditions = rec.conditions.to_list()
        if conditions:
            status["conditions"] = conditions
        return status

    def _collect(self) -> list[Decision]:
        out = self.pending_decisions
        self.pending_decisions = []
        for key in self.changed:
            rec = self.workloads.get(key)
            if rec is None:
                continue
            status = self.status_of(rec)
            if status == rec.last_status:
                continue
            rec.last_status = status
            cond = rec.conditions.get(QUOTA_RESERVED)
            message = cond.message if cond else ""
            out.append(Decision(ObjectRef("Workload", key[0], key[1]), rec.last_action, status, message))
        self.changed.clear()
        if self.config.fair_sharing_enabled and not self.structure_dirty:
            out += self._node_status_changes()
        return out

    def _node_status_changes(self) -> list[Decision]:
        """ClusterQueue and Cohort ``status.fairSharing``, when it changed."""
        out: list[Decision] = []
        for (kind, name), fair in self.fair_sharing.statuses().items():
            status = {"fairSharing": fair}
            if self.node_status.get((kind, name)) != status:
                self.node_status[(kind, name)] = status
                out.append(Decision(ObjectRef(kind, "", name), Action.STATUS, status, ""))
        return out

    def workload_objects(self) -> list[dict[str, Any]]:
        """Every workload as a manifest carrying its current status, by namespace and name."""
        out = []
        for key in sorted(self.workloads):
            rec = self.workloads[key]
            manifest = dict(rec.manifest)
            manifest["status"] = self.status_of(rec)
            out.append(manifest)
        return out
