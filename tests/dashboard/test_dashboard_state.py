"""The dashboard's state and paths, from a recorded log: the numbers the tables print, kept live."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import io
import os
import re
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from kueuestream.agents.audit.explain import explain_json
from kueuestream.agents.audit.pending import pending_json
from kueuestream.agents.cli.main import main
from kueuestream.agents.dashboard.feed import DashboardFeed
from kueuestream.agents.dashboard.follower import LogFollower
from kueuestream.agents.dashboard.serve import attach
from kueuestream.agents.metrics.http_endpoint import MetricsEndpoint
from kueuestream.streams.schemas import DecisionRecord
from tests.dashboard.scenario import FOLDERS, append, new_workload, record
from tests.helpers import http_get


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def follow(directory: Path) -> tuple[DashboardFeed, LogFollower]:
    feed = DashboardFeed(str(directory))
    follower = LogFollower(str(directory), feed)
    asyncio.run(follower.poll())
    return feed, follower


def state(feed: DashboardFeed) -> dict[str, Any]:
    parsed: dict[str, Any] = orjson.loads(feed.current()[1])
    return parsed


def table_usage() -> dict[str, tuple[str, str]]:
    """Per ClusterQueue, ``get clusterqueues -o wide``'s pending count and usage column."""
    code, out, err = cli("get", "clusterqueues", "-o", "wide", *map(str, FOLDERS))
    assert code == 0, err
    header, *rows = out.splitlines()
    usage_at, pending_at = header.index("USAGE"), header.index("PENDING WORKLOADS")
    return {
        row.split()[0]: (row[pending_at:].split()[0], row[usage_at:].strip()) for row in rows if row.strip()
    }


def drs_shares() -> dict[str, str]:
    """Per ClusterQueue and Cohort with a parent, ``kueuestream drs``'s weighted share."""
    code, out, err = cli("drs", *map(str, FOLDERS))
    assert code == 0, err
    return dict(
        re.findall(r"^## (?:ClusterQueue|Cohort) (\S+).*\n\n(?:.*\n)*?Weighted share: (\S+)", out, re.M)
    )


def shown_usage(cq: dict[str, Any]) -> str:
    """The page's usage lines of a ClusterQueue, joined the way the wide table joins them."""
    by_flavor: dict[str, list[str]] = {}
    for r in cq["resources"]:
        by_flavor.setdefault(r["flavor"], []).append(f"{r['resource']}={r['used']}/{r['nominal']}")
    return "; ".join(f"{flavor}: {' '.join(parts)}" for flavor, parts in by_flavor.items())


def test_the_state_shows_the_numbers_the_tables_print(tmp_path: Path) -> None:
    log, _, _ = record(tmp_path / "log")
    with log:
        feed, _ = follow(tmp_path / "log")
    shown = state(feed)
    tables = table_usage()
    assert {cq["name"] for cq in shown["clusterQueues"]} == set(tables)
    for cq in shown["clusterQueues"]:
        pending, usage = tables[cq["name"]]
        assert (str(cq["pendingWorkloads"]), shown_usage(cq)) == (pending, usage), cq["name"]
    shares = drs_shares()
    assert shares["example-a-team"] == "0.444" and shares["team-b"] == "0.100"
    for cq in shown["clusterQueues"]:
        assert cq["weightedShare"] == shares[cq["name"]], cq["name"]
    # The Cohort tree: every ClusterQueue under its cohort.
    tree = {root["name"]: [c["name"] for c in root["children"]] for root in shown["roots"]}
    assert tree["research"] == ["team-a", "team-b"]
    assert tree["example-a"] == ["example-a-lender", "example-a-team"]
    # Pending lists in the order the scheduler takes them, with Kueue's reason and the numbers.
    team_a = next(cq for cq in shown["clusterQueues"] if cq["name"] == "team-a")
    assert [
        (w["metadata"]["name"], w["positionInClusterQueue"], w["positionInLocalQueue"], w["reason"])
        for w in team_a["pending"]
    ] == [("train-llm", 0, 0, "WaitingForQuota"), ("sweep", 1, 1, "WaitingForQuota")]
    assert (
        "insufficient unused quota for cpu in flavor on-demand, 8 more needed"
        in team_a["pending"][0]["message"]
    )
    # The same items `kueuestream pending` lists.
    for cq in shown["clusterQueues"]:
        assert cq["pending"] == pending_json(str(tmp_path / "log"), cluster_queue=cq["name"])["items"]
    assert shown["error"] == ""


def test_a_workload_admitted_after_the_start_shows_without_a_restart(tmp_path: Path) -> None:
    log, pipeline, stream = record(tmp_path / "log")
    with log:
        feed, follower = follow(tmp_path / "log")
        before = state(feed)
        asyncio.run(follower.poll())
        assert state(feed)["version"] == before["version"], "nothing new was read: no new state"
        append(pipeline, stream, new_workload("late", "example-a", "lender", {"cpu": "10"}))
        asyncio.run(follower.poll())
    after = state(feed)
    assert after["version"] > before["version"]
    lender = next(cq for cq in after["clusterQueues"] if cq["name"] == "example-a-lender")
    assert lender["resources"][0]["used"] == "30"  # 20 before, and 10 more
    assert after["recent"][0] | {"timeMs": 0} == {
        "timeMs": 0,
        "kind": "admitted",
        "namespace": "example-a",
        "name": "late",
        "clusterQueue": "example-a-lender",
        "reason": "",
    }
    assert after["totals"]["admitted"] == before["totals"]["admitted"] + 1


def test_a_damaged_log_is_shown_as_an_error_and_the_state_read_before_stays(tmp_path: Path) -> None:
    log, pipeline, stream = record(tmp_path / "log")
    with log:
        feed, follower = follow(tmp_path / "log")
        append(pipeline, stream, new_workload("late", "example-a", "lender", {"cpu": "10"}))
    segment = min((tmp_path / "log" / "kueue.admission").rglob("*.log"), key=lambda p: -p.stat().st_size)
    data = bytearray(segment.read_bytes())
    data[40] ^= 0xFF  # inside the first batch, with others after it
    segment.write_bytes(bytes(data))
    before = state(feed)
    asyncio.run(follower.step())
    after = state(feed)
    assert after["error"].startswith(f"cannot read the log {tmp_path / 'log'}: "), after["error"]
    assert "kueue.admission" in after["error"]
    assert after["clusterQueues"] == before["clusterQueues"]
    assert after["version"] == before["version"] + 1


def test_the_page_its_assets_state_and_events_are_served(tmp_path: Path) -> None:
    log, _, _ = record(tmp_path / "log")
    with log:
        feed, _ = follow(tmp_path / "log")
    endpoint = MetricsEndpoint(CollectorRegistry(), lambda: True, host="127.0.0.1")
    attach(endpoint, feed)
    endpoint.start()
    try:
        status, kind, page = http_get(endpoint.port, "/dashboard")
        assert (status, kind) == (200, "text/html; charset=utf-8")
        # Everything the page loads comes from this server: no CDN.
        assert not re.search(rb"(src|href)=\"(https?:)?//", page)
        for asset, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
            status, got, body = http_get(endpoint.port, f"/dashboard/assets/{asset}")
            assert status == 200 and got.startswith(kind) and body
        assert http_get(endpoint.port, "/dashboard/assets/../routes.py")[0] == 404
        status, kind, body = http_get(endpoint.port, "/dashboard/api/state")
        assert (status, kind) == (200, "application/json")
        assert orjson.loads(body) == state(feed)
        assert http_get(endpoint.port, "/dashboard/nothing")[0] == 404
        conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
        conn.request("GET", "/dashboard/events")
        reply = conn.getresponse()
        assert reply.getheader("Content-Type") == "text/event-stream"
        assert reply.readline() == b"retry: 1000\n"
        assert reply.readline() == b"\n"
        assert reply.readline() == b"event: state\n"
        data = reply.readline()
        assert data.startswith(b"data: ") and orjson.loads(data[6:]) == state(feed)
        conn.close()
    finally:
        feed.close()
        endpoint.stop()


def test_the_command_names_what_is_wrong_with_its_arguments(tmp_path: Path) -> None:
    code, _, err = cli("dashboard", str(tmp_path / "missing"))
    assert code == 2
    assert err == (
        f"error: LOG {tmp_path / 'missing'}: no embedded log folder there "
        "(expected a directory, or kafka://HOST:PORT)\n"
    )
    code, _, err = cli("dashboard", str(tmp_path), "--port", "70000")
    assert (code, err) == (2, "error: --port 70000: a port is 0 to 65535 (0: any free port)\n")


def test_a_workload_page_answers_its_explain_timeline_and_names_the_closest_for_a_typo(
    tmp_path: Path,
) -> None:
    log, _, _ = record(tmp_path / "log")
    log.close_sync()
    spec = str(tmp_path / "log")
    feed = DashboardFeed(spec, lambda ns, name: explain_json(spec, ns, name))
    endpoint = MetricsEndpoint(CollectorRegistry(), lambda: True, host="127.0.0.1")
    attach(endpoint, feed)
    endpoint.start()
    try:
        status, kind, body = http_get(endpoint.port, "/dashboard/api/workloads/team-a/train-llm")
        assert (status, kind) == (200, "application/json")
        assert orjson.loads(body) == explain_json(spec, "team-a", "train-llm")
        status, _, body = http_get(endpoint.port, "/dashboard/api/workloads/team-a/train-lm")
        answer = orjson.loads(body)
        assert status == 404 and "team-a/train-llm" in answer["closest"], answer
        assert answer["error"].startswith("Workload team-a/train-lm: not in the log")
        assert http_get(endpoint.port, "/dashboard/api/workloads/team-a")[0] == 404
    finally:
        feed.close()
        endpoint.stop()


def test_a_slow_state_is_taken_again_only_after_twice_its_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A state that took 0.1 s is not taken again at once; the decisions still count, and the next
    publish once the pause has passed shows them."""
    import kueuestream.agents.dashboard.feed as feed_module

    def slow(engines: object) -> dict[str, Any]:
        time.sleep(0.1)
        return {"nowMs": 0, "roots": [], "clusterQueues": [], "cohorts": []}

    feed = DashboardFeed("test")
    monkeypatch.setattr(feed_module, "snapshot", slow)
    feed.publish((), ())
    version = feed.current()[0]
    admitted = DecisionRecord.model_validate(
        {
            "ref": {"kind": "Workload", "namespace": "ns", "name": "w"},
            "action": "QuotaReserved",
            "status": {
                "admission": {"clusterQueue": "cq"},
                "conditions": [{"type": "QuotaReserved", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            },
            "cause": {"shard": "s", "offset": 0},
            "index": 0,
        }
    )
    feed.publish((), [admitted])
    assert feed.stale and feed.current()[0] == version
    time.sleep(0.3)
    feed.publish((), ())
    assert not feed.stale
    assert state(feed)["totals"]["admitted"] == 1 and feed.current()[0] == version + 1


def test_a_state_that_cannot_be_taken_is_an_error_on_the_page_and_the_last_one_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kueuestream.agents.dashboard.feed as feed_module

    log, _, _ = record(tmp_path / "log")
    with log:
        feed, follower = follow(tmp_path / "log")
    before = state(feed)

    def broken(engines: object) -> dict[str, Any]:
        raise KeyError("team-a")

    monkeypatch.setattr(feed_module, "snapshot", broken)
    feed.publish(follower.engines(), [])
    after = state(feed)
    assert after["error"] == "the dashboard could not take the engines' state: KeyError: 'team-a'"
    assert after["clusterQueues"] == before["clusterQueues"]


def test_a_log_that_cannot_be_read_at_the_start_is_one_error_line(tmp_path: Path) -> None:
    log, _, _ = record(tmp_path / "log")
    log.close_sync()
    segment = max((tmp_path / "log" / "kueue.admission").rglob("*.log"), key=lambda p: p.stat().st_size)
    data = bytearray(segment.read_bytes())
    data[40] ^= 0xFF  # inside the first batch, with others after it
    segment.write_bytes(bytes(data))
    code, out, err = cli("dashboard", str(tmp_path / "log"), "--port", "0")
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {segment} at byte 0: checksum mismatch"), err
    assert err.count("\n") == 1


def test_a_broker_that_is_not_there_is_one_line_without_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("KUEUESTREAM_KAFKA_")]:
        monkeypatch.delenv(name)
    code, out, err = cli(
        "dashboard",
        "kafka://alice:S3cr3t-pw@127.0.0.1:1",
        "--port",
        "0",
        "--kafka-security-protocol",
        "SASL_PLAINTEXT",
        "--kafka-sasl-mechanism",
        "PLAIN",
    )
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "error: cannot use Kafka at 127.0.0.1:1 (SASL_PLAINTEXT, PLAIN as alice): "
        "connection refused (is a broker listening there?)"
    ]
