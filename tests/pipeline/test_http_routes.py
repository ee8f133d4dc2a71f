"""The operators' HTTP endpoint answers the routes a command adds, beside its own."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry

from kueuestream.agents.metrics.http_endpoint import Answer, MetricsEndpoint, Query, Stream
from tests.helpers import http_get


def test_added_routes_answer_under_their_prefix_and_the_longest_prefix_wins() -> None:
    seen: list[tuple[str, Query]] = []

    def pages(path: str, query: Query) -> Answer:
        seen.append((path, query))
        return Answer(200, b"page " + path.encode(), "text/html; charset=utf-8")

    def api(path: str, query: Query) -> Answer:
        return Answer(404, b"no such queue\n")

    endpoint = MetricsEndpoint(CollectorRegistry(), lambda: True, host="127.0.0.1").start()
    try:
        endpoint.route("/dashboard", pages)
        endpoint.route("/dashboard/api", api)
        assert http_get(endpoint.port, "/dashboard/q?limit=5&offset=1") == (
            200,
            "text/html; charset=utf-8",
            b"page /dashboard/q",
        )
        assert seen == [("/dashboard/q", {"limit": ["5"], "offset": ["1"]})]
        assert http_get(endpoint.port, "/dashboard/api/x")[0] == 404
        assert http_get(endpoint.port, "/dashboardx")[0] == 404
        assert http_get(endpoint.port, "/healthz")[2] == b"ok\n"
    finally:
        endpoint.stop()


def test_a_streamed_route_sends_every_chunk_and_is_closed_when_done() -> None:
    closed: list[bool] = []

    def events() -> Iterator[bytes]:
        try:
            yield b"data: one\n\n"
            yield b"data: two\n\n"
        finally:
            closed.append(True)

    endpoint = MetricsEndpoint(CollectorRegistry(), lambda: True, host="127.0.0.1").start()
    try:
        endpoint.route("/events", lambda path, query: Stream(events()))
        status, content_type, body = http_get(endpoint.port, "/events")
        assert (status, content_type) == (200, "text/event-stream")
        assert body == b"data: one\n\ndata: two\n\n"
        assert closed == [True]
    finally:
        endpoint.stop()
