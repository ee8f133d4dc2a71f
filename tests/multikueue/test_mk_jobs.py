"""The job integration's MultiKueue cases, against real API servers (``run --kubeconfig``).

- on a worker, a Job labelled ``kueue.x-k8s.io/prebuilt-workload-name`` uses
  that Workload (upstream ``JobReconciler.ensureOneWorkload``): it becomes its
  controller (``EnsurePrebuiltWorkloadOwnership``), no Workload of its own is
  created, and the Job starts once the prebuilt Workload is admitted;
- on a manager, a Job whose Workload carries a MultiKueue admission check
  stays suspended once admitted: a worker runs it (upstream gives the Job
  ``spec.managedBy: kueue.x-k8s.io/multikueue`` for the same effect). That
  needs a federation: ``test_mk_federation.py`` asserts it once the check is
  Ready and the worker runs the copy.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from kueuestream.admission.job_workload import job_workload_name
from kueuestream.admission.multikueue.names import ORIGIN_LABEL, PREBUILT_WORKLOAD_LABEL
from kueuestream.agents.kube.rest import WORKLOADS, Resource
from tests.cluster.kube_rig import (
    V,
    cluster,
    eventually,
    is_true,
    start_runtime,
)
from tests.conftest import MultiKueueServers
from tests.helpers import queued_job

pytestmark = pytest.mark.kube

ADMISSION_CHECKS = Resource("kueue.x-k8s.io", "v1beta2", "admissionchecks", "AdmissionCheck")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def prebuilt_copy(ns: str, name: str, queue: str) -> dict[str, Any]:
    """A Workload as the manager copies it into a worker."""
    pod = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
    }
    return {
        "apiVersion": V,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns, "labels": {ORIGIN_LABEL: "multikueue"}},
        "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": pod}}]},
    }


async def test_worker_job_uses_its_prebuilt_workload(
    multikueue_servers: MultiKueueServers, tmp_path: Path
) -> None:
    async with cluster(str(multikueue_servers.worker1.kubeconfig)) as rig:
        q = await rig.quota("mk-prebuilt", "2")
        running = await start_runtime(rig.conn, tmp_path)
        try:
            copy_name = "job-train-remote"
            await rig.create(WORKLOADS, prebuilt_copy(q.namespace, copy_name, q.local_queue))
            body = queued_job(q.namespace, "train", q.local_queue)
            body["metadata"]["labels"].update(
                {PREBUILT_WORKLOAD_LABEL: copy_name, ORIGIN_LABEL: "multikueue"}
            )
            job = await rig.job(body)

            async def started() -> bool:
                return (await rig.read_job(job))["spec"].get("suspend") is False

            await eventually(started, "the Job started on its prebuilt Workload's admission")
            copy = await rig.get(WORKLOADS, q.namespace, copy_name)
            assert copy is not None and is_true(copy, "Admitted")
            [owner] = copy["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
                "Job",
                "train",
                job["metadata"]["uid"],
                True,
            )
            assert await rig.get(WORKLOADS, q.namespace, job_workload_name(job)) is None
            assert running.runtime.side.jobs.counters.workloads_created == 0
        finally:
            await running.stop()
