"""Three API servers at once from ``scripts/kube.sh`` (``KUBE_INSTANCE=NAME``).

- the manager and the two workers are separate clusters: each has its own
  address, and a namespace created in one does not exist in the others;
- ``stop-apiserver`` makes one cluster unreachable while the others answer,
  and ``restart-apiserver`` brings it back on the same address with its data.
"""

from __future__ import annotations

import uuid

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from kueuestream.agents.kube.client import RetryPolicy, connect
from kueuestream.agents.kube.rest import KubeObjects, Resource
from tests.conftest import MultiKueueServers

pytestmark = pytest.mark.kube

NAMESPACES = Resource("", "v1", "namespaces", "Namespace")
ONCE = RetryPolicy(max_attempts=1)


async def _namespace_exists(kubeconfig: str, name: str) -> bool:
    async with await connect(kubeconfig) as conn:
        try:
            await KubeObjects(conn.api).get(NAMESPACES, "", name)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True


async def test_three_separate_clusters(multikueue_servers: MultiKueueServers) -> None:
    servers = multikueue_servers
    all_three = (servers.manager, servers.worker1, servers.worker2)
    addresses = set()
    for instance in all_three:
        async with await connect(instance.kubeconfig) as conn:
            addresses.add(conn.server)
    assert len(addresses) == 3

    name = f"only-in-worker1-{uuid.uuid4().hex[:8]}"
    async with await connect(servers.worker1.kubeconfig) as conn:
        await KubeObjects(conn.api).create(NAMESPACES, "", {"metadata": {"name": name}})
    assert await _namespace_exists(str(servers.worker1.kubeconfig), name)
    assert not await _namespace_exists(str(servers.manager.kubeconfig), name)
    assert not await _namespace_exists(str(servers.worker2.kubeconfig), name)


async def test_stopped_apiserver_is_unreachable_then_back_with_its_data(
    multikueue_servers: MultiKueueServers,
) -> None:
    worker = multikueue_servers.worker2
    name = f"kept-{uuid.uuid4().hex[:8]}"
    async with await connect(worker.kubeconfig) as conn:
        server = conn.server
        await KubeObjects(conn.api).create(NAMESPACES, "", {"metadata": {"name": name}})
    worker.stop_apiserver()
    try:
        async with await connect(worker.kubeconfig) as conn:
            with pytest.raises(aiohttp.ClientConnectionError):
                await KubeObjects(conn.api, ONCE).get(NAMESPACES, "", name)
        # The others are untouched.
        assert not await _namespace_exists(str(multikueue_servers.worker1.kubeconfig), name)
    finally:
        worker.start_apiserver()
    async with await connect(worker.kubeconfig) as conn:
        assert conn.server == server
    assert await _namespace_exists(str(worker.kubeconfig), name)
