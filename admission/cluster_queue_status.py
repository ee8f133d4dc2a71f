"""A ClusterQueue's ``status`` counts and usage, as Kueue's ClusterQueue controller writes them.

``pendingWorkloads`` are the Workloads waiting in its queue, ``reservingWorkloads``
those holding its quota and ``admittedWorkloads`` those of them whose Admitted
condition is True. ``flavorsReservation`` and ``flavorsUsage`` give, per flavor
and resource in the order of its resource groups, the total the reserving
Workloads hold and how much of it is borrowed (beyond the nominal quota); the
two are the same here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kueuestream.admission.quantity import resource_quantity
from kueuestream.admission.state import ClusterQueueRecord, Phase, WorkloadRecord
from kueuestream.admission.status import ADMITTED


def cluster_queue_status(cq: ClusterQueueRecord, workloads: Iterable[WorkloadRecord]) -> dict[str, Any]:
    pending = reserving = admitted = 0
    for rec in workloads:
        if rec.cluster_queue != cq.name:
            continue
        if rec.phase == Phase.PENDING:
            pending += 1
        elif rec.phase == Phase.ADMITTED:
            reserving += 1
            admitted += rec.conditions.is_true(ADMITTED)
    usage = cq.node.usage
    flavors = []
    for group in cq.obj.spec.resource_groups:
        for flavor in group.flavors:
            resources = []
            for quota in flavor.resources:
                fr = (flavor.name, quota.name)
                total = usage.get(fr, 0)
                nominal = cq.node.quotas[fr].nominal if fr in cq.node.quotas else 0
                resources.append(
                    {
                        "name": quota.name,
                        "total": resource_quantity(quota.name, total),
                        "borrowed": resource_quantity(quota.name, max(0, total - nominal)),
                    }
                )
            flavors.append({"name": flavor.name, "resources": resources})
    return {
        "pendingWorkloads": pending,
        "reservingWorkloads": reserving,
        "admittedWorkloads": admitted,
        "flavorsReservation": flavors,
        "flavorsUsage": flavors,
    }
