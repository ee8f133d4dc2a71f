from __future__ import annotations

from typing import Any

import pydantic
import pytest

from kueuestream.admission.events import Action, Decision, Event, EventType, ObjectRef
from kueuestream.streams.codec import decode, encode
from kueuestream.streams.schemas import (
    MAX_RAW_CHARS,
    AdmissionRecord,
    AppliedRecord,
    ApplyOutcome,
    Cause,
    DecisionRecord,
    ErrorRecord,
    ErrorSource,
    SourceRef,
    WatchEvent,
    WatchEventType,
)

T0 = 1_700_000_000_000


def workload(cpu: Any = "1") -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w1", "namespace": "team-a"},
        "spec": {
            "queueName": "lq",
            "podSets": [{"name": "main", "count": 2, "template": {"requests": {"cpu": cpu}}}],
        },
    }


def test_watch_event_round_trip_and_float_normalization() -> None:
    event = WatchEvent(
        cluster="prod",
        kind="Workload",
        apiVersion="kueue.x-k8s.io/v1beta2",
        namespace="team-a",
        name="w1",
        type=WatchEventType.ADDED,
        resourceVersion="42",
        object=workload(cpu=0.5),
        timestamp=T0,
    )
    assert event.object is not None
    assert event.object["spec"]["podSets"][0]["template"]["requests"]["cpu"] == "0.5"
    data = encode(event)
    assert b'"apiVersion":"kueue.x-k8s.io/v1beta2"' in data
    assert b'"resourceVersion":"42"' in data
    assert decode(data, WatchEvent) == event


def test_watch_event_needs_object_unless_deleted() -> None:
    common: dict[str, Any] = {
        "cluster": "c",
        "kind": "ResourceFlavor",
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "name": "f",
        "timestamp": 0,
    }
    deleted = WatchEvent(type=WatchEventType.DELETED, object=None, **common)
    assert deleted.namespace == "" and deleted.resourceVersion == ""
    assert decode(encode(deleted), WatchEvent) == deleted
    with pytest.raises(pydantic.ValidationError, match="object is required for a MODIFIED event"):
        WatchEvent(type=WatchEventType.MODIFIED, object=None, **common)


def test_admission_record_event_round_trip() -> None:
    event = Event(EventType.UPSERT, T0, ObjectRef("Workload", "team-a", "w1"), workload(cpu=1.5))
    record = AdmissionRecord.from_event("cohort:root", event, SourceRef(cluster="prod", resourceVersion="7"))
    assert record.kind == "Workload" and record.namespace == "team-a" and record.name == "w1"
    decoded = decode(encode(record), AdmissionRecord)
    assert decoded == record
    back = decoded.to_event()
    assert back.type is EventType.UPSERT
    assert back.time_ms == T0
    assert back.ref == ObjectRef("Workload", "team-a", "w1")
    assert back.manifest == workload(cpu="1.5")


def test_admission_tick_has_no_object() -> None:
    tick = AdmissionRecord.from_event("cq:solo", Event(EventType.TICK, T0))
    assert tick.ref is None
    assert decode(encode(tick), AdmissionRecord).to_event() == Event(EventType.TICK, T0)
    with pytest.raises(pydantic.ValidationError, match="a Tick concerns no object"):
        AdmissionRecord(shard="s", time_ms=0, type=EventType.TICK, kind="Workload", name="w")


@pytest.mark.parametrize("event_type", [EventType.DELETE, EventType.STOPPED, EventType.FINISHED])
def test_object_events_need_a_ref(event_type: EventType) -> None:
    with pytest.raises(pydantic.ValidationError, match="needs kind and name"):
        AdmissionRecord(shard="s", time_ms=0, type=event_type)
    record = AdmissionRecord(shard="s", time_ms=0, type=event_type, kind="Workload", namespace="n", name="w")
    assert record.to_event() == Event(event_type, 0, ObjectRef("Workload", "n", "w"))


def test_upsert_needs_the_object() -> None:
    with pytest.raises(pydantic.ValidationError, match="an Upsert event needs the object"):
        AdmissionRecord(shard="s", time_ms=0, type=EventType.UPSERT, kind="Workload", name="w")


def test_equal_decisions_encode_to_equal_bytes() -> None:
    status_a = {
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"}],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 2}]},
    }
    # Same content, every dict built in another order.
    status_b = {
        "admission": {"podSetAssignments": [{"count": 2, "name": "main"}], "clusterQueue": "cq"},
        "conditions": [{"reason": "QuotaReserved", "status": "True", "type": "QuotaReserved"}],
    }
    ref = ObjectRef("Workload", "team-a", "w1")
    cause = Cause(shard="cohort:root", offset=17)
    a = DecisionRecord.from_decision(Decision(ref, Action.ADMITTED, status_a, "ok"), cause, 0)
    b = DecisionRecord.from_decision(Decision(ref, Action.ADMITTED, status_b, "ok"), cause, 0)
    assert encode(a) == encode(b)
    assert encode(a).startswith(b'{"action":"Admitted","cause":{"offset":17,"shard":"cohort:root"},')
    decoded = decode(encode(a), DecisionRecord)
    assert decoded == a
    assert decoded.to_decision() == Decision(ref, Action.ADMITTED, status_a, "ok")


def test_decisions_of_one_input_are_numbered() -> None:
    cause = Cause(shard="cq:solo", offset=0)
    decisions = [
        Decision(ObjectRef("Workload", "n", "victim"), Action.EVICTED),
        Decision(ObjectRef("Workload", "n", "victim"), Action.REQUEUED),
        Decision(ObjectRef("ClusterQueue", "", "cq"), Action.STATUS, {"pendingWorkloads": 1}),
    ]
    records = DecisionRecord.from_decisions(decisions, cause)
    assert [r.index for r in records] == [0, 1, 2]
    assert [r.to_decision() for r in records] == decisions


def test_applied_record_round_trip() -> None:
    decision = DecisionRecord.from_decision(
        Decision(ObjectRef("Workload", "n", "w"), Action.PENDING, {"conditions": []}),
        Cause(shard="cohort:a", offset=5),
        2,
    )
    applied = AppliedRecord.for_decision(decision, ApplyOutcome.CONFLICT, "resourceVersion changed")
    assert applied.cause == decision.cause and applied.index == 2 and applied.ref == decision.ref
    data = encode(applied)
    assert b'"outcome":"Conflict"' in data
    assert decode(data, AppliedRecord) == applied


def test_error_record_truncates_and_escapes() -> None:
    raw = b"\xff\xfe" + b"x" * (MAX_RAW_CHARS * 2)
    error = ErrorRecord.from_bad_input(
        raw, ValueError("not JSON"), ErrorSource(topic="kueue.watch", partition=0, offset=9)
    )
    assert error.raw.startswith("\\xff\\xfex")
    assert len(error.raw) == MAX_RAW_CHARS
    assert error.truncated and error.raw_size == len(raw)
    assert error.error == "ValueError: not JSON"
    assert str(error.source) == "kueue.watch[0]@9"
    assert decode(encode(error), ErrorRecord) == error


def test_error_record_from_a_file() -> None:
    error = ErrorRecord.from_bad_input(
        "kind: [", "YAML: unexpected end", ErrorSource(file="q.yaml", document=2)
    )
    assert not error.truncated and error.raw == "kind: [" and error.raw_size == 7
    assert str(error.source) == "q.yaml#2"
    with pytest.raises(pydantic.ValidationError, match="needs topic, partition and offset, or a file"):
        ErrorSource(topic="kueue.watch")


def test_records_are_frozen_and_strict() -> None:
    cause = Cause(shard="s", offset=1)
    with pytest.raises(pydantic.ValidationError):
        cause.offset = 2  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError):
        Cause(shard="s", offset=-1)
    with pytest.raises(pydantic.ValidationError):
        Cause(shard="s", offset="1")
