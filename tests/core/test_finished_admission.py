"""A finished Workload keeps its ``status.admission``, as in Kueue, while its quota is free.

Kueue's job framework finishes a Workload by setting ``Finished=True``
(``finish.Finish``); nothing clears its admission, so ``kubectl get workloads``
still shows where it ran ("RESERVED IN"), while the workload controller's
``Update`` drops it from the cache (``DeleteWorkload``) and requeues the
Workloads its quota may let in. Checked against upstream's scheduler with
``tests/parity``'s harness, whose scenarios finish Workloads.
"""

from __future__ import annotations

from typing import Any

from kueuestream.admission.events import Action
from tests.core.test_restart import ADMITTED_STATUS
from tests.helpers import cluster_queue, flavor, run, workload

QUEUE = flavor("default") + cluster_queue("q", "default: [{name: cpu, nominalQuota: 4}]")
FINISHED_CONDITION = """
  - {type: Finished, status: "True", reason: Succeeded, message: Job finished successfully,
     lastTransitionTime: "2024-01-02T00:00:00Z"}
---"""


def _true(status: dict[str, Any]) -> set[str]:
    return {c["type"] for c in status.get("conditions", []) if c["status"] == "True"}


def test_a_finished_workload_keeps_its_admission_and_frees_its_quota() -> None:
    r = run(
        QUEUE
        + workload("first", "q", cpu="3")
        + workload("second", "q", cpu="2", created="2024-01-02T00:00:00Z")
    )
    admitted = r.status("first")["admission"]
    r.tick()
    out = r.finish("default", "first")
    assert [(d.ref.name, d.action) for d in out] == [("first", Action.FINISHED), ("second", Action.ADMITTED)]
    finished = r.status("first")
    assert finished["admission"] == admitted == out[0].status["admission"]
    assert {"QuotaReserved", "Admitted", "Finished"} <= _true(finished)


def test_a_workload_listed_as_finished_keeps_its_admission_without_holding_quota() -> None:
    """After a restart, a finished Workload arrives with its admission: shown as it came,
    counted nowhere (the 4 cpus stay free for a Workload asking for all of them)."""
    done = (
        workload("done", "q", cpu="3").rstrip("-\n")
        + "\n"
        + ADMITTED_STATUS.rstrip("-\n")
        + FINISHED_CONDITION
    )
    r = run(QUEUE + done + workload("big", "q", cpu="4", created="2024-01-02T00:00:00Z"))
    assert r.status("done")["admission"]["clusterQueue"] == "q"
    assert r.status("done")["admission"]["podSetAssignments"][0]["resourceUsage"] == {"cpu": "3"}
    assert "Finished" in _true(r.status("done"))
    assert "QuotaReserved" in _true(r.status("big"))
    assert not [d for d in r.decisions if d.ref.name == "done"]


def test_a_finish_reported_in_a_watch_update_keeps_the_admission() -> None:
    """The job controller's update (the Workload as the cluster holds it, plus Finished)
    is the path a watch takes: the same status results."""
    r = run(QUEUE + workload("first", "q", cpu="3"))
    status = r.status("first")
    manifest = r.workloads()["first"]
    conditions = [*status["conditions"], {"type": "Finished", "status": "True", "reason": "Succeeded"}]
    r.load_manifests([{**manifest, "status": {**status, "conditions": conditions}}])
    assert r.status("first")["admission"] == status["admission"]
    assert "Finished" in _true(r.status("first"))
