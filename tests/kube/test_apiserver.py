"""The test API server is a real Kubernetes API server that kubernetes_asyncio can use.

- the kubeconfig from ``kube_config`` loads as it is, and the admin context
  lists the namespaces the apiserver bootstraps itself;
- a namespace created through the API reads back with what was written and
  what the server adds (uid, resourceVersion, phase), and a label selector
  finds exactly it;
- RBAC is on: the ``kueuestream-controller`` context authenticates but may do
  nothing until a test grants it something.

The server comes from the session fixture ``kube_config`` (tests/conftest.py).
Names are unique per test, so the tests do not depend on the server's earlier life.
"""

from __future__ import annotations

import json
import uuid

import pytest
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

pytestmark = pytest.mark.kube

# Per-request bound: a hang fails fast, a slow machine still passes.
TIMEOUT = 30


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def api_client(kube_config: str, context: str | None = None) -> client.ApiClient:
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=kube_config, context=context, client_configuration=configuration
    )
    return client.ApiClient(configuration=configuration)


async def test_namespaces_list_create_and_read_back(kube_config: str) -> None:
    name = unique("smoke")
    async with await api_client(kube_config) as api:
        core = client.CoreV1Api(api)

        listed = await core.list_namespace(_request_timeout=TIMEOUT)
        names = {ns.metadata.name for ns in listed.items}
        assert {"default", "kube-system", "kube-public"} <= names
        assert name not in names

        body = client.V1Namespace(
            metadata=client.V1ObjectMeta(name=name, labels={"kueuestream.test/smoke": name})
        )
        created = await core.create_namespace(body, _request_timeout=TIMEOUT)
        assert created.metadata.name == name
        assert created.metadata.uid

        read = await core.read_namespace(name, _request_timeout=TIMEOUT)
        assert read.metadata.uid == created.metadata.uid
        assert read.metadata.labels["kueuestream.test/smoke"] == name
        # Set by the server itself, not by us: this is a real apiserver.
        assert read.metadata.labels["kubernetes.io/metadata.name"] == name
        assert int(read.metadata.resource_version) > 0
        assert read.status.phase == "Active"

        selected = await core.list_namespace(
            label_selector=f"kueuestream.test/smoke={name}", _request_timeout=TIMEOUT
        )
        assert [ns.metadata.name for ns in selected.items] == [name]

        with pytest.raises(ApiException) as conflict:
            await core.create_namespace(body, _request_timeout=TIMEOUT)
        assert conflict.value.status == 409


async def test_controller_context_has_no_rights_until_granted(kube_config: str) -> None:
    async with await api_client(kube_config, context="kueuestream-controller") as api:
        core = client.CoreV1Api(api)
        with pytest.raises(ApiException) as denied:
            await core.list_namespace(_request_timeout=TIMEOUT)
    # 403, not 401: the token is valid, RBAC says no.
    assert denied.value.status == 403
    assert denied.value.body is not None
    status = json.loads(denied.value.body)
    assert status["reason"] == "Forbidden"
    assert 'User "kueuestream-controller" cannot list resource "namespaces"' in status["message"]
