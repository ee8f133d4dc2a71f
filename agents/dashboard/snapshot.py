"""What the dashboard shows, read from the engines a process holds: one JSON-ready dict.

Nothing here decides anything: the numbers are those of the engines' own
outputs, so they equal what the tables print. Per ClusterQueue the usage of
each flavor and resource is the amount ``status.flavorsUsage`` carries, the
quotas are shown as the ClusterQueue writes them (as ``get clusterqueues -o
wide`` shows them) and drawn from the quota tree's amounts, and the weighted share is
:func:`kueuestream.admission.drs.explain`'s with 3 decimals, as ``kueuestream drs``
prints it. Pending Workloads are listed as ``kueuestream pending`` lists them
(Kueue's ``PendingWorkload``: the scheduler's order and positions, with the
reason and message of the ``QuotaReserved=False`` condition).

Lists are cut to :data:`LIST_LIMIT` entries (with the full count beside them),
so a queue of 50,000 pending Workloads does not make every update megabytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from kueuestream.admission import drs
from kueuestream.admission.engine import Engine
from kueuestream.admission.quantity import resource_quantity
from kueuestream.admission.quota import QuotaNode
from kueuestream.admission.state import Phase
from kueuestream.admission.status import ADMITTED
from kueuestream.agents.audit.pending import cluster_queue_items, queue_order
from kueuestream.agents.cli.drs import TABLE_PLACES, rounded

LIST_LIMIT = 10


def amount(resource: str, value: int) -> float:
    """An engine amount in the resource's base unit (cores for cpu), for drawing bars."""
    return value / 1000 if resource == "cpu" else float(value)


def share_text(value: Fraction | None) -> str:
    """A weighted share as ``kueuestream drs`` prints it: 3 decimals, or +Inf."""
    return "+Inf" if value is None else rounded(value, TABLE_PLACES)


def _written(manifest: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """Each flavor and resource's quota stanza as the ClusterQueue was written."""
    out: dict[tuple[str, str], Mapping[str, Any]] = {}
    spec = manifest.get("spec")
    for group in (spec.get("resourceGroups") if isinstance(spec, dict) else None) or []:
        for flavor in (group.get("flavors") if isinstance(group, dict) else None) or []:
            for quota in (flavor.get("resources") if isinstance(flavor, dict) else None) or []:
                if isinstance(quota, dict):
                    out[(str(flavor.get("name")), str(quota.get("name")))] = quota
    return out


def _text(written: Mapping[str, Any], key: str, resource: str, value: int | None) -> str | None:
    """A quota as written (what ``get clusterqueues`` prints), else the quota tree's amount."""
    if key in written and written[key] is not None:
        return str(written[key])
    return None if value is None else resource_quantity(resource, value)


def _resources(engine: Engine, name: str) -> list[dict[str, Any]]:
    """Per flavor and resource, in the order of the resource groups: usage, quotas and limits."""
    cq = engine.cqs[name]
    node = cq.node
    written = _written(engine.cq_manifests.get(name, {}))
    rows: list[dict[str, Any]] = []
    for group in cq.obj.spec.resource_groups:
        for flavor in group.flavors:
            for quota_spec in flavor.resources:
                res = quota_spec.name
                fr = (flavor.name, res)
                quota = node.quotas.get(fr)
                stanza = written.get(fr, {})
                used = node.usage.get(fr, 0)
                nominal = quota.nominal if quota is not None else 0
                borrowing = quota.borrowing_limit if quota is not None else None
                lending = quota.lending_limit if quota is not None else None
                rows.append(
                    {
                        "flavor": flavor.name,
                        "resource": res,
                        "used": resource_quantity(res, used),
                        "usedValue": amount(res, used),
                        "borrowed": resource_quantity(res, max(0, used - nominal)),
                        "nominal": _text(stanza, "nominalQuota", res, nominal),
                        "nominalValue": amount(res, nominal),
                        "borrowingLimit": _text(stanza, "borrowingLimit", res, borrowing),
                        "borrowingLimitValue": None if borrowing is None else amount(res, borrowing),
                        "lendingLimit": _text(stanza, "lendingLimit", res, lending),
                    }
                )
    return rows


def _node(node: QuotaNode, weights: drs.Weights, cache: drs.ShareCache) -> dict[str, Any]:
    """The weighted share and dominant resource, as :func:`~kueuestream.admission.drs.explain` gives them."""
    share = drs.share(node, weights, cache)
    return {
        "weightedShare": share_text(share.weighted_share if node.parent else Fraction(0)),
        "dominantResource": share.dominant_resource or None,
    }


def _tree(node: QuotaNode) -> dict[str, Any]:
    children = sorted(node.children, key=lambda c: (c.is_cluster_queue, c.name))
    return {
        "kind": "ClusterQueue" if node.is_cluster_queue else "Cohort",
        "name": node.name,
        "children": [_tree(child) for child in children],
    }


def _pending(engine: Engine, name: str) -> tuple[int, list[dict[str, Any]]]:
    """How many Workloads the queue holds, and the first of them as the visibility API lists them."""
    order = queue_order(engine, name)
    return len(order), cluster_queue_items(order, LIST_LIMIT, 0)


def _counts(engine: Engine) -> dict[str, list[int]]:
    """Per ClusterQueue: pending, reserving and admitted Workloads, counted as
    :func:`~kueuestream.admission.cluster_queue_status.cluster_queue_status` counts them, in one pass."""
    counts: dict[str, list[int]] = {}
    for rec in engine.workloads.values():
        if rec.cluster_queue and rec.phase in (Phase.PENDING, Phase.ADMITTED):
            row = counts.setdefault(rec.cluster_queue, [0, 0, 0])
            if rec.phase == Phase.PENDING:
                row[0] += 1
            else:
                row[1] += 1
                row[2] += rec.conditions.is_true(ADMITTED)
    return counts


def snapshot(engines: Iterable[Engine]) -> dict[str, Any]:
    """The dashboard's state: the Cohort trees, every ClusterQueue and Cohort, the latest event time."""
    cluster_queues: dict[str, dict[str, Any]] = {}
    cohorts: dict[str, dict[str, Any]] = {}
    roots: dict[tuple[bool, str], dict[str, Any]] = {}
    now_ms = 0
    for engine in engines:
        now_ms = max(now_ms, engine.now_ms)
        weights = drs.flavor_weights(engine.flavors)
        cache = drs.ShareCache(weights)
        counts = _counts(engine)
        for name in sorted(engine.cqs):
            if name in cluster_queues:
                continue
            cq = engine.cqs[name]
            pending_count, reserving, admitted_count = counts.get(name, [0, 0, 0])
            queued, pending = _pending(engine, name)
            node = cq.node
            cluster_queues[name] = {
                "name": name,
                "cohort": node.parent.name if node.parent is not None else None,
                "inactiveReason": cq.inactive_reason,
                "pendingWorkloads": pending_count,
                "reservingWorkloads": reserving,
                "admittedWorkloads": admitted_count,
                **_node(node, weights, cache),
                "resources": _resources(engine, name),
                "pending": pending,
                "pendingShown": len(pending),
                "pendingQueued": queued,
            }
            root = node.root
            if (root.is_cluster_queue, root.name) not in roots:
                roots[(root.is_cluster_queue, root.name)] = _tree(root)
        for name in sorted(engine.cohorts):
            if name not in cohorts:
                node = engine.cohorts[name]
                cohorts[name] = {
                    "name": name,
                    "parent": node.parent.name if node.parent is not None else None,
                    **_node(node, weights, cache),
                }
    return {
        "nowMs": now_ms,
        "roots": [roots[key] for key in sorted(roots)],
        "clusterQueues": [cluster_queues[name] for name in sorted(cluster_queues)],
        "cohorts": [cohorts[name] for name in sorted(cohorts)],
    }
