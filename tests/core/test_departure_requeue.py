"""A pending Workload that leaves (deleted, finished) requeues its ClusterQueue's parked ones.

Kueue's workload controller calls ``QueueAssociatedInadmissibleWorkloadsAfter``
for every deleted Workload (``WorkloadReconciler.Delete``) and every one that
finished (``Update``), whether or not it held quota: the parked Workloads are
evaluated again and their pending messages say what is short now. Found with
``tests/parity``'s harness, whose scenarios delete and finish Workloads.

``q`` has 4 cpus. ``running`` (3) is admitted; ``waiting`` (2) is told "1 more
needed" and parked; ``small`` (1) is admitted after it, so 2 are short now but
``waiting`` still says 1; ``huge`` (5) can never fit.
"""

from __future__ import annotations

from kueuestream.admission.events import Event, EventType, ObjectRef
from tests.helpers import Run, cluster_queue, flavor, run, workload

SCENARIO = (
    flavor("default")
    + cluster_queue("q", "default: [{name: cpu, nominalQuota: 4}]")
    + workload("running", "q", cpu="3", created="2024-01-01T00:00:00Z")
    + workload("waiting", "q", cpu="2", created="2024-01-01T00:00:01Z")
    + workload("small", "q", cpu="1", created="2024-01-01T00:00:02Z")
    + workload("huge", "q", cpu="5", created="2024-01-01T00:00:03Z")
)


def _settled() -> Run:
    r = run(SCENARIO)
    assert r.admitted() == ["running", "small"]
    assert r.pending_message("waiting").endswith("1 more needed")
    return r


def test_deleting_a_pending_workload_evaluates_the_parked_ones_again() -> None:
    r = _settled()
    r.tick()
    r.delete("Workload", "default", "huge")
    assert r.pending_message("waiting").endswith("2 more needed")


def test_a_pending_workload_finishing_evaluates_the_parked_ones_again() -> None:
    r = _settled()
    r.tick()
    r.finish("default", "huge")
    assert r.pending_message("waiting").endswith("2 more needed")


def test_deleting_a_workload_of_another_tree_leaves_them_alone() -> None:
    """Only the tree of the departed Workload's ClusterQueue is requeued."""
    r = run(
        SCENARIO
        + cluster_queue("other", "default: [{name: cpu, nominalQuota: 1}]")
        + workload("elsewhere", "other", cpu="5", created="2024-01-01T00:00:04Z")
    )
    r.tick()
    r.delete("Workload", "default", "elsewhere")
    assert r.pending_message("waiting").endswith("1 more needed")


def test_a_clusterqueue_change_rides_along_the_requeue_already_asked_for() -> None:
    """``huge`` deleted asks for a requeue a batch period later; ``q``'s quota changing
    half a period later asks for its tree's too (``Manager.UpdateClusterQueue``), and
    Kueue's requeuer makes one requeue of all the requests of a batch period: the parked
    Workloads are tried once, when the first request falls due."""
    r = _settled()
    r.tick()
    now = r.time_ms
    r.apply(Event(EventType.DELETE, now, ref=ObjectRef("Workload", "default", "huge"), batch=True))
    r.time_ms = now + 500
    cycles = r.engine.cycles
    r.load(cluster_queue("q", "default: [{name: cpu, nominalQuota: 5}]"))
    assert r.pending_message("waiting").endswith("1 more needed")
    assert r.engine.cycles == cycles + 1
    assert r.time_ms == now + 1000
    assert r.engine.next_wakeup_ms() is None
