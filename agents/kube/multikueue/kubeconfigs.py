"""A worker cluster's kubeconfig, as a MultiKueueCluster names it, turned into a client.

``spec.clusterSource.kubeConfig`` names either a Secret in the manager's own
namespace (``locationType: Secret``; the kubeconfig is its key ``kubeconfig``)
or a file the manager process can read (``locationType: Path``). Like
upstream's ``clustersReconciler.loadClientConfig``, a kubeconfig that cannot be
read is ``BadKubeConfig`` and one that cannot be used safely is
``InsecureKubeConfig`` (``validateKubeconfig``: not YAML, a user with a
``tokenFile``, a cluster with ``insecure-skip-tls-verify``, a CA given as a
file path instead of data, or no server). The messages never quote the
kubeconfig: it holds credentials, and they end up in the log and the
MultiKueueCluster's status.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from kueuestream.admission.multikueue import names
from kueuestream.agents.kube.client import KubeConnection, api_client
from kueuestream.agents.kube.rest import NOT_FOUND, KubeObjects, Resource, reason_of, status_of

SECRETS = Resource("", "v1", "secrets", "Secret")
SECRET_KEY = names.KUBECONFIG_SECRET_KEY
SECRET_LOCATION = names.LOCATION_SECRET
PATH_LOCATION = names.LOCATION_PATH

BAD_KUBECONFIG = names.REASON_BAD_KUBECONFIG
INSECURE_KUBECONFIG = "InsecureKubeConfig"
LOAD_FAILED = "load client config failed: "


class KubeconfigProblem(Exception):
    """The kubeconfig cannot be had or used: ``reason`` as upstream names it, and a message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def kubeconfig_ref(cluster: dict[str, Any]) -> tuple[str, str]:
    """``(locationType, location)`` of a MultiKueueCluster manifest; ``locationType`` defaults to Secret."""
    spec = cluster.get("spec") if isinstance(cluster.get("spec"), dict) else {}
    source = spec.get("clusterSource") if isinstance(spec, dict) else None
    ref = source.get("kubeConfig") if isinstance(source, dict) else None
    if not isinstance(ref, dict) or not isinstance(ref.get("location"), str) or not ref["location"]:
        raise KubeconfigProblem(
            BAD_KUBECONFIG, LOAD_FAILED + "spec.clusterSource.kubeConfig.location is not set"
        )
    location_type = ref.get("locationType") or SECRET_LOCATION
    if location_type not in (SECRET_LOCATION, PATH_LOCATION):
        raise KubeconfigProblem(
            BAD_KUBECONFIG,
            LOAD_FAILED + f"spec.clusterSource.kubeConfig.locationType {location_type!r}: "
            "expected Secret or Path",
        )
    return str(location_type), ref["location"]


async def read_kubeconfig(cluster: dict[str, Any], manager: KubeObjects, namespace: str) -> bytes:
    """The kubeconfig's bytes from the Secret (in ``namespace`` of the manager) or the file it names."""
    location_type, location = kubeconfig_ref(cluster)
    if location_type == PATH_LOCATION:
        try:
            return Path(location).read_bytes()
        except OSError as exc:
            raise KubeconfigProblem(
                BAD_KUBECONFIG, LOAD_FAILED + f"open {location}: {exc.strerror or exc}"
            ) from exc
    try:
        secret = await manager.get(SECRETS, namespace, location)
    except Exception as exc:
        if status_of(exc) == NOT_FOUND:
            raise KubeconfigProblem(
                BAD_KUBECONFIG, LOAD_FAILED + f'secrets "{location}" not found in namespace "{namespace}"'
            ) from exc
        raise
    data = secret.get("data") if isinstance(secret.get("data"), dict) else {}
    encoded = data.get(SECRET_KEY) if isinstance(data, dict) else None
    if not isinstance(encoded, str):
        raise KubeconfigProblem(
            BAD_KUBECONFIG, LOAD_FAILED + f'key "{SECRET_KEY}" not found in secret "{location}"'
        )
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise KubeconfigProblem(
            BAD_KUBECONFIG, LOAD_FAILED + f'key "{SECRET_KEY}" of secret "{location}" is not base64'
        ) from exc


def _insecure(message: str) -> KubeconfigProblem:
    return KubeconfigProblem(INSECURE_KUBECONFIG, LOAD_FAILED + message)


def parse_kubeconfig(raw: bytes) -> dict[str, Any]:
    """The kubeconfig as a dict, refused as upstream's ``validateKubeconfig`` refuses one."""
    try:
        parsed = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise _insecure(f"failed to parse kubeconfig: not valid YAML{where}") from None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("clusters"), list):
        raise _insecure("failed to parse kubeconfig: expected a Config with a list of clusters")
    for user in parsed.get("users") or []:
        info = user.get("user") if isinstance(user, dict) else None
        if isinstance(info, dict) and info.get("tokenFile"):
            raise _insecure("tokenFile is not allowed")
    for entry in parsed["clusters"]:
        name = entry.get("name", "") if isinstance(entry, dict) else ""
        cluster = entry.get("cluster") if isinstance(entry, dict) else None
        if not isinstance(cluster, dict):
            raise _insecure(f"cluster {name!r} has no cluster entry")
        if cluster.get("insecure-skip-tls-verify"):
            raise _insecure(f"insecure TLS verification is not allowed for cluster {name}")
        if cluster.get("certificate-authority"):
            raise _insecure(
                "certificate-authority file paths are not allowed, use certificate-authority-data "
                f"for cluster {name}"
            )
        if not cluster.get("server"):
            raise _insecure(f"server URL is required for cluster {name}")
    return parsed


async def connect_kubeconfig(config: dict[str, Any]) -> KubeConnection:
    """A client for the current context of a parsed kubeconfig."""
    configuration = k8s.Configuration()
    try:
        await k8s_config.load_kube_config_from_dict(config, client_configuration=configuration)
    except Exception as exc:  # the loader raises plain exceptions for unusable entries
        # Its messages name fields, never their values.
        raise _insecure(f"kubeconfig cannot be used: {type(exc).__name__}: {exc}") from None
    current = str(config.get("current-context") or "")
    cluster = current
    for entry in config.get("contexts") or []:
        if isinstance(entry, dict) and entry.get("name") == current:
            cluster = str((entry.get("context") or {}).get("cluster") or current)
    api = api_client(configuration)
    return KubeConnection(api=api, context=current, cluster=cluster, server=str(configuration.host))


def describe_failure(exc: BaseException) -> str:
    """A reason a worker's API server could not be reached, for the ClusterConnection event."""
    return reason_of(exc)
