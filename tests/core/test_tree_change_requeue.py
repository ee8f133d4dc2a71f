"""A change of the quota tree retries parked Workloads a batch period later, not at once.

Kueue's queue manager leaves its queues as they are when a ClusterQueue's spec
changes and asks its inadmissible-workload requeuer to retry the parked
Workloads of that ClusterQueue's cohort tree (``Manager.UpdateClusterQueue`` calls
``notifyRetryInadmissibleWithoutLock``); the requeuer moves them back to their
queues a batch period (1 s) later. A Cohort's update does the same for its tree
(``Manager.AddOrUpdateCohort``), a ResourceFlavor's for the ClusterQueues using it
(``ResourceFlavorReconciler.Update``, through ``NotifyRetryInadmissible``). So a
Workload queued in the meantime is tried before the parked ones, and the trees the
change does not concern keep their parked Workloads (and their messages) as they
are. A ClusterQueue sent again with the same spec retries nothing.

A new Configuration is a restart of Kueue's manager: every pending Workload is in
its queue again, and the oldest goes first.

``q`` has 10 cpus. ``running`` (7) is admitted; ``waiting`` (4) is told "1 more
needed" and parked; ``small`` (3), queued after it, is admitted, so 4 are short
now while ``waiting`` still says 1.
"""

from __future__ import annotations

from kueuestream.admission.events import Event, EventType
from tests.helpers import (
    Run,
    cluster_queue,
    configuration_manifest,
    docs_of,
    flavor,
    run,
    workload,
)

STALE = "1 more needed"


def _stale(
    queue: str, flavor_name: str, cpus: tuple[int, int, int], prefix: str = "", cohort: str = ""
) -> str:
    """A ClusterQueue as full as ``running`` and ``small`` make it, with ``waiting`` parked
    between them: its message, from before ``small`` was admitted, is 1 cpu short."""
    running, waiting, small = cpus
    return (
        flavor(flavor_name)
        + cluster_queue(
            queue, f"{flavor_name}: [{{name: cpu, nominalQuota: {running + small}}}]", cohort=cohort
        )
        + workload(f"{prefix}running", queue, cpu=str(running), created="2024-01-01T00:00:00Z")
        + workload(f"{prefix}waiting", queue, cpu=str(waiting), created="2024-01-01T00:00:01Z")
        + workload(f"{prefix}small", queue, cpu=str(small), created="2024-01-01T00:00:02Z")
    )


def _scenario(cohort: str = "") -> str:
    return _stale("q", "default", (7, 4, 3), cohort=cohort)


def _settled(extra: str = "", cohort: str = "") -> Run:
    r = run(_scenario(cohort=cohort) + extra)
    assert "running" in r.admitted() and "small" in r.admitted()
    assert r.pending_message("waiting").endswith(STALE)
    r.tick()
    return r


NEWCOMER = workload("newcomer", "q", cpu="1", created="2024-01-01T00:00:09Z")


def test_a_workload_queued_with_the_change_goes_before_the_parked_ones() -> None:
    """``q`` grows to 11 cpus with ``newcomer`` (1 cpu) arriving in the same batch: the
    newcomer takes the free cpu at once, and ``waiting``, retried a second later, is
    still 4 short (placed again at once, the older ``waiting`` would have gone first
    and been told it is 3 short, and the newcomer would have been admitted)."""
    r = _settled()
    r.load(cluster_queue("q", "default: [{name: cpu, nominalQuota: 11}]") + NEWCOMER)
    assert "newcomer" in r.admitted()
    assert r.pending_message("waiting").endswith("4 more needed")


def test_the_parked_ones_are_retried_a_batch_period_after_the_change() -> None:
    """Applied on its own, the change tries no parked Workload; the retry falls due a
    second later, and a Workload arriving in between is tried first."""
    r = _settled()
    now = r.time_ms
    change = docs_of(cluster_queue("q", "default: [{name: cpu, nominalQuota: 14}]"))
    for doc in change:
        r.engine.apply(Event(EventType.UPSERT, now, manifest=doc))
    assert r.pending_message("waiting").endswith(STALE)
    assert r.engine.next_wakeup_ms() == now + 1000
    (newcomer,) = docs_of(workload("newcomer", "q", cpu="3", created="2024-01-01T00:00:09Z"))
    r.engine.apply(Event(EventType.UPSERT, now + 500, manifest=newcomer))
    assert "newcomer" in r.admitted()
    r.engine.apply(Event(EventType.TICK, now + 1000))
    assert r.pending_message("waiting").endswith("3 more needed")


def test_the_retry_admits_a_parked_workload_that_fits_now() -> None:
    r = _settled()
    r.load(cluster_queue("q", "default: [{name: cpu, nominalQuota: 14}]"))
    assert "waiting" in r.admitted()


def test_the_same_spec_sent_again_retries_nothing() -> None:
    """``UpdateClusterQueue`` notifies the requeuer only when the spec changed."""
    r = _settled()
    r.load(cluster_queue("q", "default: [{name: cpu, nominalQuota: 10}]"))
    assert r.pending_message("waiting").endswith(STALE)
    assert r.engine.next_wakeup_ms() is None


def test_a_change_in_another_tree_leaves_the_parked_ones_alone() -> None:
    other = cluster_queue("other", "default: [{name: cpu, nominalQuota: 1}]")
    r = _settled(other)
    r.load(cluster_queue("other", "default: [{name: cpu, nominalQuota: 2}]"))
    assert r.pending_message("waiting").endswith(STALE)


def test_a_change_of_a_clusterqueue_in_the_same_cohort_retries_them() -> None:
    """The retry covers the whole cohort tree of the ClusterQueue that changed."""
    other = cluster_queue("other", "default: [{name: cpu, nominalQuota: 0}]", cohort="team")
    r = _settled(other, cohort="team")
    r.load(cluster_queue("other", "default: [{name: cpu, nominalQuota: 1}]", cohort="team"))
    # 10 + 1 in the cohort, 10 in use: 4 wanted, 3 short.
    assert r.pending_message("waiting").endswith("3 more needed")


def test_a_cohort_update_retries_its_tree() -> None:
    """``Manager.AddOrUpdateCohort`` asks for a retry of the Cohort's root on every update."""
    r = _settled(cohort="team")
    team = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: Cohort
metadata: {name: team}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 2}]
---"""
    r.load(team + NEWCOMER)
    assert "newcomer" in r.admitted()
    # 12 in the tree, 11 in use: 4 wanted, 3 short.
    assert r.pending_message("waiting").endswith("3 more needed")


def test_a_flavor_update_retries_the_clusterqueues_using_it() -> None:
    """``ResourceFlavorReconciler.Update`` retries the ClusterQueues using the flavor;
    one using another flavor keeps its parked Workload as it is."""
    r = _settled(_stale("other", "spare", (2, 2, 1), prefix="also-"))
    # 3 in use of 3: 2 short, while the message of its last try says 1.
    assert r.pending_message("also-waiting").endswith(STALE)
    r.load(flavor("default", labels="{pool: a}") + NEWCOMER)
    assert "newcomer" not in r.admitted()
    assert r.pending_message("newcomer").endswith(STALE)
    assert r.pending_message("waiting").endswith("4 more needed")
    assert r.pending_message("also-waiting").endswith(STALE)


def test_a_new_configuration_tries_every_pending_workload_at_once() -> None:
    """A Configuration is read when Kueue's manager starts: after a restart every pending
    Workload is queued, so the older ``waiting`` is tried before the newcomer takes the
    free cpu, and is told it is 3 short."""
    r = _settled()
    config = configuration_manifest()
    docs = docs_of(cluster_queue("q", "default: [{name: cpu, nominalQuota: 11}]") + NEWCOMER)
    r.load_manifests([config, *docs])
    assert "newcomer" in r.admitted()
    assert r.pending_message("waiting").endswith("3 more needed")


def test_a_parked_workload_keeps_its_reason_across_a_change_elsewhere() -> None:
    """A Workload set aside because its namespace is not selected keeps ``Misconfigured``
    while another tree changes: Kueue leaves its queues, and the conditions the
    scheduler wrote, as they are."""
    mismatched = (
        flavor("default")
        + cluster_queue("q", "default: [{name: cpu, nominalQuota: 4}]").replace(
            "namespaceSelector: {}", "namespaceSelector: {matchLabels: {team: ml}}"
        )
        + cluster_queue("other", "default: [{name: cpu, nominalQuota: 1}]")
        + "\napiVersion: v1\nkind: Namespace\nmetadata: {name: default, labels: {team: web}}\n---"
        + workload("w", "q")
    )
    r = run(mismatched)
    expected = ("Misconfigured", "workload namespace doesn't match ClusterQueue selector")
    cond = r.condition("w", "QuotaReserved")
    assert cond is not None and (cond["reason"], cond["message"]) == expected
    r.tick()
    r.load(cluster_queue("other", "default: [{name: cpu, nominalQuota: 2}]"))
    cond = r.condition("w", "QuotaReserved")
    assert cond is not None and (cond["reason"], cond["message"]) == expected
