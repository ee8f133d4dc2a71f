"""Restart from cluster state: admitted workloads are usage, never decided again."""

from __future__ import annotations

from kueuestream.admission.events import Action
from tests.helpers import cluster_queue, flavor, run, workload

ADMITTED_STATUS = """
status:
  admission:
    clusterQueue: q
    podSetAssignments:
    - name: main
      count: 1
      flavors: {cpu: default}
      resourceUsage: {cpu: "3"}
  conditions:
  - {type: QuotaReserved, status: "True", reason: QuotaReserved, message: Quota reserved in ClusterQueue q,
     lastTransitionTime: "2024-01-01T00:00:00Z"}
  - {type: Admitted, status: "True", reason: Admitted, message: The workload is admitted,
     lastTransitionTime: "2024-01-01T00:00:00Z"}
---"""


def _pre_admitted(name: str) -> str:
    return workload(name, "q", cpu="3").rstrip("-\n") + "\n" + ADMITTED_STATUS


# q (4 cpu) with "running" admitted on 3 before the restart, and "new" asking for 2.
RUNNING_AND_NEW = (
    flavor("default")
    + cluster_queue("q", "default: [{name: cpu, nominalQuota: 4}]")
    + _pre_admitted("running")
    + workload("new", "q", cpu="2", created="2024-01-02T00:00:00Z")
)


def test_pre_admitted_workload_counts_as_usage_and_is_not_decided_again() -> None:
    r = run(RUNNING_AND_NEW)
    assert r.admitted() == ["running"]
    assert "1 more needed" in r.pending_message("new")
    assert not [d for d in r.decisions if d.ref.name == "running"]
    # Its status is exactly what it came with.
    assert r.status("running")["admission"]["podSetAssignments"][0]["resourceUsage"] == {"cpu": "3"}


def test_pre_admitted_usage_is_released_when_it_finishes() -> None:
    r = run(RUNNING_AND_NEW)
    r.tick()
    out = r.finish("default", "running")
    assert [(d.ref.name, d.action) for d in out] == [("running", Action.FINISHED), ("new", Action.ADMITTED)]


def test_pre_admitted_workloads_listed_before_their_queue_still_count() -> None:
    # Objects arrive in any order in a listing; usage must not depend on it.
    r = run(
        _pre_admitted("running")
        + workload("new", "q", cpu="2", created="2024-01-02T00:00:00Z")
        + flavor("default")
        + cluster_queue("q", "default: [{name: cpu, nominalQuota: 4}]")
    )
    assert r.admitted() == ["running"]


def test_deleting_an_admitted_workload_frees_its_quota() -> None:
    r = run(RUNNING_AND_NEW)
    r.tick()
    r.delete("Workload", "default", "running")
    assert r.admitted() == ["new"]
