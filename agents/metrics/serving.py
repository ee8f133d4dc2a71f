"""Starting the operators' endpoint for a command, and what it needs before the command's parts exist."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

from prometheus_client import CollectorRegistry

from kueuestream.agents.metrics.http_endpoint import MetricsEndpoint
from kueuestream.agents.metrics.lag import PipelineLag

Positions = list[tuple[str, int, int, int]]
S = TypeVar("S", bound="Served")


class Served:
    """A command's registry and endpoint, up before the parts it reports on are built.

    ``ready`` and ``positions`` are set once those parts exist; until then
    ``/readyz`` answers 503 and there is no lag to report.
    """

    def __init__(self, port: int) -> None:
        self.registry = CollectorRegistry()
        self.ready: Callable[[], bool] = lambda: False
        self.positions: Callable[[], Positions] = list
        self.registry.register(PipelineLag(lambda: self.positions()))
        self.endpoint = MetricsEndpoint(self.registry, lambda: self.ready(), port=port)


def serve_metrics(
    port: int | None, show: Callable[[str], None], make: Callable[[int], S]
) -> tuple[S | None, bool]:
    """``make(port)`` (None: no port), started and announced; False after an ``error:`` line."""
    if port is None:
        return None, True
    try:
        served = make(port)
    except OSError as exc:
        print(f"error: --metrics-port {port}: cannot listen: {exc.strerror}", file=sys.stderr)
        return None, False
    served.endpoint.start()
    show(f"metrics on port {served.endpoint.port}: /metrics, /healthz, /readyz")
    return served, True
