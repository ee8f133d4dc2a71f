"""Serving the dashboard: of a log (``kueuestream dashboard``), or beside a command's metrics."""

from __future__ import annotations

import asyncio
import sys

from prometheus_client import CollectorRegistry

from kueuestream.agents.audit.explain import explain_json
from kueuestream.agents.dashboard.feed import DashboardFeed
from kueuestream.agents.dashboard.follower import LogFollower
from kueuestream.agents.dashboard.live import LiveDashboard
from kueuestream.agents.dashboard.routes import PREFIX, dashboard_route
from kueuestream.agents.embedded.stop_signals import StopRequest
from kueuestream.agents.metrics.http_endpoint import MetricsEndpoint
from kueuestream.agents.metrics.visibility import serve_visibility
from kueuestream.streams.kafka_settings import KafkaSettings
from kueuestream.streams.kafka_urls import redact_text
from kueuestream.streams.log import LogError


def attach(endpoint: MetricsEndpoint, feed: DashboardFeed) -> None:
    """Serve ``feed`` at ``/dashboard`` on ``endpoint``."""
    endpoint.route(PREFIX, dashboard_route(feed))


def worker_dashboard(endpoint: MetricsEndpoint, kafka: KafkaSettings, prefix: str) -> LiveDashboard:
    """The dashboard of a worker's shards on its endpoint; a Workload's timeline is read from Kafka."""
    spec = f"kafka://{kafka.brokers[0]}"

    def explain(namespace: str, name: str) -> dict[str, object]:
        return explain_json(spec, namespace, name, prefix=prefix, kafka=kafka)

    feed = DashboardFeed(f"the shards this worker holds, of {redact_text(spec)}", explain)
    attach(endpoint, feed)
    return LiveDashboard(feed)


def run_dashboard(endpoint: MetricsEndpoint, log_dir: str) -> LiveDashboard:
    """The dashboard of ``run --kubeconfig``'s engines on its endpoint; timelines read from ``log_dir``."""

    def explain(namespace: str, name: str) -> dict[str, object]:
        return explain_json(log_dir, namespace, name)

    feed = DashboardFeed(f"run, log in {log_dir}", explain)
    attach(endpoint, feed)
    return LiveDashboard(feed)


def serve_log(
    spec: str, address: str, port: int, *, prefix: str = "", kafka: KafkaSettings | None = None
) -> int:
    """Follow the log ``spec`` and serve its dashboard until SIGTERM or SIGINT; 0, or 2 with one
    ``error:`` line when the port cannot be used or the log cannot be read the first time.

    Later failures to read it (a broker gone, damage appended) are shown on the page, and the
    log is tried again at every poll.
    """

    def explain(namespace: str, name: str) -> dict[str, object]:
        return explain_json(spec, namespace, name, prefix=prefix, kafka=kafka)

    feed = DashboardFeed(redact_text(spec), explain)
    follower = LogFollower(spec, feed, prefix=prefix, kafka=kafka)
    try:
        endpoint = MetricsEndpoint(CollectorRegistry(), lambda: follower.read_once, host=address, port=port)
    except OSError as exc:
        print(f"error: --port {port}: cannot listen on {address}: {exc.strerror}", file=sys.stderr)
        return 2
    try:
        asyncio.run(follower.poll())
    except (LogError, OSError, ValueError) as exc:
        message = kafka.redact(str(exc)) if kafka is not None else redact_text(str(exc))
        print(f"error: {message}", file=sys.stderr)
        endpoint.server.server_close()
        return 2
    attach(endpoint, feed)
    # The visibility API's pending lists, from the same engines.
    where = f" in {redact_text(spec)}"
    serve_visibility(endpoint, lambda answer: follower.read(lambda engines: answer(engines, where)))
    with StopRequest() as stop:
        follower.start()
        endpoint.start()
        print(f"dashboard on http://{address}:{endpoint.port}{PREFIX}", flush=True)
        while not stop.requested:
            stop.wait(1.0)
        feed.close()
        endpoint.stop()
        follower.stop()
    return 0
