"""What a pod set asks for: Kueue's per-pod formula, worked out by hand.

per pod = max(sum of containers + sidecars, each init container + the sidecars
started before it) + overhead; limits stand in for missing requests; the pod set
total is that times count. cpu is kept in millicores, everything else in units,
rounded up once per pod.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kueuestream.admission.api.core import PodSpec
from kueuestream.admission.requests import pod_requests, scale, without_prefixes
from tests.helpers import cluster_queue, flavor, run

Gi = 2**30
Mi = 2**20


def pod(text: str) -> dict[str, int]:
    return pod_requests(PodSpec.model_validate(yaml.safe_load(text)))


def c(requests: str = "{}", limits: str = "{}", restart: str = "") -> str:
    policy = f", restartPolicy: {restart}" if restart else ""
    return f"{{resources: {{requests: {requests}, limits: {limits}}}{policy}}}"


# ------------------------------------------------------------------ per pod


def test_containers_add_up() -> None:
    spec = f"containers: [{c('{cpu: 500m, memory: 1Gi}')}, {c('{cpu: 1, memory: 512Mi}')}]"
    assert pod(spec) == {"cpu": 1500, "memory": Gi + 512 * Mi}


def test_a_larger_init_container_sets_the_pod_request() -> None:
    spec = f"""
containers: [{c("{cpu: 500m}")}, {c("{cpu: 1}")}]
initContainers: [{c("{cpu: 2}")}, {c("{cpu: 1800m}")}]
"""
    # init containers run one at a time: max(0.5 + 1, 2, 1.8) = 2
    assert pod(spec) == {"cpu": 2000}


def test_smaller_init_containers_change_nothing() -> None:
    spec = f"""
containers: [{c("{cpu: 1, memory: 1Gi}")}, {c("{cpu: 1, memory: 1Gi}")}]
initContainers: [{c("{cpu: 1500m, memory: 1Gi}")}]
"""
    assert pod(spec) == {"cpu": 2000, "memory": 2 * Gi}


def test_the_maximum_is_taken_per_resource() -> None:
    spec = f"""
containers: [{c("{cpu: 2, memory: 1Gi}")}]
initContainers: [{c("{cpu: 500m, memory: 4Gi}")}, {c("{nvidia.com/gpu: 1}")}]
"""
    # cpu from the containers, memory from the first init container, the GPU from the second
    assert pod(spec) == {"cpu": 2000, "memory": 4 * Gi, "nvidia.com/gpu": 1}


def test_an_init_container_asking_for_zero_still_names_the_resource() -> None:
    """k8s ``PodRequests`` takes the init containers' maximum with ``maxResourceList``, which adds
    a resource it has not seen even at zero: the pod set then asks for 0 of it, and a flavor's
    quota for it is checked (and its message told) like any other."""
    spec = f"""
containers: [{c("{nvidia.com/gpu: 3}")}]
initContainers: [{c("{cpu: 0, nvidia.com/gpu: 1}")}]
"""
    assert pod(spec) == {"cpu": 0, "nvidia.com/gpu": 3}


def test_pod_level_requests_replace_the_containers_sum() -> None:
    """KEP-2837, as k8s ``PodRequests`` reads it: cpu, memory and huge pages asked for by the pod
    as a whole replace its containers' sum (a pod-level limit standing in for a missing request);
    other resources stay the containers'; the overhead is added after."""
    spec = f"""
containers: [{c("{cpu: 1, memory: 1Gi, nvidia.com/gpu: 1}")}, {c("{cpu: 1}")}]
initContainers: [{c("{cpu: 4}")}]
resources: {{requests: {{cpu: 3, nvidia.com/gpu: 4}}, limits: {{memory: 2Gi}}}}
overhead: {{cpu: 250m}}
"""
    assert pod(spec) == {"cpu": 3250, "memory": 2 * Gi, "nvidia.com/gpu": 1}
    # Pod-level resources naming nothing a pod may ask for as a whole change nothing.
    only_gpu = f"containers: [{c('{cpu: 1}')}]\nresources: {{requests: {{nvidia.com/gpu: 2}}}}"
    assert pod(only_gpu) == {"cpu": 1000}


def test_overhead_is_added_after_the_maximum() -> None:
    spec = f"""
containers: [{c("{cpu: 1}")}]
initContainers: [{c("{cpu: 2}")}]
overhead: {{cpu: 250m, memory: 64Mi}}
"""
    assert pod(spec) == {"cpu": 2250, "memory": 64 * Mi}


def test_a_limit_stands_in_for_a_missing_request() -> None:
    spec = f"containers: [{c('{cpu: 500m}', '{cpu: 4, memory: 2Gi, nvidia.com/gpu: 1}')}]"
    # cpu has a request (the limit does not replace it); memory and the GPU only have limits
    assert pod(spec) == {"cpu": 500, "memory": 2 * Gi, "nvidia.com/gpu": 1}


def test_limits_stand_in_for_init_containers_too() -> None:
    spec = f"""
containers: [{c("{cpu: 1}")}]
initContainers: [{c(limits="{cpu: 3}")}]
"""
    assert pod(spec) == {"cpu": 3000}


def test_sidecars_add_to_the_containers() -> None:
    spec = f"""
containers: [{c("{cpu: 1, memory: 1Gi}")}]
initContainers: [{c("{cpu: 500m, memory: 256Mi}", restart="Always")}]
"""
    assert pod(spec) == {"cpu": 1500, "memory": Gi + 256 * Mi}


def test_an_init_container_after_a_sidecar_runs_beside_it() -> None:
    spec = f"""
containers: [{c("{cpu: 1}")}]
initContainers: [{c("{cpu: 500m}", restart="Always")}, {c("{cpu: 2}")}]
"""
    # the init container starts once the sidecar runs: max(1 + 0.5, 0.5 + 2) = 2.5
    assert pod(spec) == {"cpu": 2500}


def test_an_init_container_before_a_sidecar_runs_alone() -> None:
    spec = f"""
containers: [{c("{cpu: 1}")}]
initContainers: [{c("{cpu: 2}")}, {c("{cpu: 500m}", restart="Always")}]
"""
    # max(1 + 0.5, 2) = 2
    assert pod(spec) == {"cpu": 2000}


def test_a_pod_is_summed_exactly_and_rounded_up_once() -> None:
    spec = f"containers: [{c('{cpu: 100u, memory: 0.5}')}, {c('{cpu: 100u, memory: 0.5}')}]"
    # 200 micro-cores round up to 1m (not 1m + 1m); half a byte twice is one byte
    assert pod(spec) == {"cpu": 1, "memory": 1}


def test_sub_milli_cpu_rounds_up() -> None:
    assert pod(f"containers: [{c('{cpu: 1001u}')}]") == {"cpu": 2}


def test_an_empty_pod_asks_for_nothing() -> None:
    assert pod("containers: [{name: c}]") == {}


def test_scale_and_prefixes() -> None:
    per_pod = {"cpu": 2250, "example.com/injected": 1, "example.org/x": 2}
    assert scale(per_pod, 3) == {"cpu": 6750, "example.com/injected": 3, "example.org/x": 6}
    assert without_prefixes(per_pod, ["example.com/"]) == {"cpu": 2250, "example.org/x": 2}
    assert without_prefixes(per_pod, []) == per_pod


# ------------------------------------------------------------ through the engine

CPU_MEM = "default: [{name: cpu, nominalQuota: 20}, {name: memory, nominalQuota: 64Gi}]"


def config(resources: str) -> str:
    return f"""
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources: {resources}
---"""


def workload(name: str, count: int, pod_spec: str, created: str = "2024-01-01T00:00:00Z") -> str:
    body = "\n".join("        " + line for line in pod_spec.strip().splitlines())
    return f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {{name: {name}, namespace: default, creationTimestamp: "{created}"}}
spec:
  queueName: q-lq
  podSets:
  - name: main
    count: {count}
    template:
      spec:
{body}
---"""


def usage(r: Any, name: str) -> dict[str, str]:
    [psa] = r.status(name)["admission"]["podSetAssignments"]
    return dict(psa["resourceUsage"])


MIXED_POD = """
containers:
- resources: {requests: {cpu: 500m, memory: 1Gi}}
- resources: {requests: {cpu: 1, memory: 512Mi}}
initContainers:
- resources: {requests: {cpu: 2, memory: 1Gi}}
overhead: {cpu: 250m, memory: 128Mi}
"""


def test_resource_usage_is_the_hand_computed_total() -> None:
    r = run(
        flavor("default") + cluster_queue("q", CPU_MEM, covered="[cpu, memory]") + workload("w", 3, MIXED_POD)
    )
    # cpu:    3 pods x (max(0.5 + 1, 2) + 0.25)          = 3 x 2.25   = 6750m
    # memory: 3 pods x (max(1Gi + 512Mi, 1Gi) + 128Mi)   = 3 x 1664Mi = 4992Mi
    assert usage(r, "w") == {"cpu": "6750m", "memory": "4992Mi"}
    assert r.flavors("w") == {"cpu": "default", "memory": "default"}


def test_the_pod_set_total_is_checked_against_quota() -> None:
    text = (
        flavor("default")
        + cluster_queue(
            "q",
            "default: [{name: cpu, nominalQuota: 6}, {name: memory, nominalQuota: 64Gi}]",
            covered="[cpu, memory]",
        )
        + workload("w", 3, MIXED_POD)
    )
    # 6750m > 6: more than the ClusterQueue could ever hold
    assert run(text).pending_message("w") == (
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, "
        "previously considered podsets requests (0) + current podset request (6750m) > maximum capacity (6)"
    )


def test_sidecar_and_limit_through_the_engine() -> None:
    spec = """
containers:
- resources: {requests: {cpu: 1}, limits: {memory: 2Gi}}
initContainers:
- restartPolicy: Always
  resources: {requests: {cpu: 250m, memory: 256Mi}}
- resources: {requests: {cpu: 3}}
"""
    r = run(flavor("default") + cluster_queue("q", CPU_MEM, covered="[cpu, memory]") + workload("w", 2, spec))
    # cpu:    max(1 + 0.25, 0.25 + 3) = 3.25 per pod, x2 = 6500m
    # memory: the limit stands in: 2Gi + 256Mi per pod, x2 = 4608Mi
    assert usage(r, "w") == {"cpu": "6500m", "memory": "4608Mi"}


INJECTED_POD = """
containers:
- resources: {requests: {cpu: 1, example.com/injected: 1}}
"""


def test_exclude_resource_prefixes_drops_resources_under_quota_check_all() -> None:
    cq = cluster_queue("q", "default: [{name: cpu, nominalQuota: 4}]")
    blocked = run(flavor("default") + cq + workload("w", 2, INJECTED_POD))
    assert blocked.pending_message("w") == (
        "couldn't assign flavors to pod set main: resource example.com/injected unavailable in ClusterQueue"
    )
    excluded = run(
        config("{quotaCheck: All, excludeResourcePrefixes: [example.com/]}")
        + flavor("default")
        + cq
        + workload("w", 2, INJECTED_POD)
    )
    assert usage(excluded, "w") == {"cpu": "2"}


def test_exclude_resource_prefixes_is_ignored_under_only_declared() -> None:
    # The ClusterQueue covers the injected resource with room for one pod's worth only.
    cq = cluster_queue(
        "q",
        "default: [{name: cpu, nominalQuota: 4}, {name: example.com/injected, nominalQuota: 1}]",
        covered="[cpu, example.com/injected]",
    )
    under_all = run(
        config("{quotaCheck: All, excludeResourcePrefixes: [example.com/]}")
        + flavor("default")
        + cq
        + workload("w", 2, INJECTED_POD)
    )
    assert usage(under_all, "w") == {"cpu": "2"}
    only_declared = run(
        config("{quotaCheck: OnlyDeclared, excludeResourcePrefixes: [example.com/]}")
        + flavor("default")
        + cq
        + workload("w", 2, INJECTED_POD)
    )
    # the prefix no longer hides it: 2 pods x 1 > the quota of 1
    assert only_declared.pending_message("w") == (
        "couldn't assign flavors to pod set main: insufficient quota for example.com/injected in flavor "
        "default, previously considered podsets requests (0) + current podset request (2) "
        "> maximum capacity (1)"
    )
    assert only_declared.engine.warnings == [
        "resources.excludeResourcePrefixes is ignored because resources.quotaCheck is OnlyDeclared: "
        "only the resources a ClusterQueue covers are checked"
    ]


def test_a_zero_request_for_an_uncovered_resource_is_ignored() -> None:
    spec = "containers:\n- resources: {requests: {cpu: 1, example.com/injected: 0}}"
    r = run(
        flavor("default")
        + cluster_queue("q", "default: [{name: cpu, nominalQuota: 4}]")
        + workload("w", 1, spec)
    )
    assert usage(r, "w") == {"cpu": "1"}


@pytest.mark.parametrize(("count", "admitted"), [(4, ["w"]), (5, [])])
def test_count_multiplies_against_quota(count: int, admitted: list[str]) -> None:
    spec = "containers:\n- resources: {requests: {cpu: 900m}}\noverhead: {cpu: 100m}"
    text = (
        flavor("default")
        + cluster_queue("q", "default: [{name: cpu, nominalQuota: 4}]")
        + workload("w", count, spec)
    )
    r = run(text)
    assert r.admitted() == admitted
    if admitted:
        assert usage(r, "w") == {"cpu": "4"}
