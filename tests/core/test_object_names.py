"""metadata.name and metadata.namespace are checked as the API server checks them.

Upstream: k8s.io/apimachinery ``ValidateObjectMetaAccessor`` checks the name
with a per-kind rule and the namespace with ``ValidateNamespaceName``
(``NameIsDNSLabel``); custom resources (every Kueue kind), batch Jobs,
ConfigMaps and the resource.k8s.io kinds use ``NameIsDNSSubdomain``
(``IsDNS1123Subdomain``), Namespaces ``NameIsDNSLabel`` (``IsDNS1123Label``).
The Job registry strategy (``generateSelector``) copies a Job's name into the
``batch.kubernetes.io/job-name`` pod template label unless
``spec.manualSelector`` is true, and label values are at most 63 characters.
"""

from __future__ import annotations

from typing import Any

import pytest

from kueuestream.admission.decode import decode


def workload(name: Any, namespace: Any = "team-a") -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "queueName": "lq",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
        },
    }


def errors(manifest: dict[str, Any]) -> list[str]:
    return [str(e) for e in decode(manifest).errors]


def bad_fields(manifest: dict[str, Any]) -> list[str]:
    return [e.path for e in decode(manifest).errors]


@pytest.mark.parametrize("value", ["a", "team-a", "0", "a" * 63, "x1-2y"])
def test_namespaces_accepted(value: str) -> None:
    assert bad_fields(workload("w", value)) == []


@pytest.mark.parametrize(
    "value",
    ["A", "-a", "a-", "a_b", "a b", "a/b", "..", ".", "a\x00b", "a\n", "ünï", "a" * 64, "a.b"],
)
def test_namespaces_refused(value: str) -> None:
    assert bad_fields(workload("w", value)) == ["metadata.namespace"]


def test_names_are_subdomains_with_dots_and_253_characters() -> None:
    assert bad_fields(workload("gpu.example.com")) == []
    assert bad_fields(workload(".".join(["a" * 63] * 3) + "." + "b" * 61)) == []  # 253
    for bad in ("a" * 254, "a..b", ".a", "a.", "a.-b", "../..", "a/b", "/tmp/x", "x\x00y", "a\n", "A"):
        assert bad_fields(workload(bad)) == ["metadata.name"], bad


def test_path_like_names_of_the_finding_are_refused() -> None:
    """The reported escape: namespace "../.." and name "../../../outside/x"."""
    assert errors(workload("../../../outside/x", "../..")) == [
        "metadata.name: '../../../outside/x' is not valid: must be a DNS-1123 subdomain: at most 253 "
        "characters, lower-case letters, digits, '-' and '.', each '.'-separated part starting and "
        "ending with a letter or digit (e.g. 'train-1' or 'gpu.example.com')",
        "metadata.namespace: '../..' is not valid: must be a DNS-1123 label: at most 63 characters, "
        "lower-case letters, digits and '-', starting and ending with a letter or digit (e.g. 'team-a')",
    ]
    assert [e.split(":")[0] for e in errors(workload("x", "/tmp/somewhere"))] == ["metadata.namespace"]


def test_a_nul_byte_is_refused_and_shown_escaped() -> None:
    decoded = decode(workload("a\x00b"))
    assert [e.path for e in decoded.errors] == ["metadata.name"]
    assert "'a\\x00b'" in decoded.errors[0].message
    assert decoded.label == "Workload 'team-a/a\\x00b'"


def test_a_namespace_with_dots_is_refused_where_a_name_may_have_them() -> None:
    assert errors(workload("train.v2", "team-a")) == []
    assert [e.split(":")[0] for e in errors(workload("train", "team.a"))] == ["metadata.namespace"]


@pytest.mark.parametrize(
    ("kind", "api_version", "extra"),
    [
        ("ResourceFlavor", "kueue.x-k8s.io/v1beta2", {}),
        ("ClusterQueue", "kueue.x-k8s.io/v1beta2", {}),
        ("Cohort", "kueue.x-k8s.io/v1beta2", {}),
        ("WorkloadPriorityClass", "kueue.x-k8s.io/v1beta2", {"value": 1}),
        ("PriorityClass", "scheduling.k8s.io/v1", {"value": 1}),
        ("DeviceClass", "resource.k8s.io/v1", {}),
    ],
)
def test_cluster_scoped_names_are_subdomains(kind: str, api_version: str, extra: dict[str, Any]) -> None:
    good = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "gpu.example.com"}, **extra}
    bad = {**good, "metadata": {"name": "Bad_Name"}}
    assert not [e for e in decode(good).errors if e.path.startswith("metadata")]
    assert [e.path for e in decode(bad).errors if e.path.startswith("metadata")] == ["metadata.name"]


def test_namespace_objects_are_labels() -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    assert decode(ns).errors == []
    dotted = {**ns, "metadata": {"name": "team.a"}}
    assert [e.path for e in decode(dotted).errors] == ["metadata.name"]
    assert "DNS-1123 label" in decode(dotted).errors[0].message


def test_local_queue_name_and_namespace() -> None:
    lq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "a/b", "namespace": "UPPER"},
        "spec": {"clusterQueue": "cq"},
    }
    assert [e.path for e in decode(lq).errors] == ["metadata.name", "metadata.namespace"]


def job(name: str, manual_selector: bool | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": []}}}
    if manual_selector is not None:
        spec["manualSelector"] = manual_selector
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": spec,
    }


def test_job_names_are_label_values_unless_the_selector_is_manual() -> None:
    assert errors(job("a" * 63)) == []
    [error] = errors(job("a" * 64))
    assert error.startswith("metadata.name: ")
    assert "at most 63 characters" in error and "batch.kubernetes.io/job-name" in error
    assert errors(job("a" * 64, manual_selector=False)) == [error]
    assert errors(job("a" * 64, manual_selector=True)) == []
    # Still a subdomain, selector or not.
    assert [e.split(":")[0] for e in errors(job("a_b", manual_selector=True))] == ["metadata.name"]


def test_config_map_carrying_the_configuration_has_its_own_name_checked() -> None:
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kueue/config", "namespace": "kueue-system"},
        "data": {"config.yaml": "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"},
    }
    decoded = decode(config_map)
    assert [e.path for e in decoded.errors] == ["metadata.name"]
    assert decoded.obj is None


def test_a_configuration_file_needs_no_name() -> None:
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
    assert decode(config).errors == []
