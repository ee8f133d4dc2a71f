"""Kueue's visibility API on the operators' HTTP endpoint: the pending Workloads of a queue.

``GET /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/NAME/pendingworkloads`` and
``GET /apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/NS/localqueues/NAME/pendingworkloads``,
with ``limit`` and ``offset``, answer a ``PendingWorkloadsSummary``
(:mod:`kueuestream.agents.audit.pending`) from the engines the process holds.
Failures are Kubernetes ``Status`` objects, as an API server writes them: 404
for a queue the process does not hold (naming the closest it does), 400 for a
``limit`` or ``offset`` that is not an integer, 503 while the engines cannot
answer yet.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

import orjson

from kueuestream.admission.engine import Engine
from kueuestream.agents.audit.pending import DEFAULT_LIMIT, GROUP, QueueNotFound, pending_summary
from kueuestream.agents.metrics.http_endpoint import Answer, MetricsEndpoint, Query

PREFIX = f"/apis/{GROUP}"
JSON = "application/json"
# How long a request waits for the process to hand over its engines.
READ_TIMEOUT_S = 30.0
PATHS = (
    f"{PREFIX}/v1beta2/clusterqueues/NAME/pendingworkloads, "
    f"{PREFIX}/v1beta2/namespaces/NAMESPACE/localqueues/NAME/pendingworkloads"
)

T = TypeVar("T")


class Unavailable(Exception):
    """The engines cannot answer now (none held yet, or being rebuilt); the message says why."""


Read = Callable[[Callable[[Sequence[Engine], str], Any]], Any]
"""``read(fn)``: ``fn(engines, where)`` with the engines a process holds, kept still meanwhile, and
``where`` saying, after a queue's name, where it was looked for (a worker holds only some shards);
raises :class:`Unavailable` when the engines cannot answer now."""


def on_loop(loop: asyncio.AbstractEventLoop, call: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """The result of the coroutine ``call()``, run on ``loop`` from another thread.

    Engines that change only on their event loop (or under a lock of that
    loop, which ``call`` takes) are still while it runs there.
    """
    try:
        return asyncio.run_coroutine_threadsafe(call(), loop).result(READ_TIMEOUT_S)
    except concurrent.futures.TimeoutError as exc:
        raise Unavailable(f"the pipeline did not hand over its state within {READ_TIMEOUT_S:.0f}s") from exc
    except RuntimeError as exc:  # the loop is closed: the process is stopping
        raise Unavailable(f"the pipeline is stopping: {exc}") from exc


def status(code: int, reason: str, message: str, details: dict[str, str] | None = None) -> Answer:
    """A Kubernetes ``Status`` failure."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return Answer(code, orjson.dumps(body) + b"\n", JSON)


def _integer(query: Query, name: str, default: int) -> int | str:
    values = query.get(name)
    if not values:
        return default
    try:
        return int(values[-1])
    except ValueError:
        return (
            f"{name}={values[-1]!r} is not an integer; give {name} as a whole number, for example {name}=10"
        )


def visibility_handler(read: Read) -> Callable[[str, Query], Answer]:
    """The route answering the visibility API's paths from the engines ``read`` hands over."""

    def handle(path: str, query: Query) -> Answer:
        parts = path[len(PREFIX) :].strip("/").split("/")
        cluster_queue: str | None = None
        local_queue: tuple[str, str] | None = None
        if len(parts) == 4 and parts[:2] == ["v1beta2", "clusterqueues"] and parts[3] == "pendingworkloads":
            cluster_queue = parts[2]
        elif (
            len(parts) == 6
            and parts[:2] == ["v1beta2", "namespaces"]
            and parts[3] == "localqueues"
            and parts[5] == "pendingworkloads"
        ):
            local_queue = (parts[2], parts[4])
        else:
            return status(404, "NotFound", f"no such path {path}; the visibility API answers {PATHS}")
        limit, offset = _integer(query, "limit", DEFAULT_LIMIT), _integer(query, "offset", 0)
        for value in (limit, offset):
            if isinstance(value, str):
                return status(400, "BadRequest", value)
        assert isinstance(limit, int) and isinstance(offset, int)

        def answer(engines: Sequence[Engine], where: str) -> dict[str, Any]:
            return pending_summary(
                engines,
                cluster_queue=cluster_queue,
                local_queue=local_queue,
                limit=limit,
                offset=offset,
                where=where,
            )

        try:
            summary = read(answer)
        except QueueNotFound as exc:
            kind = exc.kind.lower()
            return status(
                404,
                "NotFound",
                f'{kind}.{GROUP} "{exc.name}" not found{exc.where}{exc.hint}',
                {"name": exc.name, "group": GROUP, "kind": kind},
            )
        except Unavailable as exc:
            return status(503, "ServiceUnavailable", f"pending workloads cannot be listed now: {exc}")
        return Answer(200, orjson.dumps(summary) + b"\n", JSON)

    return handle


def serve_visibility(endpoint: MetricsEndpoint, read: Read) -> None:
    """Answer the visibility API's paths on ``endpoint``."""
    endpoint.route(PREFIX, visibility_handler(read))
