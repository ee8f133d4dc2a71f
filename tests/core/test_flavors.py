"""Flavor assignment: order, node labels, taints and flavorFungibility."""

from __future__ import annotations

from tests.helpers import cluster_queue, flavor, run, workload

TWO_FLAVORS = """
on-demand: [{name: cpu, nominalQuota: 2}]
spot: [{name: cpu, nominalQuota: 4}]
"""


def test_flavors_are_tried_in_cluster_queue_order() -> None:
    text = (
        flavor("on-demand")
        + flavor("spot")
        + cluster_queue("q", TWO_FLAVORS)
        + workload("a", "q", cpu="2", created="2024-01-01T00:00:00Z")
        + workload("b", "q", cpu="2", created="2024-01-01T00:00:01Z")
        + workload("c", "q", cpu="3", created="2024-01-01T00:00:02Z")
    )
    r = run(text)
    assert r.flavors("a") == {"cpu": "on-demand"}
    assert r.flavors("b") == {"cpu": "spot"}
    assert r.pending_message("c") == (
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor on-demand, "
        "previously considered podsets requests (0) + current podset request (3) > maximum capacity (2), "
        "insufficient unused quota for cpu in flavor spot, 1 more needed"
    )


def test_node_selector_picks_the_flavor_with_matching_labels() -> None:
    text = (
        flavor("x86", labels="{arch: amd64}")
        + flavor("arm", labels="{arch: arm64}")
        + cluster_queue("q", "x86: [{name: cpu, nominalQuota: 4}]\narm: [{name: cpu, nominalQuota: 4}]")
        + workload("w", "q", pod_extra="        nodeSelector: {arch: arm64, unrelated: x}\n")
    )
    assert run(text).flavors("w") == {"cpu": "arm"}


def test_required_node_affinity_and_its_message() -> None:
    affinity = """        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions:
                - {key: arch, operator: In, values: [riscv]}
"""
    text = (
        flavor("x86", labels="{arch: amd64}")
        + cluster_queue("q", "x86: [{name: cpu, nominalQuota: 4}]")
        + workload("w", "q", pod_extra=affinity)
    )
    r = run(text)
    assert r.pending_message("w") == (
        "couldn't assign flavors to pod set main: flavor x86 doesn't match node affinity"
    )


def test_taints_need_tolerations() -> None:
    tainted = flavor(
        "spot",
        extra="  nodeTaints: [{key: instance, value: spot, effect: NoSchedule}]",
    )
    text = (
        tainted
        + cluster_queue("q", "spot: [{name: cpu, nominalQuota: 4}]")
        + workload("plain", "q", created="2024-01-01T00:00:00Z")
        + workload(
            "tolerant",
            "q",
            created="2024-01-01T00:00:01Z",
            pod_extra=(
                "        tolerations: [{key: instance, operator: Equal, value: spot, effect: NoSchedule}]\n"
            ),
        )
    )
    r = run(text)
    assert r.admitted() == ["tolerant"]
    assert r.pending_message("plain") == (
        "couldn't assign flavors to pod set main: untolerated taint {instance spot NoSchedule <nil>} "
        "in flavor spot"
    )


def _fungibility(policy: str) -> dict[str, str]:
    # on-demand has no quota left of its own but could borrow from the cohort; spot fits
    # without borrowing.
    text = (
        flavor("on-demand")
        + flavor("spot")
        + cluster_queue(
            "q",
            "on-demand: [{name: cpu, nominalQuota: 0}]\nspot: [{name: cpu, nominalQuota: 4}]",
            cohort="c",
            spec_extra=f"  flavorFungibility: {{whenCanBorrow: {policy}}}",
        )
        + cluster_queue("lender", "on-demand: [{name: cpu, nominalQuota: 4}]", cohort="c")
        + workload("w", "q", cpu="2")
    )
    return run(text).flavors("w")


def test_when_can_borrow_borrow_stops_at_the_first_flavor_that_fits() -> None:
    assert _fungibility("Borrow") == {"cpu": "on-demand"}


def test_when_can_borrow_try_next_flavor_prefers_not_borrowing() -> None:
    assert _fungibility("TryNextFlavor") == {"cpu": "spot"}


def test_v1beta2_may_stop_search_means_borrow() -> None:
    assert _fungibility("MayStopSearch") == {"cpu": "on-demand"}


def test_resource_groups_assign_each_group_its_own_flavor() -> None:
    text = (
        flavor("cpu-flavor")
        + flavor("gpu-a")
        + flavor("gpu-b")
        + """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: cpu-flavor
      resources: [{name: cpu, nominalQuota: 8}, {name: memory, nominalQuota: 8Gi}]
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: gpu-a
      resources: [{name: nvidia.com/gpu, nominalQuota: 1}]
    - name: gpu-b
      resources: [{name: nvidia.com/gpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q-lq, namespace: default}
spec: {clusterQueue: q}
---"""
        + workload("w", "q", cpu="2", count=2, extra_requests=', memory: 1Gi, nvidia.com/gpu: "1"')
    )
    r = run(text)
    assert r.flavors("w") == {"cpu": "cpu-flavor", "memory": "cpu-flavor", "nvidia.com/gpu": "gpu-b"}
    usage = r.status("w")["admission"]["podSetAssignments"][0]["resourceUsage"]
    assert usage == {"cpu": "4", "memory": "2Gi", "nvidia.com/gpu": "2"}
