"""The operators' HTTP endpoint: ``/metrics`` (Prometheus text format), ``/healthz`` and ``/readyz``.

It runs in a thread of its own, so a scrape is answered while the pipeline
is busy; ``/healthz`` answers 200 for as long as the process serves at all,
``/readyz`` 200 once ``ready()`` is true and 503 before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


class MetricsEndpoint:
    def __init__(
        self, registry: CollectorRegistry, ready: Callable[[], bool], host: str = "0.0.0.0", port: int = 0
    ) -> None:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._answer(200, generate_latest(registry), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    self._answer(200, b"ok\n")
                elif path == "/readyz":
                    if endpoint.ready():
                        self._answer(200, b"ready\n")
                    else:
                        self._answer(503, b"not ready: the first full list is not processed yet\n")
                else:
                    self._answer(404, b"not found: try /metrics, /healthz or /readyz\n")

            def _answer(
                self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8"
            ) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # scrapes every few seconds would drown the command's own output

        self.ready = ready
        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, name="metrics", daemon=True)

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
