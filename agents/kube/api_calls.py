"""JSON reads and watch streams over a kubernetes_asyncio ``ApiClient``, for any resource.

The generated typed APIs turn every object into a model and back, which costs
more than the rest of the watcher together at thousands of objects; these
calls go through the same client (its TLS, authentication and connection pool)
and hand back the JSON the server sent, parsed once with orjson.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, TypedDict, Unpack

import aiohttp
import orjson
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

Query = Sequence[tuple[str, str]]

GONE = 410


class WatchExpired(Exception):
    """The watch's resourceVersion is older than the server keeps (410 Gone): relist."""


async def _open(
    api: k8s.ApiClient,
    method: str,
    path: str,
    query: Query,
    timeout: aiohttp.ClientTimeout,
    *,
    body: Any = None,
    content_type: str = "application/json",
) -> Any:
    resp = await api.call_api(
        path,
        method,
        query_params=list(query),
        header_params={"Accept": "application/json", "Content-Type": content_type},
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=timeout,
    )
    if not 200 <= resp.status <= 299:
        # Without preloading, the client hands back error responses as they are.
        try:
            data = await resp.read()
        finally:
            resp.release()
        exc = ApiException(status=resp.status, reason=f"{resp.reason} for {method} {path}")
        exc.body = data.decode("utf-8", errors="replace")
        exc.headers = resp.headers
        raise exc
    return resp


def explain(exc: ApiException) -> str:
    """One line for the user: the status, the request and the server's own message."""
    message = ""
    try:
        status = orjson.loads(exc.body or b"")
        if isinstance(status, dict):
            message = str(status.get("message") or "")
    except orjson.JSONDecodeError:
        message = str(exc.body or "")[:500]
    return f"the API server answered {exc.status} {exc.reason}" + (f": {message}" if message else "")


class RequestOptions(TypedDict, total=False):
    """:func:`request_bytes`'s keyword arguments, for the calls that hand them on."""

    body: Any
    content_type: str
    timeout_s: float


async def request_json(
    api: k8s.ApiClient, method: str, path: str, query: Query = (), **options: Unpack[RequestOptions]
) -> Any:
    """The parsed answer to one request; an ``ApiException`` for any non-2xx answer."""
    return orjson.loads(await request_bytes(api, method, path, query, **options))


async def request_bytes(
    api: k8s.ApiClient,
    method: str,
    path: str,
    query: Query = (),
    *,
    body: Any = None,
    content_type: str = "application/json",
    timeout_s: float = 60.0,
) -> bytes:
    """The body of the answer to one request, as sent; an ``ApiException`` for any non-2xx answer."""
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    resp = await _open(api, method, path, query, timeout, body=body, content_type=content_type)
    try:
        return bytes(await resp.read())
    finally:
        resp.release()


async def get_json(api: k8s.ApiClient, path: str, query: Query = (), *, timeout_s: float = 60.0) -> Any:
    """The parsed body of ``GET path?query``; an ``ApiException`` for any non-2xx answer."""
    return await request_json(api, "GET", path, query, timeout_s=timeout_s)


async def apply_object(
    api: k8s.ApiClient, path: str, body: dict[str, Any], *, field_manager: str, timeout_s: float = 60.0
) -> Any:
    """Server-side apply of ``body`` to the object at ``path``, taking over conflicting fields."""
    query = [("fieldManager", field_manager), ("force", "true")]
    content_type = "application/apply-patch+yaml"
    return await request_json(
        api, "PATCH", path, query, body=body, content_type=content_type, timeout_s=timeout_s
    )


async def watch_lines(
    api: k8s.ApiClient, path: str, query: Query, *, server_timeout_s: int
) -> AsyncIterator[dict[str, Any]]:
    """The events of one watch request, until the server ends it.

    An ``ERROR`` event is raised: :class:`WatchExpired` for 410, else an
    ``ApiException`` with the Status's code, so that callers treat it like the
    same answer to a plain request.
    """
    params = [*query, ("watch", "1"), ("allowWatchBookmarks", "true")]
    params.append(("timeoutSeconds", str(server_timeout_s)))
    # The server ends the watch after timeoutSeconds; a read that waits well past
    # that means the connection died without a FIN.
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=15, sock_read=server_timeout_s + 30)
    resp = await _open(api, "GET", path, params, timeout)
    try:
        while True:
            line = await resp.content.readline()
            if not line:
                return
            if not line.strip():
                continue
            event = orjson.loads(line)
            if not isinstance(event, dict):
                raise ValueError(f"watch {path}: expected an event object, got {line[:200]!r}")
            if event.get("type") == "ERROR":
                status = event.get("object") or {}
                code = int(status.get("code") or 500)
                reason = f"{status.get('reason', '')}: {status.get('message', '')}"
                if code == GONE:
                    raise WatchExpired(reason)
                raise ApiException(status=code, reason=reason)
            yield event
    finally:
        resp.release()
