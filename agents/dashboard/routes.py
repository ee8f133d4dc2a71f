"""The dashboard's paths on the operators' HTTP endpoint, all under ``/dashboard``.

- ``/dashboard`` (and ``/dashboard/``): the page; ``/dashboard/assets/NAME``: its
  script and style sheet, read from the package;
- ``/dashboard/api/state``: the current state (:mod:`kueuestream.agents.dashboard.snapshot`);
- ``/dashboard/api/workloads/NAMESPACE/NAME``: the Workload's ``explain`` JSON
  (:func:`kueuestream.agents.audit.explain.explain_json`);
- ``/dashboard/events``: server-sent events, one ``state`` event with the whole
  state each time it changes (the first at once), and a comment line every
  :data:`KEEPALIVE_SECONDS` so proxies keep the connection.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from urllib.parse import unquote

import orjson

from kueuestream.agents.audit.explain import ExplainError, UnknownWorkload
from kueuestream.agents.dashboard.feed import DashboardFeed
from kueuestream.agents.metrics.http_endpoint import Answer, Query, Route, Stream
from kueuestream.streams.kafka_urls import redact_text
from kueuestream.streams.log import LogError

PREFIX = "/dashboard"
KEEPALIVE_SECONDS = 15.0
ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
HTML = "text/html; charset=utf-8"
JSON = "application/json"


def asset(name: str) -> bytes:
    return resources.files("kueuestream.agents.dashboard").joinpath("assets", name).read_bytes()


def _json(code: int, body: object) -> Answer:
    return Answer(code, orjson.dumps(body), JSON)


def events(feed: DashboardFeed) -> Iterator[bytes]:
    version = -1
    yield b"retry: 1000\n\n"
    while not feed.closed:
        got = feed.wait(version, KEEPALIVE_SECONDS)
        if got is None:
            yield b": keepalive\n\n"
            continue
        version, body = got
        yield b"event: state\ndata: " + body + b"\n\n"


def dashboard_route(feed: DashboardFeed) -> Route:
    """The handler of every path under :data:`PREFIX`."""

    def handle(path: str, query: Query) -> Answer | Stream:
        rest = path[len(PREFIX) :].strip("/")
        if rest == "":
            return Answer(200, asset("index.html"), HTML)
        if rest.startswith("assets/") and rest[len("assets/") :] in ASSETS:
            name = rest[len("assets/") :]
            return Answer(200, asset(name), ASSETS[name])
        if rest == "api/state":
            return Answer(200, feed.current()[1], JSON)
        if rest == "events":
            return Stream(events(feed))
        if rest.startswith("api/workloads/"):
            parts = [unquote(p) for p in rest[len("api/workloads/") :].split("/")]
            if len(parts) != 2 or not all(parts):
                return _json(404, {"error": "expected /dashboard/api/workloads/NAMESPACE/NAME"})
            return workload(feed, parts[0], parts[1])
        return Answer(404, b"not found: the dashboard is at /dashboard\n")

    return handle


def workload(feed: DashboardFeed, namespace: str, name: str) -> Answer:
    """The Workload's ``explain`` JSON; 404 naming the closest names for an unknown one, 500 with
    the reason for a log that cannot be read (a damaged log never gives a timeline)."""
    if feed.explain is None:
        return _json(404, {"error": "this process has no log to explain Workloads from"})
    try:
        return _json(200, feed.explain(namespace, name))
    except UnknownWorkload as exc:
        return _json(404, {"error": str(exc), "closest": exc.closest})
    except (ExplainError, LogError, OSError) as exc:
        return _json(500, {"error": redact_text(str(exc))})
