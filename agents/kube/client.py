"""A connection to one Kubernetes API server, and retries for the calls made over it.

The connection comes from a kubeconfig file and one of its contexts, loaded
into a kubernetes_asyncio ``ApiClient`` without ever writing the file back
(token refreshes stay in memory), or, in a pod, from its service account
(``--in-cluster``: the mounted token, which the loader reads again as the
kubelet rotates it, and the ``KUBERNETES_SERVICE_*`` variables).

A call is retried when the failure is the server's or the network's, not the
caller's: 429 Too Many Requests (after the server's ``Retry-After`` when it
sends one, as an API server does while its storage initialises), any 5xx, a
lost or refused connection and a timeout. Everything else (403, 404, 409,
410, 422, ...) is an answer the caller must act on, so it is raised at once.
"""

from __future__ import annotations

import asyncio
import os
import random
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException

T = TypeVar("T")

TOO_MANY_REQUESTS = 429
# A lost, refused or reset connection, a response cut short, or no answer in time.
_NETWORK_FAILURES = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, ConnectionError, TimeoutError)


class KubeConfigError(ValueError):
    """The kubeconfig cannot be used: missing file, unknown context, or an unusable entry."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter between ``initial_s`` and ``max_s``.

    ``max_attempts`` counts calls, the first one included; ``None`` retries for
    as long as the failures are transient (a watcher waiting out an API server
    restart).
    """

    initial_s: float = 0.2
    max_s: float = 10.0
    max_attempts: int | None = 8

    def backoff_s(self, attempt: int) -> float:
        """The pause after failed call number ``attempt`` (1-based), without a Retry-After."""
        ceiling = min(self.max_s, self.initial_s * 2 ** (attempt - 1))
        # Jitter spreads the retries of many clients that failed together.
        return random.uniform(ceiling / 2, ceiling)


DEFAULT_RETRY = RetryPolicy()
RETRY_FOREVER = RetryPolicy(max_attempts=None)


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure that the same call may not meet again."""
    if isinstance(exc, ApiException):
        status = exc.status or 0
        return status == TOO_MANY_REQUESTS or status >= 500
    return isinstance(exc, _NETWORK_FAILURES)


def retry_after_s(exc: BaseException) -> float | None:
    """The pause the server asked for in a ``Retry-After`` header (seconds form), if any."""
    if not isinstance(exc, ApiException) or not exc.headers:
        return None
    value = exc.headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # the HTTP-date form; API servers send seconds
    return max(0.0, seconds)


def pause_s(exc: BaseException, attempt: int, policy: RetryPolicy) -> float:
    """How long to wait after failed call number ``attempt``: the server's word if it gave one."""
    asked = retry_after_s(exc)
    if asked is not None:
        return min(asked, policy.max_s)
    return policy.backoff_s(attempt)


async def with_retry(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy = DEFAULT_RETRY,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """The result of ``call()``, calling it again after each transient failure.

    The last failure is raised once ``policy.max_attempts`` calls have failed,
    and any other failure is raised at once.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return await call()
        except Exception as exc:
            if not is_transient(exc) or (policy.max_attempts is not None and attempt >= policy.max_attempts):
                raise
            await sleep(pause_s(exc, attempt, policy))


@dataclass(frozen=True, slots=True)
class KubeConnection:
    """An open client for one API server, and where its settings came from."""

    api: k8s.ApiClient
    context: str
    cluster: str  # the kubeconfig's name for the cluster the context points at
    server: str

    async def close(self) -> None:
        await self.api.close()

    async def __aenter__(self) -> KubeConnection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def _context_entry(kubeconfig: Path, context: str | None) -> tuple[str, dict[str, Any]]:
    try:
        contexts, current = k8s_config.list_kube_config_contexts(str(kubeconfig))
    except FileNotFoundError as exc:
        raise KubeConfigError(f"kubeconfig {kubeconfig}: no such file") from exc
    except Exception as exc:  # the loader raises plain exceptions for malformed files
        raise KubeConfigError(f"kubeconfig {kubeconfig}: cannot be read: {exc}") from exc
    names = sorted(str(c.get("name")) for c in contexts if isinstance(c, dict))
    wanted = context if context is not None else (current or {}).get("name")
    if wanted is None:
        raise KubeConfigError(
            f"kubeconfig {kubeconfig}: current-context is not set; pass a context, one of: {', '.join(names)}"
        )
    for entry in contexts:
        if isinstance(entry, dict) and entry.get("name") == wanted:
            return str(wanted), entry
    known = ", ".join(names) or "(none)"
    raise KubeConfigError(f"kubeconfig {kubeconfig}: context {wanted!r} not found; expected one of: {known}")


# What kubernetes_asyncio gives its session: watch events of large objects exceed aiohttp's default.
READ_BUFSIZE = 2**21


def api_client(configuration: k8s.Configuration) -> k8s.ApiClient:
    """A kubernetes_asyncio client for ``configuration`` whose calls never consult ``~/.netrc``.

    kubernetes_asyncio opens its aiohttp session with ``trust_env=True`` for the
    proxy variables, and with it aiohttp looks up ``.netrc`` credentials before
    every call (in a thread of the loop's executor, so a thread hop per call).
    A ``.netrc`` entry for the server, or a ``default`` one, then breaks every
    call: aiohttp refuses Basic credentials beside our bearer token. The
    session is replaced by one on the same connector that does not read the
    environment, and the proxy the environment names for the server
    (``HTTPS_PROXY``/``HTTP_PROXY``, unless ``NO_PROXY`` excludes the host) is
    set on the client, which passes it with every call.
    """
    api = k8s.ApiClient(configuration=configuration)
    rest = api.rest_client
    given: aiohttp.ClientSession = rest.pool_manager
    rest.pool_manager = aiohttp.ClientSession(
        connector=given.connector, trust_env=False, read_bufsize=READ_BUFSIZE
    )
    given.detach()  # the connector now belongs to the new session alone
    proxy = None if rest.proxy else env_proxy(str(configuration.host))
    if proxy:
        rest.proxy = proxy
    return api


def env_proxy(server: str) -> str | None:
    """The proxy the environment names for ``server``'s scheme, unless ``NO_PROXY`` excludes its host."""
    url = urllib.parse.urlsplit(server)
    if not url.hostname or urllib.request.proxy_bypass(url.hostname):
        return None
    return urllib.request.getproxies().get(url.scheme)


IN_CLUSTER = "in-cluster"  # the cluster name and context of a connection from a pod
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


async def connect(kubeconfig: str | Path | None, context: str | None = None) -> KubeConnection:
    """A client for the API server that ``context`` (default: the current context) points at.

    Without a kubeconfig, the pod's own service account (:func:`connect_in_cluster`).
    """
    if kubeconfig is None:
        return connect_in_cluster()
    path = Path(kubeconfig)
    name, entry = _context_entry(path, context)
    configuration = k8s.Configuration()
    try:
        await k8s_config.load_kube_config(
            config_file=str(path), context=name, client_configuration=configuration, persist_config=False
        )
    except Exception as exc:
        raise KubeConfigError(f"kubeconfig {path}: context {name!r} cannot be used: {exc}") from exc
    cluster = (entry.get("context") or {}).get("cluster") or name
    api = api_client(configuration)
    return KubeConnection(api=api, context=name, cluster=str(cluster), server=str(configuration.host))


def connect_in_cluster(
    account_dir: Path = SERVICE_ACCOUNT_DIR, environ: Mapping[str, str] | None = None
) -> KubeConnection:
    """A client with the service account Kubernetes mounts into a pod."""
    configuration = k8s.Configuration()
    loader = k8s_config.incluster_config.InClusterConfigLoader(
        token_filename=str(account_dir / "token"),
        cert_filename=str(account_dir / "ca.crt"),
        environ=dict(os.environ if environ is None else environ),
    )
    try:
        loader.load_and_set(configuration)
    except k8s_config.ConfigException as exc:
        raise KubeConfigError(
            f"--in-cluster: {exc} (in a pod, Kubernetes sets KUBERNETES_SERVICE_HOST and "
            f"KUBERNETES_SERVICE_PORT and mounts the service account in {account_dir}; "
            "elsewhere, give --kubeconfig)"
        ) from exc
    api = api_client(configuration)
    return KubeConnection(api=api, context=IN_CLUSTER, cluster=IN_CLUSTER, server=str(configuration.host))
