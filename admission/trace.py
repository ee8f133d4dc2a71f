"""The decision trace: what one scheduling cycle found for a Workload, as plain data.

The scheduler builds a trace only when the Workload's status is about to
change (a new reason, a new message, an admission, a preemption), so a
Workload that waits cycle after cycle for the same reason costs nothing
more; the decision that carries the status carries the trace too.

Amounts are quantity strings, as Kueue writes them in a status. A quota
shortage names the level that binds:

* ``ClusterQueue``: the ClusterQueue's own nominal quota (it has no Cohort);
* ``Cohort``: what the Cohort tree has left (the root Cohort's name);
* ``BorrowingLimit``: the ClusterQueue's (or a Cohort's) borrowing limit.

``short`` is how much more nominal quota the Workload's ClusterQueue needs in
that flavor and resource for the pod set to fit there: raising a node's
nominal quota raises what it can take by as much, whatever binds above it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from kueuestream.admission.api.kueue import Preemption, ResourceFlavor
from kueuestream.admission.assignment import (
    PODS,
    Assignment,
    Mode,
    PodSetAssignment,
    PodSetRequest,
    QueueView,
)
from kueuestream.admission.pending_reasons import EXCEEDS_MAX_QUOTA, NO_MATCHING_FLAVOR, WAITING_FOR_QUOTA
from kueuestream.admission.preemption import Candidate, Target, remove, restore
from kueuestream.admission.quantity import resource_quantity
from kueuestream.admission.quota import FR, QuotaNode
from kueuestream.admission.selectors import flavor_matches_pod, format_taint, untolerated_taint

Trace = dict[str, Any]

CLUSTER_QUEUE = "ClusterQueue"
COHORT = "Cohort"
BORROWING_LIMIT = "BorrowingLimit"


def _level(node: QuotaNode) -> tuple[str, str]:
    return (CLUSTER_QUEUE if node.is_cluster_queue else COHORT), node.name


def available_level(node: QuotaNode, fr: FR) -> tuple[str, str]:
    """Which level limits what ``node`` can take of ``fr`` now (see :meth:`QuotaNode.available`)."""
    parent = node.parent
    if parent is None:
        return _level(node)
    quota = node.quotas.get(fr)
    if quota is not None and quota.borrowing_limit is not None:
        usage = node.usage.get(fr, 0)
        guaranteed = node.guaranteed(fr)
        bound = node.subtree.get(fr, 0) - guaranteed - max(0, usage - guaranteed) + quota.borrowing_limit
        if bound < parent.available(fr):
            return BORROWING_LIMIT, node.name
    return available_level(parent, fr)


def capacity_level(node: QuotaNode, fr: FR) -> tuple[str, str]:
    """Which level limits what ``node`` could take of ``fr`` if nothing else ran."""
    parent = node.parent
    if parent is None:
        return _level(node)
    quota = node.quotas.get(fr)
    if quota is not None and quota.borrowing_limit is not None:
        bound = node.subtree.get(fr, 0) + quota.borrowing_limit
        if bound < node.guaranteed(fr) + parent.potential_available(fr):
            return BORROWING_LIMIT, node.name
    return capacity_level(parent, fr)


def shortage(node: QuotaNode, resource: str, flavor: str, value: int) -> dict[str, Any]:
    """One flavor and resource checked against quota: what is asked, what is left, what is missing."""
    fr = (flavor, resource)
    available = max(0, node.available(fr))
    capacity = node.potential_available(fr)
    out: dict[str, Any] = {
        "resource": resource,
        "requested": resource_quantity(resource, value),
        "available": resource_quantity(resource, available),
        "capacity": resource_quantity(resource, capacity),
    }
    if value <= available:
        out["fits"] = True
        return out
    exceeds = value > capacity
    level, where = capacity_level(node, fr) if exceeds else available_level(node, fr)
    out.update(
        fits=False,
        reason=EXCEEDS_MAX_QUOTA if exceeds else WAITING_FOR_QUOTA,
        short=resource_quantity(resource, value - available),
        level=level,
        levelName=where,
    )
    return out


def _unmatched(flavor: str, problem: str) -> dict[str, Any]:
    return {"flavor": flavor, "fits": False, "reason": NO_MATCHING_FLAVOR, "problem": problem}


def _assigned(psa: PodSetAssignment) -> dict[str, Any]:
    return {"name": psa.name, "count": psa.count, "flavors": dict(sorted(psa.flavors.items()))}


def _flavor(
    view: QueueView,
    flavor_name: str,
    requests: Mapping[str, int],
    ps: PodSetRequest,
    flavors: Mapping[str, ResourceFlavor],
    assumed: Mapping[FR, int],
) -> dict[str, Any]:
    """Why one flavor can or cannot take one resource group of a pod set."""
    flavor = flavors.get(flavor_name)
    if flavor is None:
        return _unmatched(flavor_name, "FlavorNotFound")
    taint = untolerated_taint(flavor.spec.node_taints, [*ps.spec.tolerations, *flavor.spec.tolerations])
    if taint is not None:
        return {**_unmatched(flavor_name, "UntoleratedTaint"), "taint": format_taint(taint)}
    if not flavor_matches_pod(ps.spec, flavor.spec.node_labels):
        return _unmatched(flavor_name, "NodeAffinity")
    node = view.node
    resources = [
        shortage(node, r, flavor_name, v + assumed.get((flavor_name, r), 0)) for r, v in requests.items()
    ]
    fits = all(r["fits"] for r in resources)
    out: dict[str, Any] = {"flavor": flavor_name, "fits": fits, "resources": resources}
    if not fits:
        exceeds = any(r.get("reason") == EXCEEDS_MAX_QUOTA for r in resources)
        out["reason"] = EXCEEDS_MAX_QUOTA if exceeds else WAITING_FOR_QUOTA
    return out


def _asked(view: QueueView, ps: PodSetRequest) -> dict[str, int]:
    pods = any(PODS in g.covered for g in view.groups)
    asked = {**ps.requests, PODS: ps.count} if pods else dict(ps.requests)
    return {r: v for r, v in sorted(asked.items()) if v}


def _pod_set_no_fit(
    view: QueueView,
    ps: PodSetRequest,
    flavors: Mapping[str, ResourceFlavor],
    only_declared: bool,
    assumed: Mapping[FR, int],
) -> dict[str, Any]:
    """Every flavor the pod set could go to, and why it does not fit there."""
    by_group: dict[int, dict[str, int]] = {}
    uncovered: list[str] = []
    for resource, amount in _asked(view, ps).items():
        index = next((i for i, g in enumerate(view.groups) if resource in g.covered), None)
        if index is None:
            if not only_declared:
                uncovered.append(resource)
            continue
        by_group.setdefault(index, {})[resource] = amount
    out: dict[str, Any] = {"name": ps.name, "count": ps.count, "fits": False}
    if uncovered:
        out["notCovered"] = uncovered
        return out
    groups = []
    for index in sorted(by_group):
        requests = by_group[index]
        tried = [_flavor(view, f, requests, ps, flavors, assumed) for f in view.groups[index].flavors]
        groups.append(
            {
                "resources": {r: resource_quantity(r, v) for r, v in sorted(requests.items())},
                "flavors": tried,
            }
        )
    out["resourceGroups"] = groups
    return out


def _fits(node: QuotaNode, needs: Mapping[FR, int]) -> bool:
    return all(value <= max(0, node.available(fr)) for fr, value in needs.items())


def finishing(
    node: QuotaNode,
    nodes: Mapping[str, QuotaNode],
    admitted: Mapping[str, list[Candidate]],
    needs: Mapping[FR, int],
) -> list[str]:
    """Running Workloads whose finishing would make ``needs`` fit in ``node``.

    They are looked for in widening circles, each tried only when the one
    before cannot free enough: the ClusterQueue's own Workloads, then also
    those of the ClusterQueues of its Cohort tree that borrow, then those of
    the whole tree. Within a circle, candidates using the most of the pairs
    are taken out first until ``needs`` fits, then each one not needed after
    all is put back (as Kueue's preemption minimises its targets). The tree
    is left as it was. Empty when even the whole tree's would not do.
    """
    frs = sorted(needs)
    for names in _circles(node, frs):
        found = _finishing_among(node, nodes, [admitted[n] for n in names if n in admitted], frs, needs)
        if found is not None:
            return found
    return []


def _circles(node: QuotaNode, frs: Sequence[FR]) -> Iterator[list[str]]:
    """The ClusterQueues to look in, each circle computed only when the one before did not do."""
    yield [node.name]
    if node.parent is None:
        return
    root = node.root
    yield [node.name, *(n.name for n in root.borrowing_cluster_queues(frozenset(frs)) if n is not node)]
    yield [n.name for n in root.subtree_cqs]


def _finishing_among(
    node: QuotaNode,
    nodes: Mapping[str, QuotaNode],
    lists: Sequence[Sequence[Candidate]],
    frs: Sequence[FR],
    needs: Mapping[FR, int],
) -> list[str] | None:
    pool = [c for cands in lists for c in cands if not c.evicting and any(fr in c.usage for fr in frs)]
    pool.sort(key=lambda c: (-sum(c.usage.get(fr, 0) for fr in frs), c.key))
    taken: list[Candidate] = []
    root = node.root
    version = root.version
    try:
        for cand in pool:
            if _fits(node, needs):
                break
            remove(nodes, cand)
            taken.append(cand)
        if not _fits(node, needs):
            return None
        for cand in reversed(list(taken)):
            restore(nodes, cand)
            if _fits(node, needs):
                taken.remove(cand)
            else:
                remove(nodes, cand)
        return sorted(f"{c.key[0]}/{c.key[1]}" for c in taken)
    finally:
        for cand in reversed(taken):
            restore(nodes, cand)
        # The tree is as it was, and nothing cached anything on it meanwhile (only
        # ``available`` was read): the caches stamped with the old version stay good.
        root.version = version


def not_admitted(
    cycle: int,
    reason: str,
    message: str,
    view: QueueView,
    pod_sets: Sequence[PodSetRequest],
    assignment: Assignment | None,
    flavors: Mapping[str, ResourceFlavor],
    only_declared: bool,
    can_preempt: bool,
    nodes: Mapping[str, QuotaNode],
    admitted: Mapping[str, list[Candidate]],
    preemption: Preemption,
    priority: int,
) -> Trace:
    """A head the cycle could not nominate: each pod set's flavors and why they failed,
    and which running Workloads' finishing would let it in."""
    trace: Trace = {"cycle": cycle, "outcome": reason, "clusterQueue": view.name}
    if assignment is None:
        trace["message"] = message
        return trace
    sets: list[dict[str, Any]] = []
    for psa in assignment.pod_sets:
        entry = _assigned(psa)
        # Quota the pod set could only get by preempting: how short it is, where.
        short = [
            shortage(view.node, r, f, assignment.usage[(f, r)])
            for r, f in sorted(psa.flavors.items())
            if (f, r) in assignment.preempt_frs
        ]
        entry["fits"] = not short
        if short:
            entry["short"] = short
        sets.append(entry)
    needs: dict[FR, int] = {}
    if assignment.mode == Mode.NO_FIT and len(assignment.pod_sets) < len(pod_sets):
        ps = pod_sets[len(assignment.pod_sets)]
        failed = _pod_set_no_fit(view, ps, flavors, only_declared, assignment.usage)
        sets.append(failed)
        needs = _quota_needs(failed, ps, view, assignment.usage)
    elif assignment.mode == Mode.PREEMPT:
        needs = {fr: assignment.usage[fr] for fr in sorted(assignment.preempt_frs)}
    trace["podSets"] = sets
    if needs:
        found = finishing(view.node, nodes, admitted, needs)
        if found:
            trace["finishing"] = found
    if assignment.mode == Mode.PREEMPT:
        # What preemption had to go on: the policies, the head's priority and the
        # ClusterQueue's own running Workloads on the pairs it needs (the first ten).
        own = admitted.get(view.name, [])
        running = sorted(
            (c for c in own if not c.evicting and any(fr in c.usage for fr in needs)),
            key=lambda c: (c.priority, c.key),
        )
        trace["preemption"] = {
            "possible": can_preempt,
            "policies": {
                "withinClusterQueue": preemption.within_cluster_queue,
                "reclaimWithinCohort": preemption.reclaim_within_cohort,
                "borrowWithinCohort": preemption.borrow_within_cohort.policy,
            },
            "priority": priority,
            "running": [{"workload": f"{c.key[0]}/{c.key[1]}", "priority": c.priority} for c in running[:10]],
            "why": "no set of Workloads these policies allow to evict frees enough",
        }
    if assignment.borrowing:
        trace["borrowing"] = assignment.borrowing
    return trace


def _quota_needs(
    failed: Mapping[str, Any], ps: PodSetRequest, view: QueueView, assumed: Mapping[FR, int]
) -> dict[FR, int]:
    """What the first flavor short only of unused quota needs, for each resource of its group."""
    asked = _asked(view, ps)
    for group in failed.get("resourceGroups", []):
        for tried in group["flavors"]:
            if tried.get("reason") == WAITING_FOR_QUOTA:
                flavor = tried["flavor"]
                return {
                    (flavor, r["resource"]): asked[r["resource"]] + assumed.get((flavor, r["resource"]), 0)
                    for r in tried["resources"]
                }
    return {}


def admitted(cycle: int, cluster_queue: str, assignment: Assignment) -> Trace:
    """A head the cycle admitted: its flavors, how high in the Cohort tree it borrows, and
    the flavors after which its pod sets' searches resumed."""
    out: Trace = {
        "cycle": cycle,
        "outcome": "QuotaReserved",
        "clusterQueue": cluster_queue,
        "podSets": [_assigned(psa) for psa in assignment.pod_sets],
        "borrowing": assignment.borrowing,
    }
    if assignment.resumed_after:
        out["resumedAfter"] = {name: list(after) for name, after in sorted(assignment.resumed_after.items())}
    return out


def preempting(cycle: int, cluster_queue: str, reason: str, targets: Sequence[Target]) -> Trace:
    """A head whose admission waits for the Workloads it preempts: each victim and the policy."""
    return {
        "cycle": cycle,
        "outcome": reason,
        "clusterQueue": cluster_queue,
        "victims": [
            {
                "workload": f"{t.candidate.key[0]}/{t.candidate.key[1]}",
                "clusterQueue": t.candidate.cluster_queue,
                "policy": t.reason,
            }
            for t in sorted(targets, key=lambda t: t.candidate.key)
        ],
    }


def preempted(cycle: int, preemptor: tuple[str, str], preemptor_cq: str, policy: str) -> Trace:
    """A Workload evicted to make room: by whom, under which policy."""
    return {
        "cycle": cycle,
        "outcome": "Preempted",
        "preemptor": f"{preemptor[0]}/{preemptor[1]}",
        "preemptorClusterQueue": preemptor_cq,
        "policy": policy,
    }


def skipped(cycle: int, reason: str, message: str, cluster_queue: str) -> Trace:
    """A head nominated but not admitted in its cycle (another head took the quota first)."""
    return {"cycle": cycle, "outcome": reason, "clusterQueue": cluster_queue, "message": message}


def equivalent(cycle: int, reason: str, head: tuple[str, str]) -> Trace:
    """A Workload parked behind an equivalent head that failed: the head's trace is its own."""
    return {"cycle": cycle, "outcome": reason, "sameAs": f"{head[0]}/{head[1]}"}
