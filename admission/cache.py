"""The object store and the quota tree: what Kueue's scheduler cache holds.

Like Kueue's ``Cache`` (pkg/cache/scheduler), this keeps every object
admission depends on (ResourceFlavors, ClusterQueues, Cohorts, LocalQueues,
Namespaces, priority classes, DRA objects, the Configuration), builds the
quota tree of ClusterQueues and Cohorts from them, and charges each admitted
Workload's usage to its ClusterQueue. It also keeps every Workload record; the
queue manager and the workload lifecycle decide what happens to them.

Any change to the tree's objects only marks the structure dirty; the next
settle rebuilds the tree (:meth:`Cache.rebuild`) from scratch, so the result
never depends on the order in which those objects arrived.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from fractions import Fraction
from typing import Any, TypeVar

from kueuestream.admission import dra
from kueuestream.admission.admission_checks import (
    MULTIKUEUE_CONTROLLER,
    PROVISIONING_CONTROLLER,
    all_flavors,
    cluster_queue_checks,
)
from kueuestream.admission.api.base import ApiModel
from kueuestream.admission.api.config import Configuration
from kueuestream.admission.api.core import Namespace
from kueuestream.admission.api.kueue import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    WorkloadPriorityClass,
)
from kueuestream.admission.api.scheduling import PriorityClass
from kueuestream.admission.assignment import GroupView, QueueView
from kueuestream.admission.events import ObjectRef
from kueuestream.admission.pod_resource_rules import PodResourceRules
from kueuestream.admission.preemption import Candidate
from kueuestream.admission.quantity import resource_value
from kueuestream.admission.queues import WorkloadKey
from kueuestream.admission.quota import FR, Quota, QuotaNode, compute_subtree_quotas
from kueuestream.admission.selectors import label_selector_matches
from kueuestream.admission.state import ClusterQueueRecord, Phase, WorkloadRecord
from kueuestream.admission.tree_changes import TreeChanges
from kueuestream.admission.validation import config_warnings

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


class Cache:
    """Objects by kind, the quota tree built from them, and the admitted workloads."""

    def __init__(self, config: Configuration | None = None) -> None:
        # A configuration given here wins over any in the log: it is how what-if runs work.
        self.pinned_config = config is not None
        self.config = config or Configuration()
        self.warnings: list[str] = config_warnings(self.config)
        self.flavors: dict[str, ResourceFlavor] = {}
        self.admission_checks: dict[str, AdmissionCheck] = {}
        self.cq_objs: dict[str, ClusterQueue] = {}
        self.cohort_objs: dict[str, Cohort] = {}
        self.local_queues: dict[WorkloadKey, LocalQueue] = {}
        self.workload_classes: dict[str, int] = {}
        self.pod_classes: dict[str, int] = {}
        self.namespaces: dict[str, dict[str, str]] = {}
        # What namespace_labels answered, per namespace, until a Namespace changes.
        self.labels_memo: dict[str, dict[str, str]] = {}
        self.dra = dra.DraState()
        self.pod_rules = PodResourceRules()
        self.workloads: dict[WorkloadKey, WorkloadRecord] = {}
        # The quota tree, rebuilt whenever ``structure_dirty`` is set.
        self.cqs: dict[str, ClusterQueueRecord] = {}
        self.cq_names: list[str] = []
        self.cq_nodes: dict[str, QuotaNode] = {}
        self.cohorts: dict[str, QuotaNode] = {}
        self.cohort_problems: dict[str, str] = {}
        self.structure_dirty = True
        # What the next rebuild changes, for the retry of parked workloads it asks for.
        self.changes = TreeChanges(fresh=True)
        # Bumped whenever what a workload requests may have changed (Configuration, DRA objects,
        # LimitRanges, RuntimeClasses).
        self.requests_generation = 0
        # Admitted workloads by ClusterQueue, so preemption looks only where it may act.
        self.admitted: dict[str, dict[WorkloadKey, WorkloadRecord]] = {}
        # Preemption candidates per ClusterQueue, dropped whenever its admitted set changes.
        self.candidate_cache: dict[str, list[Candidate]] = {}
        # Per ClusterQueue, Kueue's AllocatableResourceGeneration: advanced whenever quota
        # may have become free there (a workload stops counting, its tree's quotas change),
        # which makes an earlier cycle's flavor search progress stale.
        self.generations: dict[str, int] = {}
        # What each ClusterQueue's tree looked like when last built (see _tree_signature).
        self.tree_signatures: dict[str, Hashable] = {}

    # ---------------------------------------------------------------- objects

    def store(self, obj: ApiModel) -> None:
        """Keep an object that is not a Workload or Job."""
        if isinstance(obj, Configuration):
            if not self.pinned_config:
                self.config = obj
                self.warnings = config_warnings(obj)
                self.invalidate_requests()
        elif isinstance(obj, ResourceFlavor):
            if _spec_changed(self.flavors.get(obj.metadata.name), obj):
                self.changes.flavors.add(obj.metadata.name)
            self.flavors[obj.metadata.name] = obj
            self.structure_dirty = True
        elif isinstance(obj, ClusterQueue):
            # Kueue's queue manager retries only when the spec changed (``UpdateClusterQueue``).
            if _spec_changed(self.cq_objs.get(obj.metadata.name), obj):
                self.changes.cluster_queues.add(obj.metadata.name)
            self.cq_objs[obj.metadata.name] = obj
            self.structure_dirty = True
        elif isinstance(obj, AdmissionCheck):
            if _spec_changed(self.admission_checks.get(obj.metadata.name), obj):
                self.changes.checks.add(obj.metadata.name)
            self.admission_checks[obj.metadata.name] = obj
            self.structure_dirty = True
        elif isinstance(obj, Cohort):
            # ``Manager.AddOrUpdateCohort`` retries its tree on every update.
            self.changes.cohorts.add(obj.metadata.name)
            self.cohort_objs[obj.metadata.name] = obj
            self.structure_dirty = True
        elif isinstance(obj, LocalQueue):
            self.local_queues[(obj.metadata.namespace, obj.metadata.name)] = obj
            self.structure_dirty = True
        elif isinstance(obj, Namespace):
            labels = dict(obj.metadata.labels)
            if self.namespaces.get(obj.metadata.name) != labels:
                self.changes.every_tree = True
            self.namespaces[obj.metadata.name] = labels
            self.labels_memo.clear()
            self.structure_dirty = True
        elif isinstance(obj, WorkloadPriorityClass):
            self.workload_classes[obj.metadata.name] = obj.value
        elif isinstance(obj, PriorityClass):
            self.pod_classes[obj.metadata.name] = obj.value
        elif self.dra.store(obj) or self.pod_rules.store(obj):
            self.invalidate_requests()

    def delete(self, ref: ObjectRef) -> None:
        """Forget an object that is not a Workload or Job."""
        kind = ref.kind
        if kind == "ResourceFlavor":
            if self.flavors.pop(ref.name, None) is not None:
                self.changes.flavors.add(ref.name)
                self.structure_dirty = True
        elif kind == "ClusterQueue":
            self.structure_dirty |= self.cq_objs.pop(ref.name, None) is not None
        elif kind == "AdmissionCheck":
            if self.admission_checks.pop(ref.name, None) is not None:
                self.changes.checks.add(ref.name)
                self.structure_dirty = True
        elif kind == "Cohort":
            self.structure_dirty |= self.cohort_objs.pop(ref.name, None) is not None
        elif kind == "LocalQueue":
            self.structure_dirty |= self.local_queues.pop((ref.namespace, ref.name), None) is not None
        elif kind == "Namespace":
            self.structure_dirty |= self.namespaces.pop(ref.name, None) is not None
            self.labels_memo.clear()
        elif kind == "WorkloadPriorityClass":
            self.workload_classes.pop(ref.name, None)
        elif kind == "PriorityClass":
            self.pod_classes.pop(ref.name, None)
        elif kind == "Configuration":
            if not self.pinned_config:
                self.config = Configuration()
                self.warnings = []
                self.invalidate_requests()
        elif self.dra.delete(ref) or self.pod_rules.delete(ref):
            self.invalidate_requests()

    def refuse(self, ref: ObjectRef, errors: list[Any]) -> None:
        """An invalid object arrived: a DRA object it replaces no longer counts."""
        if self.dra.refuse(ref, errors):
            self.invalidate_requests()

    def invalidate_requests(self) -> None:
        self.requests_generation += 1
        self.changes.fresh = True
        self.structure_dirty = True

    def take_changes(self) -> TreeChanges:
        """What changed since the last rebuild; the record starts empty again."""
        changes, self.changes = self.changes, TreeChanges()
        return changes

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        """The Namespace's labels, with the name label the API server adds."""
        labels = self.labels_memo.get(namespace)
        if labels is None:
            labels = dict(self.namespaces.get(namespace, {}))
            labels.setdefault(NAMESPACE_NAME_LABEL, namespace)
            self.labels_memo[namespace] = labels
        return labels

    def selects_namespace(self, cq: ClusterQueueRecord, namespace: str) -> bool:
        """Whether the ClusterQueue's ``namespaceSelector`` takes Workloads of ``namespace``."""
        return label_selector_matches(cq.obj.spec.namespace_selector, self.namespace_labels(namespace))

    # ------------------------------------------------------- admitted workloads

    def add_admitted(self, rec: WorkloadRecord) -> None:
        """Count an admitted workload in its ClusterQueue (Kueue's ``AddOrUpdateWorkload``)."""
        self.admitted.setdefault(rec.cluster_queue, {})[rec.key] = rec
        self.candidate_cache.pop(rec.cluster_queue, None)
        cq = self.cqs.get(rec.cluster_queue)
        if cq is not None and not self.structure_dirty:
            for fr, amount in sorted(rec.usage.items()):
                cq.node.add_usage(fr, amount)

    def remove_admitted(self, rec: WorkloadRecord) -> QuotaNode | None:
        """Stop counting a workload's usage (Kueue's ``DeleteWorkload``).

        Returns the root of the tree whose capacity was freed, or None when the
        tree is about to be rebuilt or the ClusterQueue is gone.
        """
        self.admitted.get(rec.cluster_queue, {}).pop(rec.key, None)
        self.candidate_cache.pop(rec.cluster_queue, None)
        self.generations[rec.cluster_queue] = self.generations.get(rec.cluster_queue, 0) + 1
        cq = self.cqs.get(rec.cluster_queue)
        if cq is None or self.structure_dirty:
            return None
        for fr, amount in sorted(rec.usage.items()):
            cq.node.remove_usage(fr, amount)
        return cq.node.root

    def candidates_changed(self, cq_name: str) -> None:
        """A workload of ``cq_name`` changed how preemption sees it."""
        self.candidate_cache.pop(cq_name, None)

    def candidates(self, cq_name: str) -> list[Candidate]:
        """The admitted workloads of a ClusterQueue as preemption candidates, by key."""
        cached = self.candidate_cache.get(cq_name)
        if cached is None:
            found = self.admitted.get(cq_name, {})
            cached = [_candidate(found[key]) for key in sorted(found)]
            self.candidate_cache[cq_name] = cached
        return cached

    # ------------------------------------------------------------- structure

    def rebuild(self) -> None:
        """Build the quota tree from the objects and charge the admitted workloads to it."""
        self.structure_dirty = False
        self.cohorts = {}
        self.cohort_problems = {}

        def cohort_node(name: str) -> QuotaNode:
            node = self.cohorts.get(name)
            if node is None:
                node = QuotaNode(name, is_cluster_queue=False)
                obj = self.cohort_objs.get(name)
                if obj is not None:
                    node.quotas = _quotas(obj.spec.resource_groups)
                    node.fair_weight = _weight(obj.spec.fair_sharing)
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
                if _creates_cycle(child, parent):
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
            node.quotas = _quotas(cq_obj.spec.resource_groups)
            node.fair_weight = _weight(cq_obj.spec.fair_sharing)
            if cq_obj.spec.cohort:
                parent = self.cohorts[cq_obj.spec.cohort]
                node.parent = parent
                parent.children.append(node)
            checks = cluster_queue_checks(cq_obj.spec)
            self.cqs[name] = ClusterQueueRecord(
                obj=cq_obj,
                node=node,
                view=self._view(cq_obj, node),
                inactive_reason=self._inactive_reason(cq_obj) or self._checks_problem(cq_obj, checks),
                checks=checks,
                flavors=all_flavors(cq_obj.spec),
            )
        self.cq_names = sorted(self.cqs)
        self.cq_nodes = {name: self.cqs[name].node for name in self.cq_names}
        for node in self.cohorts.values():
            node.children.sort(key=lambda n: (n.is_cluster_queue, n.name))
        for root in self._roots():
            compute_subtree_quotas(root)
            # Kueue advances the generation of every ClusterQueue of a tree whose quotas,
            # flavors or shape changed (updateCohortTreeResources).
            signature = _tree_signature(root, self.cqs)
            for cq_node in root.cluster_queues():
                if self.tree_signatures.get(cq_node.name) != signature:
                    self.tree_signatures[cq_node.name] = signature
                    self.generations[cq_node.name] = self.generations.get(cq_node.name, 0) + 1

        for key in sorted(self.workloads):
            rec = self.workloads[key]
            if rec.phase == Phase.ADMITTED and rec.cluster_queue in self.cqs:
                node = self.cqs[rec.cluster_queue].node
                for fr, amount in sorted(rec.usage.items()):
                    node.add_usage(fr, amount)

    def root_named(self, name: str) -> QuotaNode | None:
        """The root Cohort, or the cohort-less ClusterQueue, called ``name``."""
        node = self.cohorts.get(name)
        if node is None and name in self.cqs:
            node = self.cqs[name].node
        return node

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

    def _checks_problem(self, obj: ClusterQueue, checks: dict[str, frozenset[str]]) -> str:
        """Why its AdmissionChecks keep a ClusterQueue inactive, or "" (``updateWithAdmissionChecks``)."""
        names = sorted(checks)
        missing = [n for n in names if n not in self.admission_checks]
        if missing:
            return f"AdmissionCheckNotFound: references missing AdmissionCheck(s): {','.join(missing)}"
        inactive = [n for n in names if not self.admission_checks[n].active]
        if inactive:
            return f"AdmissionCheckInactive: references inactive AdmissionCheck(s): {','.join(inactive)}"
        controller = {n: self.admission_checks[n].spec.controller_name for n in names}
        multikueue = [n for n in names if controller[n] == MULTIKUEUE_CONTROLLER]
        if len(multikueue) > 1:
            return (
                "MultipleMultiKueueAdmissionChecks: Cannot use multiple MultiKueue AdmissionChecks "
                f"on the same ClusterQueue, found: {','.join(multikueue)}"
            )
        every = all_flavors(obj.spec)
        per_flavor = [n for n in multikueue if checks[n] != every]
        if per_flavor:
            return (
                "MultiKueueAdmissionCheckAppliedPerFlavor: Cannot specify MultiKueue AdmissionCheck "
                f"per flavor, found: {','.join(per_flavor)}"
            )
        provisioning = [n for n in names if controller[n] == PROVISIONING_CONTROLLER]
        if multikueue and provisioning:
            return (
                "MultiKueueWithProvisioningRequest: Cannot use both MultiKueue and ProvisioningRequest "
                f"AdmissionChecks together, found: {','.join(multikueue)}, {','.join(provisioning)}"
            )
        return ""

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
            preference=spec.flavor_fungibility.preference,
            preempt_while_borrowing=p.borrow_within_cohort.policy != "Never"
            or (fair and p.reclaim_within_cohort != "Never"),
            can_preempt=p.within_cluster_queue != "Never" or p.reclaim_within_cohort != "Never",
        )


class AdmittedView(Mapping[str, list[Candidate]]):
    """Every ClusterQueue's admitted workloads as preemption candidates, built on first look."""

    def __init__(self, cache: Cache) -> None:
        self._cache = cache

    def __getitem__(self, cq_name: str) -> list[Candidate]:
        if cq_name not in self._cache.cq_nodes:
            raise KeyError(cq_name)
        return self._cache.candidates(cq_name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._cache.cq_names)

    def __len__(self) -> int:
        return len(self._cache.cq_names)


def _candidate(rec: WorkloadRecord) -> Candidate:
    return Candidate(
        key=rec.key,
        cluster_queue=rec.cluster_queue,
        priority=rec.priority,
        created_ms=rec.created_ms,
        reserved_ms=rec.reserved_ms,
        usage=rec.usage,
        evicting=rec.evicting,
        uid=rec.obj.metadata.uid,
    )


def _tree_signature(root: QuotaNode, cqs: Mapping[str, ClusterQueueRecord]) -> Hashable:
    """Every node of a tree with its parent, quotas and flavor order, comparable across rebuilds."""
    nodes: list[tuple[bool, str, Hashable]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        quotas = tuple(
            (fr, q.nominal, q.borrowing_limit, q.lending_limit) for fr, q in sorted(node.quotas.items())
        )
        groups = cqs[node.name].view.groups if node.is_cluster_queue else ()
        parent = node.parent.name if node.parent else ""
        nodes.append((node.is_cluster_queue, node.name, (parent, quotas, groups)))
        stack.extend(node.children)
    return tuple(sorted(nodes, key=lambda n: (n[0], n[1])))


def _creates_cycle(child: QuotaNode, parent: QuotaNode) -> bool:
    node: QuotaNode | None = parent
    while node is not None:
        if node is child:
            return True
        node = node.parent
    return False


def _weight(fair: Any) -> Fraction:
    if fair is None or fair.weight is None:
        return Fraction(1)
    weight: Fraction = fair.weight.value
    return weight


def _quotas(groups: list[ResourceGroup]) -> dict[FR, Quota]:
    quotas: dict[FR, Quota] = {}
    for group in groups:
        for flavor in group.flavors:
            for rq in flavor.resources:
                quotas[(flavor.name, rq.name)] = Quota(
                    nominal=resource_value(rq.name, rq.nominal_quota),
                    borrowing_limit=None
                    if rq.borrowing_limit is None
                    else resource_value(rq.name, rq.borrowing_limit),
                    lending_limit=None
                    if rq.lending_limit is None
                    else resource_value(rq.name, rq.lending_limit),
                )
    return quotas


_WithSpec = TypeVar("_WithSpec", ResourceFlavor, ClusterQueue, AdmissionCheck)


def _spec_changed(old: _WithSpec | None, new: _WithSpec) -> bool:
    return old is None or old.spec != new.spec
