"""The operators' HTTP endpoint: ``/metrics`` (Prometheus text format), ``/healthz``, ``/readyz``,
and whatever routes a command adds (:meth:`MetricsEndpoint.route`).

It runs in a thread of its own, so a scrape is answered while the pipeline
is busy; ``/healthz`` answers 200 for as long as the process serves at all,
``/readyz`` 200 once ``ready()`` is true and 503 before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Answer:
    """A whole response."""

    code: int
    body: bytes
    content_type: str = TEXT


@dataclass(frozen=True)
class Stream:
    """A response written chunk by chunk until ``chunks`` ends or the client goes away
    (server-sent events, for one)."""

    chunks: Iterator[bytes]
    content_type: str = "text/event-stream"


Query = dict[str, list[str]]
Route = Callable[[str, Query], Answer | Stream]
"""A handler of every path under its prefix: ``(path, query) -> response``."""


class MetricsEndpoint:
    def __init__(
        self, registry: CollectorRegistry, ready: Callable[[], bool], host: str = "0.0.0.0", port: int = 0
    ) -> None:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                self._respond(endpoint.answer(url.path, parse_qs(url.query)))

            def _respond(self, response: Answer | Stream) -> None:
                self.send_response(response.code if isinstance(response, Answer) else 200)
                self.send_header("Content-Type", response.content_type)
                if isinstance(response, Answer):
                    self.send_header("Content-Length", str(len(response.body)))
                    self.end_headers()
                    self.wfile.write(response.body)
                    return
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                try:
                    for chunk in response.chunks:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client went away: the stream simply ends
                finally:
                    close = getattr(response.chunks, "close", None)
                    if close is not None:
                        close()

            def log_message(self, format: str, *args: object) -> None:
                return  # scrapes every few seconds would drown the command's own output

        self.ready = ready
        self.registry = registry
        self._routes: list[tuple[str, Route]] = []
        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, name="metrics", daemon=True)

    def route(self, prefix: str, handler: Route) -> None:
        """Answer every path equal to ``prefix`` or under ``prefix/`` with ``handler``."""
        self._routes.append((prefix.rstrip("/"), handler))

    def answer(self, path: str, query: Query) -> Answer | Stream:
        if path == "/metrics":
            return Answer(200, generate_latest(self.registry), CONTENT_TYPE_LATEST)
        if path == "/healthz":
            return Answer(200, b"ok\n")
        if path == "/readyz":
            if self.ready():
                return Answer(200, b"ready\n")
            return Answer(503, b"not ready: the first full list is not processed yet\n")
        # The longest prefix wins, so a route under another's prefix can be added after it.
        for prefix, handler in sorted(self._routes, key=lambda r: len(r[0]), reverse=True):
            if path == prefix or path.startswith(prefix + "/") or prefix == "":
                return handler(path, query)
        return Answer(404, b"not found: try /metrics, /healthz or /readyz\n")

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> MetricsEndpoint:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()
