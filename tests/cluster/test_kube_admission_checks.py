"""An admission check on a real API server: the Job waits for its check's controller (``run --kubeconfig``).

No check controller runs here: the test writes the check's state into the
Workload's status, as one would (Kueue's ``SetAdmissionCheckState``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from kueuestream.agents.kube.rest import WORKLOADS, Resource
from tests.cluster.kube_rig import (
    CLUSTER_QUEUES,
    FLAVORS,
    LOCAL_QUEUES,
    Rig,
    V,
    cluster,
    cluster_queue,
    condition,
    eventually,
    flavor,
    is_true,
    start_runtime,
)
from tests.helpers import queued_job

pytestmark = pytest.mark.kube

ADMISSION_CHECKS = Resource("kueue.x-k8s.io", "v1beta2", "admissionchecks", "AdmissionCheck")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


async def checked_queue(rig: Rig) -> tuple[str, str, str]:
    """A namespace with LocalQueue ``lq`` of a 1-cpu ClusterQueue requiring an active check."""
    ns = await rig.namespace("checks")
    suffix = ns.rsplit("-", 1)[1]
    check, flavor_name, cq = f"capacity-{suffix}", f"flavor-{suffix}", f"cq-{suffix}"
    await rig.create(
        ADMISSION_CHECKS,
        {
            "apiVersion": V,
            "kind": "AdmissionCheck",
            "metadata": {"name": check},
            "spec": {"controllerName": "example.com/capacity"},
        },
    )
    active = {
        "type": "Active",
        "status": "True",
        "reason": "Active",
        "message": "",
        "lastTransitionTime": now(),
    }
    await rig.api.patch(
        ADMISSION_CHECKS, "", check, {"status": {"conditions": [active]}}, subresource="status"
    )
    await rig.create(FLAVORS, flavor(flavor_name, {"pool": suffix}))
    queue = cluster_queue(cq, flavor_name, "1")
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    await rig.create(CLUSTER_QUEUES, queue)
    lq = {"apiVersion": V, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": ns}}
    await rig.create(LOCAL_QUEUES, {**lq, "spec": {"clusterQueue": cq}})
    return ns, suffix, check


async def test_a_job_starts_only_once_its_admission_check_is_ready(kube_config: str, tmp_path: Path) -> None:
    """Scheduler.prepareWorkload reserves quota; SyncAdmittedCondition admits once the check is
    Ready; the job integration starts the Job only when the Workload is Admitted, with the
    check's podSetUpdates (getPodSetsInfoFromStatus)."""
    async with cluster(kube_config) as rig:
        ns, suffix, check = await checked_queue(rig)
        running = await start_runtime(rig.conn, tmp_path)
        try:
            job = await rig.job(queued_job(ns, "train", "lq"))
            workload: dict[str, Any] = {}

            async def reserved_waiting_for_the_check() -> bool:
                nonlocal workload
                workload = await rig.workload_of(job) or {}
                checks = workload.get("status", {}).get("admissionChecks") or []
                return is_true(workload, "QuotaReserved") and [c["state"] for c in checks] == ["Pending"]

            await eventually(reserved_waiting_for_the_check, "quota reserved with the check Pending")
            assert not is_true(workload, "Admitted")
            assert (await rig.read_job(job))["spec"]["suspend"] is True

            # The check's controller books the capacity.
            update = {"name": "main", "nodeSelector": {"booked": suffix}}
            ready = {
                "name": check,
                "state": "Ready",
                "message": "booked",
                "lastTransitionTime": now(),
                "podSetUpdates": [update],
            }
            name = workload["metadata"]["name"]
            await rig.api.patch(
                WORKLOADS, ns, name, {"status": {"admissionChecks": [ready]}}, subresource="status"
            )

            async def started() -> bool:
                return (await rig.read_job(job))["spec"].get("suspend") is False

            await eventually(started, "the Job unsuspended once its check is Ready")
            final = await rig.workload_of(job)
            assert is_true(final, "Admitted")
            assert final is not None
            assert [(c["name"], c["state"]) for c in final["status"]["admissionChecks"]] == [(check, "Ready")]
            # What the check's controller asked for is in the started pods' template.
            assert final["status"]["admissionChecks"][0]["podSetUpdates"] == [update]
            pod = (await rig.read_job(job))["spec"]["template"]["spec"]
            assert pod["nodeSelector"] == {"pool": suffix, "booked": suffix}
        finally:
            await running.stop()


async def test_a_rejected_check_deactivates_the_workload_in_the_cluster(
    kube_config: str, tmp_path: Path
) -> None:
    """reconcileCheckBasedEviction: a Rejected check evicts the Workload and Kueue sets its
    spec.active false; its Job never starts."""
    async with cluster(kube_config) as rig:
        ns, _, check = await checked_queue(rig)
        running = await start_runtime(rig.conn, tmp_path)
        try:
            job = await rig.job(queued_job(ns, "train", "lq"))
            workload: dict[str, Any] = {}

            async def reserved() -> bool:
                nonlocal workload
                workload = await rig.workload_of(job) or {}
                return is_true(workload, "QuotaReserved")

            await eventually(reserved, "quota reserved")
            rejected = {"name": check, "state": "Rejected", "message": "no", "lastTransitionTime": now()}
            name = workload["metadata"]["name"]
            await rig.api.patch(
                WORKLOADS, ns, name, {"status": {"admissionChecks": [rejected]}}, subresource="status"
            )

            async def deactivated() -> bool:
                found = await rig.workload_of(job) or {}
                evicted = condition(found, "Evicted") or {}
                return found.get("spec", {}).get("active") is False and evicted.get("reason") == (
                    "DeactivatedDueToAdmissionCheck"
                )

            await eventually(deactivated, "the Workload evicted and set inactive")

            async def released() -> bool:
                found = await rig.workload_of(job) or {}
                return not is_true(found, "QuotaReserved") and "admission" not in found.get("status", {})

            await eventually(released, "its quota released")
            assert (await rig.read_job(job))["spec"]["suspend"] is True
        finally:
            await running.stop()
