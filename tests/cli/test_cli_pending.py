"""`kueuestream pending`: a queue's pending Workloads as Kueue's visibility API lists them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueuestream.agents.cli.main import main
from tests.helpers import (
    cluster_queue_manifest,
    created_at,
    flavor_manifest,
    local_queue_manifest,
    workload_manifest,
)


def _queue(strategy: str) -> dict[str, Any]:
    return cluster_queue_manifest(
        "research", [(["cpu"], [("default", {"cpu": 2})])], spec={"queueingStrategy": strategy}
    )


def _workloads() -> list[dict[str, Any]]:
    """``running`` holds the whole quota; the rest wait (name, namespace, queue, priority, age)."""
    shapes = [
        ("running", "alpha", "main", 100, 0, "2"),
        ("old-low", "alpha", "main", 0, 1, "1"),
        ("new-high", "beta", "batch", 5, 9, "1"),
        ("old-high", "alpha", "side", 5, 2, "1"),
        ("too-big", "beta", "batch", 0, 3, "4"),
        ("tie-b", "beta", "batch", 0, 5, "1"),
        ("tie-a", "beta", "batch", 0, 5, "1"),
    ]
    return [
        workload_manifest(name, queue, {"cpu": cpu}, namespace=ns, priority=prio, created=created_at(age))
        for name, ns, queue, prio, age, cpu in shapes
    ]


def _log(tmp_path: Path, strategy: str = "BestEffortFIFO") -> str:
    source = tmp_path / "manifests"
    source.mkdir()
    docs = [
        flavor_manifest("default"),
        _queue(strategy),
        local_queue_manifest("main", "research", "alpha"),
        local_queue_manifest("side", "research", "alpha"),
        local_queue_manifest("batch", "research", "beta"),
    ]
    (source / "cluster.yaml").write_text(yaml.safe_dump_all(docs))
    (source / "workloads.yaml").write_text(yaml.safe_dump_all(_workloads()))
    log = tmp_path / "log"
    assert main(["run", "--source", str(source), "--log-dir", str(log), "--once"]) == 0
    return str(log)


def _pending(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["pending", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _names(summary: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in summary["items"]]


@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
def test_a_cluster_queue_lists_priority_then_age_then_name_with_both_positions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], strategy: str
) -> None:
    """Kueue's ``pendingWorkloadsInCqREST.Get`` over ``ClusterQueue.Snapshot`` sorted by
    ``baseCompareFunc``: priority, then queue-order time; inadmissible Workloads (``too-big``) included."""
    log = _log(tmp_path, strategy)
    code, out, err = _pending(capsys, log, "--cluster-queue", "research", "-o", "json")
    assert (code, err) == (0, "")
    summary = json.loads(out)
    assert (summary["kind"], summary["apiVersion"]) == (
        "PendingWorkloadsSummary",
        "visibility.kueue.x-k8s.io/v1beta2",
    )
    assert _names(summary) == ["old-high", "new-high", "old-low", "too-big", "tie-a", "tie-b"]
    rows = [
        (
            i["metadata"]["namespace"],
            i["localQueueName"],
            i["priority"],
            i["positionInClusterQueue"],
            i["positionInLocalQueue"],
        )
        for i in summary["items"]
    ]
    assert rows == [
        ("alpha", "side", 5, 0, 0),
        ("beta", "batch", 5, 1, 0),
        ("alpha", "main", 0, 2, 0),
        ("beta", "batch", 0, 3, 1),
        ("beta", "batch", 0, 4, 2),
        ("beta", "batch", 0, 5, 3),
    ]
    first = summary["items"][0]
    assert first["metadata"]["creationTimestamp"] == created_at(2)
    if strategy == "BestEffortFIFO":
        too_big = summary["items"][3]
        assert too_big["reason"] == "ExceedsMaxQuota"
        assert too_big["message"].endswith("current podset request (4) > maximum capacity (2)")


def test_limit_and_offset_page_through_the_queue_and_a_local_queue_counts_its_own_positions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``boundedLimitOffset`` and the LocalQueue variant ``pendingWorkloadsInLqREST.Get``."""
    log = _log(tmp_path)
    code, out, _ = _pending(
        capsys, log, "--cluster-queue", "research", "--limit", "2", "--offset", "2", "-o", "json"
    )
    page = json.loads(out)["items"]
    assert code == 0
    assert [
        (i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in page
    ] == [
        ("old-low", 2, 0),
        ("too-big", 3, 1),
    ]
    code, out, _ = _pending(capsys, log, "--local-queue", "beta/batch", "--offset", "1", "-o", "json")
    page = json.loads(out)["items"]
    assert [
        (i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in page
    ] == [
        ("too-big", 3, 1),
        ("tie-a", 4, 2),
        ("tie-b", 5, 3),
    ]


def test_the_table_shows_each_position_and_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _log(tmp_path)
    code, out, _ = _pending(capsys, log, "--local-queue", "alpha/side")
    assert code == 0
    header, row = out.splitlines()
    assert header.split()[:4] == ["POSITION", "NAMESPACE", "NAME", "LOCALQUEUE"]
    assert row.split()[:7] == ["0", "alpha", "old-high", "side", "0", "5", "WaitingForQuota"]


def test_an_unknown_queue_exits_2_naming_the_closest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(tmp_path)
    code, out, err = _pending(capsys, log, "--cluster-queue", "reserch")
    assert (code, out) == (2, "")
    assert err.startswith("error: ClusterQueue reserch not found; closest: research")
    assert err.count("\n") == 1
    code, _, err = _pending(capsys, log, "--local-queue", "beta/bach")
    assert code == 2
    assert "LocalQueue beta/bach not found; closest: beta/batch" in err
    for malformed in ("batch", "beta/", "/batch", "beta/batch/x"):
        code, out, err = _pending(capsys, log, "--local-queue", malformed)
        assert (code, out) == (2, "")
        assert err == f"error: --local-queue {malformed}: expected NAMESPACE/NAME, for example team-a/main\n"


def test_a_missing_log_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _pending(capsys, str(tmp_path / "nowhere"), "--cluster-queue", "research")
    assert code == 2
    assert err.startswith(f"error: no embedded log at {tmp_path / 'nowhere'}")


@pytest.mark.parametrize("topic", ["kueue.decisions", "kueue.admission"])
def test_a_damaged_log_is_an_error_not_a_wrong_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], topic: str
) -> None:
    """A decision lost to damage could leave an admitted Workload listed as waiting."""
    log = _log(tmp_path)
    segment = sorted((Path(log) / topic).rglob("*.log"), key=lambda p: p.stat().st_size)[-1]
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF
    segment.write_bytes(bytes(data))
    code, out, err = _pending(capsys, log, "--cluster-queue", "research")
    assert (code, out) == (2, "")
    assert err.startswith("error: the log lost records, so the pending list could be wrong: ")
    assert topic in err


@pytest.mark.parametrize("why", ["a missing flavor", "stopPolicy Hold"])
def test_an_inactive_cluster_queue_still_lists_its_workloads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], why: str
) -> None:
    """Kueue's ``Manager.AddOrUpdateWorkload`` queues a Workload whatever its ClusterQueue's state, so
    ``PendingWorkloadsInfo`` lists the Workloads of an inactive one, in the queue's order."""
    flavor = "absent" if why == "a missing flavor" else "default"
    spec = {"stopPolicy": "Hold"} if why == "stopPolicy Hold" else {}
    source = tmp_path / "manifests"
    source.mkdir()
    docs = [
        flavor_manifest("default"),
        cluster_queue_manifest("idle", [(["cpu"], [(flavor, {"cpu": 4})])], spec=spec),
        local_queue_manifest("main", "idle", "alpha"),
        workload_manifest(
            "first", "main", {"cpu": "1"}, namespace="alpha", priority=0, created=created_at(1)
        ),
        workload_manifest(
            "urgent", "main", {"cpu": "1"}, namespace="alpha", priority=7, created=created_at(2)
        ),
    ]
    (source / "all.yaml").write_text(yaml.safe_dump_all(docs))
    log = tmp_path / "log"
    assert main(["run", "--source", str(source), "--log-dir", str(log), "--once"]) == 0
    code, out, _ = _pending(capsys, str(log), "--cluster-queue", "idle", "-o", "json")
    assert code == 0
    items = json.loads(out)["items"]
    assert [(i["metadata"]["name"], i["positionInClusterQueue"]) for i in items] == [
        ("urgent", 0),
        ("first", 1),
    ]
    assert items[0]["message"] == "ClusterQueue idle is inactive"
