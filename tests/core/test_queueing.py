"""Queueing: strategies, priority, creation time, inactive queues and workloads."""

from __future__ import annotations

from kueuestream.admission.api.config import Configuration
from kueuestream.admission.timefmt import rfc3339
from tests.helpers import cluster_queue, flavor, run, workload

CQ4 = "default: [{name: cpu, nominalQuota: 4}]"


def _blocked_head(strategy: str) -> list[str]:
    # The oldest workload asks for 5 cpu of a 4-cpu queue and can never fit; the
    # younger one asks for 1.
    text = (
        flavor("default")
        + cluster_queue("q", CQ4, spec_extra=f"  queueingStrategy: {strategy}")
        + workload("old-big", "q", cpu="5", created="2024-01-01T00:00:00Z")
        + workload("young-small", "q", cpu="1", created="2024-01-01T00:01:00Z")
    )
    return run(text).admitted()


def test_strict_fifo_blocks_behind_the_head() -> None:
    assert _blocked_head("StrictFIFO") == []


def test_best_effort_fifo_skips_a_head_that_does_not_fit() -> None:
    assert _blocked_head("BestEffortFIFO") == ["young-small"]


def test_higher_priority_goes_first_whatever_the_creation_order() -> None:
    text = (
        flavor("default")
        + cluster_queue("q", CQ4)
        + workload("low", "q", cpu="3", priority=1, created="2024-01-01T00:00:00Z")
        + workload("high", "q", cpu="3", priority=10, created="2024-01-01T00:05:00Z")
    )
    r = run(text)
    assert r.admitted() == ["high"]
    assert "2 more needed" in r.pending_message("low")


def test_equal_priority_goes_by_creation_time() -> None:
    text = (
        flavor("default")
        + cluster_queue("q", CQ4)
        + workload("later", "q", cpu="3", created="2024-01-01T00:05:00Z")
        + workload("earlier", "q", cpu="3", created="2024-01-01T00:00:00Z")
    )
    assert run(text).admitted() == ["earlier"]


def test_workload_priority_class_then_pod_priority() -> None:
    text = (
        flavor("default")
        + cluster_queue("q", CQ4)
        + """
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: urgent}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: by-class, namespace: default, creationTimestamp: "2024-01-01T00:09:00Z"}
spec:
  queueName: q-lq
  priorityClassName: urgent
  priorityClassSource: kueue.x-k8s.io/workloadpriorityclass
  podSets:
  - name: main
    template:
      spec:
        containers: [{name: c, resources: {requests: {cpu: 3}}}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: by-pod, namespace: default, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  queueName: q-lq
  podSets:
  - name: main
    template:
      spec:
        priority: 500
        containers: [{name: c, resources: {requests: {cpu: 3}}}]
---"""
        + workload("plain", "q", cpu="3", created="2023-01-01T00:00:00Z")
    )
    r = run(text)
    assert r.admitted() == ["by-class"]
    r.finish("default", "by-class")
    assert r.admitted() == ["by-pod"]


def test_inactive_workload_is_not_admitted() -> None:
    text = (
        flavor("default")
        + cluster_queue("q", CQ4)
        + workload("w", "q").replace("  queueName: q-lq", "  queueName: q-lq\n  active: false")
    )
    r = run(text)
    assert r.admitted() == []
    cond = r.condition("w", "QuotaReserved")
    assert cond is not None
    assert (cond["reason"], cond["message"]) == ("Deactivated", "The workload is deactivated")


def test_stopped_cluster_queue_admits_nothing_and_drain_evicts() -> None:
    held = flavor("default") + cluster_queue("q", CQ4, spec_extra="  stopPolicy: Hold") + workload("w", "q")
    r = run(held)
    assert r.admitted() == []
    assert r.condition("w", "QuotaReserved")["message"] == "ClusterQueue q is inactive"

    r = run(flavor("default") + cluster_queue("q", CQ4) + workload("w", "q"))
    assert r.admitted() == ["w"]
    r.tick()
    r.load(cluster_queue("q", CQ4, spec_extra="  stopPolicy: HoldAndDrain"))
    evicted = r.condition("w", "Evicted")
    assert evicted is not None
    assert (evicted["reason"], evicted["message"]) == ("ClusterQueueStopped", "The ClusterQueue is stopped")
    assert r.condition("w", "QuotaReserved")["status"] == "False"


def test_hold_keeps_admitted_workloads_running() -> None:
    r = run(flavor("default") + cluster_queue("q", CQ4) + workload("w", "q"))
    r.tick()
    r.load(cluster_queue("q", CQ4, spec_extra="  stopPolicy: Hold"))
    assert r.admitted() == ["w"]


def test_missing_local_queue_and_cluster_queue() -> None:
    text = (
        flavor("default")
        + workload("orphan", "nowhere")
        + """
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: dangling-lq, namespace: default}
spec: {clusterQueue: ghost}
---"""
        + workload("lost", "dangling")
    )
    r = run(text)
    orphan = r.condition("orphan", "QuotaReserved")
    assert (orphan["reason"], orphan["message"]) == ("Misconfigured", "LocalQueue nowhere-lq doesn't exist")
    assert r.condition("lost", "QuotaReserved")["message"] == "ClusterQueue ghost doesn't exist"
    # Creating the missing queue later admits the waiting workload without resubmitting it.
    r.tick()
    r.load(cluster_queue("nowhere", CQ4))
    assert r.admitted() == ["orphan"]


def test_namespace_selector() -> None:
    text = (
        flavor("default")
        + cluster_queue(
            "q",
            CQ4,
            spec_extra="  namespaceSelector: {matchLabels: {team: ml}}".replace(
                "{matchLabels", "{matchLabels"
            ),
        ).replace("  namespaceSelector: {}\n", "")
        + """
apiVersion: v1
kind: Namespace
metadata: {name: default, labels: {team: web}}
---"""
        + workload("w", "q")
    )
    r = run(text)
    assert r.admitted() == []
    assert r.pending_message("w") == "workload namespace doesn't match ClusterQueue selector"
    r.tick()
    r.load("apiVersion: v1\nkind: Namespace\nmetadata: {name: default, labels: {team: ml}}\n")
    assert r.admitted() == ["w"]


def test_missing_namespace_selector_matches_no_namespace() -> None:
    text = (
        flavor("default")
        + cluster_queue("q", CQ4).replace("  namespaceSelector: {}\n", "")
        + workload("w", "q")
    )
    r = run(text)
    assert r.pending_message("w") == "workload namespace doesn't match ClusterQueue selector"


def test_without_the_gate_equivalent_workloads_are_left_as_they_are() -> None:
    """With UnadmittedWorkloadsObservability off, the head that did not fit says so
    (``Pending``), and the equivalent Workloads bulk-moved with it get nothing: Kueue's
    workload controller has no legacy words for them
    (``resolveLegacyUnadmittedQuotaReservedCondition``)."""
    text = (
        flavor("default")
        + cluster_queue("q", CQ4)
        + "".join(workload(f"w{i}", "q", cpu="3", created=f"2024-01-01T00:00:0{i}Z") for i in range(4))
    )
    r = run(text, Configuration.model_validate({"featureGates": {"UnadmittedWorkloadsObservability": False}}))
    assert r.admitted() == ["w0"]
    assert r.condition("w1", "QuotaReserved")["reason"] == "Pending"  # type: ignore[index]
    assert [r.condition(name, "QuotaReserved") for name in ("w2", "w3")] == [None, None]


SIDECAR = """        initContainers:
        - name: sidecar
          restartPolicy: Always
          resources:
            requests: {cpu: "1"}
"""


def test_equivalence_is_the_pod_shape_not_only_the_total() -> None:
    """Kueue's ``computeSchedulingHash`` hashes ``utilpod.SpecShape``: each container's
    requests (after ``AdjustResources`` took missing ones from limits), init containers
    and overhead, besides the pod set's total. A sidecar makes another shape with the
    same total, so its Workload is evaluated on its own; a limit standing in for a
    request does not."""
    limits_only = workload("w4", "q", cpu="3", created="2024-01-01T00:00:04Z")
    limits_only = limits_only.replace('requests: {cpu: "3"}', 'limits: {cpu: "3"}')
    text = (
        flavor("default")
        + cluster_queue("q", CQ4)
        + workload("w0", "q", cpu="3", created="2024-01-01T00:00:00Z")
        + workload("w1", "q", cpu="3", created="2024-01-01T00:00:01Z")
        + workload("w2", "q", cpu="2", created="2024-01-01T00:00:02Z", pod_extra=SIDECAR)
        + workload("w3", "q", cpu="2", created="2024-01-01T00:00:03Z", pod_extra=SIDECAR)
        + limits_only
    )
    r = run(text)
    assert r.admitted() == ["w0"]
    evaluated = (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu "
        "in flavor default, 2 more needed"
    )
    bypassed = "Bypassed scheduling evaluation because an equivalent workload recently failed"
    assert {name: r.pending_message(name) for name in ("w1", "w2", "w3", "w4")} == {
        "w1": evaluated,
        "w2": evaluated,
        "w3": bypassed,
        "w4": bypassed,
    }


def test_every_equivalent_waiting_workload_gets_the_reason() -> None:
    # Identical workloads are parked together when the first does not fit; each still
    # shows why it waits.
    text = (
        flavor("default")
        + cluster_queue("q", CQ4)
        + "".join(workload(f"w{i}", "q", cpu="3", created=f"2024-01-01T00:00:0{i}Z") for i in range(4))
    )
    r = run(text)
    assert r.admitted() == ["w0"]
    assert r.condition("w1", "QuotaReserved")["reason"] == "WaitingForQuota"
    assert r.pending_message("w1") == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu "
        "in flavor default, 2 more needed"
    )
    # The others were never evaluated: the head's reason, in Kueue's words for them
    # (workload controller, resolveGranularUnadmittedQuotaReservedCondition).
    for name in ("w2", "w3"):
        assert r.condition(name, "QuotaReserved")["reason"] == "WaitingForQuota"
        assert r.pending_message(name) == (
            "Bypassed scheduling evaluation because an equivalent workload recently failed"
        )


def test_equivalent_workloads_move_on_one_by_one() -> None:
    """Equivalent Workloads bulk-moved together take their reason at the same moment
    (Kueue's workload controller, ``resolveGranularUnadmittedQuotaReservedCondition``),
    and each goes on from it alone: when the first finishes, the next is admitted and
    the one after is evaluated again, while the last keeps its words and the time they
    were written (``SetQuotaReservation`` and ``UnsetQuotaReservationWithCondition``
    move ``lastTransitionTime`` only when the status flips)."""
    text = (
        flavor("default")
        + cluster_queue("q", CQ4)
        + "".join(workload(f"w{i}", "q", cpu="3", created=f"2024-01-01T00:00:0{i}Z") for i in range(4))
    )
    r = run(text)
    bypassed = "Bypassed scheduling evaluation because an equivalent workload recently failed"
    before = {name: r.condition(name, "QuotaReserved") for name in ("w2", "w3")}
    assert {name: cond["message"] for name, cond in before.items()} == {"w2": bypassed, "w3": bypassed}  # type: ignore[index]
    r.tick(60_000)
    r.finish("default", "w0")
    assert r.admitted() == ["w1"]
    admitted = r.condition("w1", "QuotaReserved")
    assert admitted is not None and admitted["lastTransitionTime"] == rfc3339(r.time_ms)
    assert admitted["message"] == "Quota reserved in ClusterQueue q"
    assert r.pending_message("w2") == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu "
        "in flavor default, 2 more needed"
    )
    assert r.condition("w2", "QuotaReserved")["lastTransitionTime"] == before["w2"]["lastTransitionTime"]  # type: ignore[index]
    assert r.condition("w3", "QuotaReserved") == before["w3"]
