"""What shadow mode compares in a Workload status, without a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from kueuestream.admission.events import Action
from kueuestream.agents.kube.shadow import ShadowComparison, differences, verdict_of
from kueuestream.streams.schemas import Cause, DecisionRecord, Ref, WatchEvent, WatchEventType

NOW = "2026-01-01T00:00:00Z"


def status(admitted: bool, flavor: str = "f", reason: str = "Pending") -> dict[str, Any]:
    if not admitted:
        return {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": reason,
                    "message": "m",
                    "lastTransitionTime": NOW,
                }
            ]
        }
    return {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "main", "flavors": {"cpu": flavor, "memory": flavor}, "count": 1}],
        },
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "m",
                "lastTransitionTime": NOW,
            },
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "m",
                "lastTransitionTime": NOW,
            },
        ],
    }


def decision(st_: dict[str, Any], action: Action = Action.ADMITTED, offset: int = 0) -> DecisionRecord:
    return DecisionRecord(
        ref=Ref(kind="Workload", namespace="ns", name="w"),
        action=action,
        status=st_,
        cause=Cause(shard="cq:cq", offset=offset),
        index=0,
    )


def live(st_: dict[str, Any] | None, kind: WatchEventType = WatchEventType.MODIFIED) -> WatchEvent:
    obj = (
        None
        if kind is WatchEventType.DELETED
        else {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns"},
            **({"status": st_} if st_ is not None else {}),
        }
    )
    return WatchEvent(
        cluster="c",
        kind="Workload",
        apiVersion="kueue.x-k8s.io/v1beta2",
        namespace="ns",
        name="w",
        type=kind,
        object=obj,
        timestamp=1,
    )


def test_a_status_without_an_admission_condition_is_not_a_decision() -> None:
    assert verdict_of({}) is None
    assert verdict_of({"conditions": [{"type": "PodsReady", "status": "True"}]}) is None
    assert verdict_of("not a status") is None


def test_only_the_compared_fields_count() -> None:
    """Messages and transition times differ between any two writers; they are not compared."""
    ours = status(True)
    theirs = status(True)
    theirs["conditions"][0]["message"] = "Quota reserved in ClusterQueue cq"
    theirs["conditions"][0]["lastTransitionTime"] = "2030-01-01T00:00:00Z"
    a, b = verdict_of(ours), verdict_of(theirs)
    assert a is not None and b is not None and differences(a, b) == {}
    c = verdict_of(status(False, reason="Pending"))
    d = verdict_of(status(False, reason="Inadmissible"))
    assert c is not None and d is not None and differences(c, d) == {"reason": ("Pending", "Inadmissible")}


@given(st.booleans(), st.booleans(), st.sampled_from(["f", "g"]), st.sampled_from(["f", "g"]))
def test_a_difference_is_reported_exactly_when_a_field_differs(
    ours_admitted: bool, theirs_admitted: bool, ours_flavor: str, theirs_flavor: str
) -> None:
    ours = verdict_of(status(ours_admitted, ours_flavor))
    theirs = verdict_of(status(theirs_admitted, theirs_flavor))
    assert ours is not None and theirs is not None
    found = differences(ours, theirs)
    assert ("admitted" in found) == (ours_admitted != theirs_admitted)
    both = ours_admitted and theirs_admitted
    assert ("flavors" in found) == (
        ours_admitted != theirs_admitted or (both and ours_flavor != theirs_flavor)
    )
    assert found == {} or differences(theirs, ours) == {k: (b, a) for k, (a, b) in found.items()}


def test_rows_and_report_follow_the_changes(tmp_path: Path) -> None:
    lines: list[str] = []
    report = tmp_path / "r.json"
    shadow = ShadowComparison(lines.append, report)
    shadow.decide(decision(status(True, "f")))
    shadow.observe([live(None)])  # created, not decided by the other controller yet
    assert shadow.differing == {} and not report.exists()
    shadow.observe([live(status(True, "g"))])
    assert shadow.differing == {("ns", "w"): {"flavors": ("main: cpu=f,memory=f", "main: cpu=g,memory=g")}}
    assert lines[-1].split() == [
        "differs",
        "ns/w",
        "flavors",
        "main:",
        "cpu=f,memory=f",
        "main:",
        "cpu=g,memory=g",
    ]
    assert orjson.loads(report.read_bytes())["differences"]["flavors"] == 1
    assert shadow.current_counts == {"admitted": 0, "clusterQueue": 0, "flavors": 1, "reason": 0}
    shadow.decide(decision(status(True, "g"), offset=1))
    assert lines[-1].split() == ["agrees", "ns/w"]
    assert orjson.loads(report.read_bytes())["differing"] == 0
    shadow.observe([live(None, WatchEventType.DELETED)])
    assert shadow.compared == set() and orjson.loads(report.read_bytes())["compared"] == 0
