"""MultiKueue's API objects and the Configuration's multiKueue, read as the API server reads them."""

from __future__ import annotations

from typing import Any

import pytest

from kueuestream.admission.api.config import Configuration
from kueuestream.admission.api.multikueue import MultiKueueCluster, MultiKueueConfig, parse_duration_ms
from kueuestream.admission.decode import decode
from kueuestream.admission.multikueue import names


def _config(clusters: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueConfig",
        "metadata": {"name": "fleet"},
        "spec": {"clusters": clusters},
    }


def _cluster(source: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueCluster",
        "metadata": {"name": "worker1"},
        "spec": {"clusterSource": source},
    }


def _errors(manifest: dict[str, Any]) -> list[str]:
    return [str(e) for e in decode(manifest).errors]


def test_multikueue_config_keeps_the_clusters_in_order() -> None:
    """MultiKueueConfigSpec.Clusters: ordered, the incremental dispatcher nominates in that order."""
    decoded = decode(_config(["b", "a", "c"]))
    assert not decoded.errors
    assert isinstance(decoded.obj, MultiKueueConfig)
    assert decoded.obj.spec.clusters == ["b", "a", "c"]


@pytest.mark.parametrize(
    ("clusters", "expected"),
    [
        ([], "spec.clusters: must name at least one MultiKueueCluster"),
        ([f"w{i}" for i in range(21)], "spec.clusters: must name at most 20 MultiKueueClusters, got 21"),
        (["a", "b", "a"], "spec.clusters[2]: must be unique: 'a' is already spec.clusters[0]"),
        (["a", ""], "spec.clusters[1]: must not be empty"),
        (["x" * 257], "spec.clusters[0]: must be at most 256 characters, got 257"),
    ],
)
def test_multikueue_config_clusters_are_checked(clusters: list[str], expected: str) -> None:
    """The CRD's rules on MultiKueueConfigSpec.Clusters: 1-20 items, unique, at most 256 characters."""
    assert _errors(_config(clusters)) == [expected]


def test_multikueue_config_without_clusters_names_the_field() -> None:
    manifest = _config([])
    del manifest["spec"]["clusters"]
    assert _errors(manifest) == ["spec.clusters: required field is missing"]


def test_multikueue_cluster_secret_is_the_default_location_type() -> None:
    """KubeConfig.LocationType defaults to Secret."""
    decoded = decode(_cluster({"kubeConfig": {"location": "worker1-secret"}}))
    assert isinstance(decoded.obj, MultiKueueCluster)
    kube_config = decoded.obj.spec.cluster_source.kube_config
    assert kube_config is not None
    assert (kube_config.location_type, kube_config.location) == ("Secret", "worker1-secret")
    path = decode(_cluster({"kubeConfig": {"location": "/etc/w1.yaml", "locationType": "Path"}}))
    assert isinstance(path.obj, MultiKueueCluster)
    assert path.obj.spec.cluster_source.kube_config is not None
    assert path.obj.spec.cluster_source.kube_config.location_type == "Path"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            {"kubeConfig": {"location": "x", "locationType": "File"}},
            "spec.clusterSource.kubeConfig.locationType: unsupported value 'File'; accepted values: "
            "'Secret' or 'Path'",
        ),
        ({"kubeConfig": {"location": ""}}, "spec.clusterSource.kubeConfig.location: must not be empty"),
        ({}, "spec.clusterSource.kubeConfig: required field is missing"),
        (
            {"clusterProfileRef": {"name": "p"}},
            "spec.clusterSource.clusterProfileRef: is not supported: Kueuestream connects to worker "
            "clusters through a kubeConfig (locationType Secret or Path)",
        ),
    ],
)
def test_multikueue_cluster_source_is_checked(source: dict[str, Any], expected: str) -> None:
    assert _errors(_cluster(source)) == [expected]


def test_configuration_multikueue_defaults_are_upstreams() -> None:
    """apis/config/v1beta2 defaults.go: gcInterval 1m, origin multikueue, workerLostTimeout 15m,
    the all-at-once dispatcher."""
    decoded = decode({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"})
    assert isinstance(decoded.obj, Configuration)
    settings = decoded.obj.multikueue
    assert settings.gc_interval == 60_000
    assert settings.origin == "multikueue"
    assert settings.worker_lost_timeout == 15 * 60_000
    assert settings.dispatcher_name == names.DISPATCHER_ALL_AT_ONCE
    assert not settings.incremental


def test_configuration_multikueue_is_read() -> None:
    decoded = decode(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "multiKueue": {
                "gcInterval": "30s",
                "origin": "east",
                "workerLostTimeout": "1m30s",
                "dispatcherName": names.DISPATCHER_INCREMENTAL,
                "incrementalDispatcherConfig": {"stepSize": 1},
            },
        }
    )
    assert not decoded.errors
    assert isinstance(decoded.obj, Configuration)
    settings = decoded.obj.multikueue
    assert (settings.gc_interval, settings.origin, settings.worker_lost_timeout) == (30_000, "east", 90_000)
    assert settings.incremental and settings.step_size == 1


@pytest.mark.parametrize(
    ("multikueue", "expected"),
    [
        (
            {"workerLostTimeout": "-1m"},
            "multiKueue.workerLostTimeout: must not be negative, got '-1m'",
        ),
        (
            {"gcInterval": "soon"},
            "multiKueue.gcInterval: invalid duration 'soon'; write it like 30s, 1m, 15m0s or 1h30m",
        ),
        (
            {"gcInterval": 60},
            "multiKueue.gcInterval: expected a duration such as 30s, 1m or 15m0s, got int 60",
        ),
        (
            {"origin": "not a label"},
            "multiKueue.origin: 'not a label' is not a valid label value: 1-63 characters, alphanumerics, "
            "'-', '_' or '.', starting and ending with an alphanumeric",
        ),
        (
            {"dispatcherName": "mine"},
            "multiKueue.dispatcherName: unsupported dispatcher 'mine'; accepted: "
            "kueue.x-k8s.io/multikueue-dispatcher-all-at-once, "
            "kueue.x-k8s.io/multikueue-dispatcher-incremental",
        ),
        (
            {"incrementalDispatcherConfig": {"stepSize": 2}},
            "multiKueue.incrementalDispatcherConfig: may only be set when dispatcherName is "
            "kueue.x-k8s.io/multikueue-dispatcher-incremental",
        ),
        (
            {"dispatcherName": names.DISPATCHER_INCREMENTAL, "incrementalDispatcherConfig": {"stepSize": 0}},
            "multiKueue.incrementalDispatcherConfig.stepSize: must be at least 1, got 0",
        ),
    ],
)
def test_configuration_multikueue_errors_name_the_field(multikueue: dict[str, Any], expected: str) -> None:
    """pkg/config/validation.go validateMultiKueue: durations not negative, origin a label value."""
    manifest = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "multiKueue": multikueue,
    }
    assert _errors(manifest) == [expected]


@pytest.mark.parametrize(
    ("text", "ms"),
    [("0", 0), ("1m", 60_000), ("15m0s", 900_000), ("1h30m", 5_400_000), ("1.5s", 1500), ("250ms", 250)],
)
def test_durations_are_read_like_metav1_duration(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


def test_worker_cluster_names() -> None:
    assert names.worker_cluster("w1") == "multikueue:w1"
    assert names.worker_name("multikueue:w1") == "w1"
    assert names.worker_name("multikueue:") is None
    assert names.worker_name("manager") is None
