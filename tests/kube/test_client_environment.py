"""What the environment does to the connection to an API server (``agents/kube/client.py``).

- A ``.netrc`` never enters a call: with an entry that matches every host
  (``default``), calls with the kubeconfig's bearer token still work. Through
  kubernetes_asyncio's own session, aiohttp would add the entry's Basic
  credentials to every call and refuse to send them beside the token.
- The proxy variables are honoured as kubectl honours them: ``HTTPS_PROXY``
  carries the calls to an ``https://`` server unless ``NO_PROXY`` names its host.
"""

from __future__ import annotations

import socket
from pathlib import Path

import aiohttp
import pytest

from kueuestream.agents.kube.client import RetryPolicy, connect, env_proxy
from kueuestream.agents.kube.rest import KubeObjects, Resource

NAMESPACES = Resource("", "v1", "namespaces", "Namespace")
ONCE = RetryPolicy(max_attempts=1)


def test_env_proxy_follows_the_scheme_and_no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert env_proxy("https://10.0.0.1:6443") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://plain.example:3128")
    assert env_proxy("https://10.0.0.1:6443") == "http://proxy.example:3128"
    assert env_proxy("http://10.0.0.1:8080") == "http://plain.example:3128"
    monkeypatch.setenv("NO_PROXY", "10.0.0.1,.cluster.local")
    assert env_proxy("https://10.0.0.1:6443") is None
    assert env_proxy("https://api.cluster.local:6443") is None
    assert env_proxy("https://10.0.0.2:6443") == "http://proxy.example:3128"


@pytest.mark.kube
async def test_a_netrc_entry_for_every_host_does_not_break_calls(
    kube_config: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("default login someone password secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    async with await connect(kube_config) as conn:
        found = await KubeObjects(conn.api, ONCE).get(NAMESPACES, "", "kube-system")
    assert found["metadata"]["name"] == "kube-system"


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.kube
async def test_calls_go_through_the_proxy_the_environment_names(
    kube_config: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("https_proxy", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    # A proxy nobody listens on: a call that goes through it cannot connect.
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{_unused_port()}")
    async with await connect(kube_config) as conn:
        with pytest.raises(aiohttp.ClientConnectionError):
            await KubeObjects(conn.api, ONCE).get(NAMESPACES, "", "kube-system")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    async with await connect(kube_config) as conn:
        found = await KubeObjects(conn.api, ONCE).get(NAMESPACES, "", "kube-system")
    assert found["metadata"]["name"] == "kube-system"
