"""Reads and writes of any resource as plain JSON, over a kubernetes_asyncio ``ApiClient``.

The typed APIs of kubernetes_asyncio turn every answer into generated model
objects; the connector works on manifests (dicts), as the log does, so these
calls use the client's generic ``call_api`` with the ``object`` response type
(what its ``CustomObjectsApi`` does) for built-in and custom resources alike.

Writes are JSON merge patches (RFC 7386). A patch that carries
``metadata.resourceVersion`` is refused with 409 Conflict when the object has
changed since that version, which is how every write here avoids overwriting
a change it has not seen. Transient failures (429, 5xx, lost connections) are
retried by :func:`kueuestream.agents.kube.client.with_retry`; any other failure
is raised as the client's ``ApiException``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from kueuestream.agents.kube.client import DEFAULT_RETRY, RetryPolicy, with_retry

# 409 answers both a stale resourceVersion (Conflict) and a create of an existing name (AlreadyExists).
CONFLICT = 409
NOT_FOUND = 404
MERGE_PATCH = "application/merge-patch+json"

Manifest = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource's address: group ("" for the core group), version and plural name."""

    group: str
    version: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str, name: str = "", subresource: str = "") -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        out = f"{root}/namespaces/{namespace}/{self.plural}" if namespace else f"{root}/{self.plural}"
        if name:
            out += f"/{name}"
        if subresource:
            out += f"/{subresource}"
        return out


JOBS = Resource("batch", "v1", "jobs", "Job")
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
CLUSTER_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue")
COHORTS = Resource("kueue.x-k8s.io", "v1beta2", "cohorts", "Cohort")


def status_of(exc: BaseException) -> int:
    """The HTTP status of a failed call, 0 when it never got an answer."""
    return (exc.status or 0) if isinstance(exc, ApiException) else 0


def reason_of(exc: BaseException) -> str:
    """The server's own words for a failed call (the Status message), or the exception."""
    if isinstance(exc, ApiException):
        raw = exc.body
        body = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        if isinstance(body, str) and body:
            try:
                message = orjson.loads(body).get("message")
            except (ValueError, AttributeError):
                message = None
            if isinstance(message, str) and message:
                return message
        return f"{exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


class KubeObjects:
    """Get, create and merge-patch objects of any resource; every call counted in ``writes``/``reads``."""

    def __init__(self, api: k8s.ApiClient, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.api = api
        self.retry = retry
        self.reads = 0
        self.writes = 0
        # Called before every write; raises to forbid it (a replica that lost its Lease).
        self.guard: Callable[[], None] | None = None

    async def _call(self, method: str, path: str, body: Any = None, content_type: str = "") -> Manifest:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type

        async def once() -> Manifest:
            result: Manifest = await self.api.call_api(
                path,
                method,
                header_params=dict(headers),
                body=body,
                response_types_map={200: "object", 201: "object"},
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
            )
            return result

        return await with_retry(once, self.retry)

    async def get(self, resource: Resource, namespace: str, name: str) -> Manifest:
        self.reads += 1
        return await self._call("GET", resource.path(namespace, name))

    def _may_write(self) -> None:
        if self.guard is not None:
            self.guard()
        self.writes += 1

    async def create(self, resource: Resource, namespace: str, body: Manifest) -> Manifest:
        self._may_write()
        return await self._call("POST", resource.path(namespace), body, "application/json")

    async def patch(
        self, resource: Resource, namespace: str, name: str, body: Manifest, subresource: str = ""
    ) -> Manifest:
        self._may_write()
        return await self._call("PATCH", resource.path(namespace, name, subresource), body, MERGE_PATCH)

    async def delete(self, resource: Resource, namespace: str, name: str, propagation: str = "") -> Manifest:
        """Delete an object; ``propagation`` (``Background``, ``Orphan``, ...) decides its dependents."""
        self._may_write()
        body = (
            {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
            if propagation
            else None
        )
        return await self._call(
            "DELETE", resource.path(namespace, name), body, "application/json" if body else ""
        )
