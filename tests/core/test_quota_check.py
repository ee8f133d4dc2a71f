"""KEP-7513 (seed 003): resources.quotaCheck All / OnlyDeclared.

The seed's Story 1 runs from config/examples/quota-check/: a GPU-only
ClusterQueue and a Workload that also asks for cpu, memory and a
webhook-injected resource.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kueuestream.admission.api.config import Configuration
from kueuestream.admission.decode import decode
from kueuestream.admission.validation import config_warnings
from tests.core.quota_check_examples import (
    ALL,
    ONLY_DECLARED,
    WARNING,
    WORKLOAD,
    manifests,
    only_declared_with_prefixes,
    with_config,
)
from tests.helpers import configuration_manifest, flavor, run, run_manifests, workload

# The Workload asks for cpu and memory, neither covered: assignFlavors stops at the first in
# SliceRequests order (FNV-1a hash of the name), which is memory.
UNDECLARED_UNAVAILABLE = (
    "couldn't assign flavors to pod set main: resource memory unavailable in ClusterQueue"
)


def cluster_queue_of(folder: Path) -> dict[str, Any]:
    [cq] = [d for d in manifests(folder) if d["kind"] == "ClusterQueue"]
    return dict(cq)


# ------------------------------------------------------------- the examples


def test_the_examples_are_complete_and_differ_only_in_quota_check() -> None:
    for folder in (ONLY_DECLARED, ALL):
        kinds = sorted(d["kind"] for d in manifests(folder))
        assert kinds == [
            "ClusterQueue",
            "Configuration",
            "LocalQueue",
            "Namespace",
            "ResourceFlavor",
            "Workload",
        ]
    only = {p.name: p.read_text() for p in ONLY_DECLARED.glob("*.yaml")}
    every = {p.name: p.read_text() for p in ALL.glob("*.yaml")}
    assert only.keys() == every.keys()
    assert [name for name in sorted(only) if only[name] != every[name]] == ["00-configuration.yaml"]
    quota_check = {}
    for folder in (ONLY_DECLARED, ALL):
        cfg = decode(manifests(folder)[0]).obj
        assert isinstance(cfg, Configuration)
        quota_check[folder.name] = cfg.resources.quota_check
    assert quota_check == {"only-declared": "OnlyDeclared", "all": "All"}


def test_the_example_cluster_queue_is_the_seeds() -> None:
    cq = cluster_queue_of(ONLY_DECLARED)
    assert cq["metadata"]["name"] == "cluster-queue"
    assert cq["spec"] == {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {"name": "nvidia", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 10}]}
                ],
            }
        ],
    }


def test_only_declared_admits_the_workload_charging_only_the_gpu() -> None:
    r = run_manifests(manifests(ONLY_DECLARED))
    assert r.admitted() == [WORKLOAD]
    status = r.status(WORKLOAD)
    assert status["admission"] == {
        "clusterQueue": "cluster-queue",
        "podSetAssignments": [
            {
                "name": "main",
                "flavors": {"nvidia.com/gpu": "nvidia"},
                "resourceUsage": {"nvidia.com/gpu": "1"},
                "count": 1,
            }
        ],
    }
    admitted = r.condition(WORKLOAD, "Admitted")
    assert admitted is not None and (admitted["status"], admitted["reason"]) == ("True", "Admitted")


def test_all_keeps_the_workload_pending_naming_an_undeclared_resource() -> None:
    r = run_manifests(manifests(ALL))
    assert r.admitted() == []
    message = r.pending_message(WORKLOAD)
    assert message == UNDECLARED_UNAVAILABLE
    covered = cluster_queue_of(ALL)["spec"]["resourceGroups"][0]["coveredResources"]
    assert "cpu" not in covered
    cond = r.condition(WORKLOAD, "QuotaReserved")
    assert cond is not None and cond["reason"] == "NoMatchingFlavor"
    assert "admission" not in r.status(WORKLOAD)


def test_under_all_the_named_resource_is_the_one_left_undeclared() -> None:
    # Cover cpu and memory too: only the webhook-injected resource is left to block.
    docs = manifests(ALL)
    for doc in docs:
        if doc["kind"] == "ClusterQueue":
            doc["spec"]["resourceGroups"] = [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "nvidia",
                            "resources": [
                                {"name": "cpu", "nominalQuota": 8},
                                {"name": "memory", "nominalQuota": "32Gi"},
                                {"name": "nvidia.com/gpu", "nominalQuota": 10},
                            ],
                        }
                    ],
                }
            ]
    r = run_manifests(docs)
    assert r.pending_message(WORKLOAD) == (
        "couldn't assign flavors to pod set main: "
        "resource example.com/sidecar-injected unavailable in ClusterQueue"
    )


@pytest.mark.parametrize(
    ("resources", "admitted"),
    [
        ({"quotaCheckStrategy": "IgnoreUndeclared"}, True),
        ({"quotaCheckStrategy": "BlockUndeclared"}, False),
        ({"quotaCheck": "IgnoreUndeclared"}, True),
        ({}, False),  # All is the default
    ],
)
def test_upstream_spellings_behave_the_same(resources: dict[str, Any], admitted: bool) -> None:
    r = run_manifests(with_config(ONLY_DECLARED, resources))
    if admitted:
        assert r.admitted() == [WORKLOAD]
    else:
        assert r.pending_message(WORKLOAD) == UNDECLARED_UNAVAILABLE


@pytest.mark.parametrize("gate", ["QuotaCheck", "QuotaCheckStrategy"])
def test_feature_gate_off_means_all(gate: str) -> None:
    r = run_manifests(with_config(ONLY_DECLARED, {"quotaCheck": "OnlyDeclared"}, {gate: False}))
    assert r.admitted() == []
    assert r.pending_message(WORKLOAD) == UNDECLARED_UNAVAILABLE


def test_feature_gate_on_explicitly() -> None:
    r = run_manifests(with_config(ONLY_DECLARED, {"quotaCheck": "OnlyDeclared"}, {"QuotaCheck": True}))
    assert r.admitted() == [WORKLOAD]


# ------------------------------------------------ OnlyDeclared and excludeResourcePrefixes


def test_exclude_prefixes_under_only_declared_warn(tmp_path: Path) -> None:
    folder = only_declared_with_prefixes(tmp_path)
    cfg = decode(manifests(folder)[0]).obj
    assert isinstance(cfg, Configuration)
    assert config_warnings(cfg) == [WARNING]


def test_exclude_prefixes_under_only_declared_still_admit(tmp_path: Path) -> None:
    r = run_manifests(manifests(only_declared_with_prefixes(tmp_path)))
    assert r.admitted() == [WORKLOAD]
    assert r.engine.warnings == [WARNING]


def test_exclude_prefixes_under_all_do_not_warn() -> None:
    docs = with_config(ALL, {"quotaCheck": "All", "excludeResourcePrefixes": ["example.com/"]})
    cfg = decode(docs[0]).obj
    assert isinstance(cfg, Configuration)
    assert config_warnings(cfg) == []
    # the injected resource is excluded, but cpu still has no quota
    assert run_manifests(docs).pending_message(WORKLOAD) == UNDECLARED_UNAVAILABLE


# ------------------------------------- all resources declared: normal quota checks

ONLY_DECLARED_CONFIG = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources: {quotaCheck: OnlyDeclared}
---"""

GPU_CQ = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: nvidia
      resources: [{name: nvidia.com/gpu, nominalQuota: 10}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: cluster-queue-lq, namespace: default}
spec: {clusterQueue: cluster-queue}
---"""


def gpu_workload(name: str, gpus: int, created: str) -> str:
    return workload(
        name,
        "cluster-queue",
        cpu="2",
        created=created,
        extra_requests=f', nvidia.com/gpu: "{gpus}", memory: 4Gi',
    )


def test_only_declared_over_the_gpu_quota_stays_pending() -> None:
    r = run(
        ONLY_DECLARED_CONFIG + flavor("nvidia") + GPU_CQ + gpu_workload("big", 11, "2024-01-01T00:00:00Z")
    )
    assert r.admitted() == []
    assert r.pending_message("big") == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor nvidia, "
        "previously considered podsets requests (0) + current podset request (11) > maximum capacity (10)"
    )


def test_only_declared_counts_declared_usage_across_workloads() -> None:
    text = (
        ONLY_DECLARED_CONFIG
        + flavor("nvidia")
        + GPU_CQ
        + gpu_workload("first", 6, "2024-01-01T00:00:00Z")
        + gpu_workload("second", 6, "2024-01-01T00:00:01Z")
    )
    r = run(text)
    assert r.admitted() == ["first"]
    assert r.pending_message("second") == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
        "nvidia, 2 more needed"
    )
    r.finish("default", "first")
    assert r.admitted() == ["second"]


DECLARED_CQ = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 4}, {name: memory, nominalQuota: 16Gi}]
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: nvidia
      resources: [{name: nvidia.com/gpu, nominalQuota: 10}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: cluster-queue-lq, namespace: default}
spec: {clusterQueue: cluster-queue}
---"""


@pytest.mark.parametrize("quota_check", ["All", "OnlyDeclared"])
def test_when_everything_is_declared_both_modes_check_every_resource(quota_check: str) -> None:
    cfg = ONLY_DECLARED_CONFIG.replace("OnlyDeclared", quota_check)
    text = (
        cfg
        + flavor("default")
        + flavor("nvidia")
        + DECLARED_CQ
        + gpu_workload("first", 1, "2024-01-01T00:00:00Z")
        + gpu_workload("second", 1, "2024-01-01T00:00:01Z")
        + gpu_workload("third", 1, "2024-01-01T00:00:02Z")
    )
    r = run(text)
    # cpu is the binding resource: 2 + 2 of 4
    assert r.admitted() == ["first", "second"]
    assert r.flavors("first") == {"cpu": "default", "memory": "default", "nvidia.com/gpu": "nvidia"}
    assert r.pending_message("third") == (
        "couldn't assign flavors to pod set main: "
        "insufficient unused quota for cpu in flavor default, 2 more needed"
    )


def test_only_declared_skips_cluster_queue_resources_the_pod_does_not_ask_for() -> None:
    text = (
        ONLY_DECLARED_CONFIG
        + flavor("default")
        + flavor("nvidia")
        + DECLARED_CQ
        + workload("cpu-only", "cluster-queue", cpu="3", extra_requests=', example.com/injected: "1"')
    )
    r = run(text)
    assert r.admitted() == ["cpu-only"]
    [psa] = r.status("cpu-only")["admission"]["podSetAssignments"]
    assert (psa["flavors"], psa["resourceUsage"]) == ({"cpu": "default"}, {"cpu": "3"})


def test_only_declared_with_nothing_declared_requested_is_admitted_with_no_usage() -> None:
    text = (
        ONLY_DECLARED_CONFIG
        + flavor("nvidia")
        + GPU_CQ
        + workload("cpu-job", "cluster-queue", cpu="100", count=5)
    )
    r = run(text)
    assert r.admitted() == ["cpu-job"]
    [psa] = r.status("cpu-job")["admission"]["podSetAssignments"]
    assert (psa["flavors"], psa["resourceUsage"], psa["count"]) == ({}, {}, 5)


def test_switching_the_configuration_reevaluates_pending_workloads() -> None:
    docs = manifests(ALL)
    r = run_manifests(docs)
    assert r.pending_message(WORKLOAD) == UNDECLARED_UNAVAILABLE
    r.tick()
    r.load_manifests([configuration_manifest(resources={"quotaCheck": "OnlyDeclared"})])
    assert r.admitted() == [WORKLOAD]
