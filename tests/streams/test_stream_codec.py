from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kueuestream.admission.events import EventType
from kueuestream.agents.log_entries import AdmissionEntry, Origin
from kueuestream.streams.codec import (
    DecodeError,
    EncodeError,
    contains_float,
    decode,
    encode,
    encode_json,
    normalize_manifest,
    reread,
)
from kueuestream.streams.schemas import (
    FLOAT_FREE,
    Cause,
    DecisionRecord,
    Ref,
    SourceRef,
    WatchEvent,
    WatchEventType,
)


def test_normalize_manifest_turns_floats_into_shortest_text() -> None:
    manifest = {
        "spec": {
            "resourceGroups": [
                {"flavors": [{"resources": [{"name": "cpu", "nominalQuota": 0.5}, {"n": 1e21}]}]}
            ],
            "weight": 0.1,
            "count": 3,
            "enabled": True,
            "nothing": None,
            "tuple": (1.25, "x"),
        }
    }
    out = normalize_manifest(manifest)
    spec = out["spec"]
    assert spec["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "0.5"
    assert spec["resourceGroups"][0]["flavors"][0]["resources"][1]["n"] == "1e+21"
    assert spec["weight"] == "0.1"
    assert spec["count"] == 3 and spec["enabled"] is True and spec["nothing"] is None
    assert spec["tuple"] == ["1.25", "x"]
    # The input is left alone.
    assert manifest["spec"]["weight"] == 0.1


def test_float_is_refused_with_its_path() -> None:
    record = DecisionRecord(
        ref=Ref(kind="Workload", namespace="ns", name="w"),
        action="Admitted",
        status={"admission": {"podSetAssignments": [{"count": 1, "share": 0.25}]}},
        cause=Cause(shard="cohort:a", offset=3),
        index=0,
    )
    with pytest.raises(EncodeError) as info:
        encode(record)
    message = str(info.value)
    assert "DecisionRecord" in message
    assert "status.admission.podSetAssignments[0].share" in message
    assert "normalize_manifest" in message


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -0.0])
def test_special_floats_are_refused_too(value: float) -> None:
    record = DecisionRecord(
        ref=Ref(kind="ClusterQueue", name="cq"),
        action="Status",
        status={"fairSharing": {"weightedShare": value}},
        cause=Cause(shard="cq:cq", offset=0),
        index=0,
    )
    with pytest.raises(EncodeError, match=r"float at status\.fairSharing\.weightedShare"):
        encode(record)


def test_non_string_key_is_an_encode_error() -> None:
    with pytest.raises(EncodeError, match="cannot encode value"):
        encode_json({1: "a"})


def test_encoding_sorts_keys_whatever_the_insertion_order() -> None:
    assert encode_json({"b": 1, "a": {"d": 2, "c": 3}}) == b'{"a":{"c":3,"d":2},"b":1}'
    assert encode_json({"a": {"c": 3, "d": 2}, "b": 1}) == encode_json({"b": 1, "a": {"d": 2, "c": 3}})


def test_malformed_json_names_line_and_column() -> None:
    with pytest.raises(DecodeError) as info:
        decode(b'{"cluster": "c",\n "kind": }', WatchEvent)
    message = str(info.value)
    assert message.startswith("cannot decode WatchEvent: malformed JSON at line 2 column")


def test_non_object_json_is_refused() -> None:
    with pytest.raises(DecodeError, match="expected a JSON object, got list"):
        decode(b"[1, 2]", WatchEvent)
    with pytest.raises(DecodeError, match="expected a JSON object, got null"):
        decode(b"null", WatchEvent)


def test_missing_and_wrong_fields_are_each_named() -> None:
    raw = b'{"cluster": "c", "kind": "Workload", "apiVersion": "kueue.x-k8s.io/v1beta2", "type": "ADDED",'
    raw += b' "object": {}, "timestamp": "12", "color": "red"}'
    with pytest.raises(DecodeError) as info:
        decode(raw, WatchEvent)
    error = info.value
    problems = dict(error.problems)
    assert problems["name"] == "Field required"
    assert problems["timestamp"].startswith("Input should be a valid integer")
    assert "'12'" in problems["timestamp"]
    assert problems["color"] == "Extra inputs are not permitted"
    assert "name: Field required" in str(error)


def test_bad_enum_value_is_explained() -> None:
    raw = (
        b'{"cluster": "c", "kind": "Workload", "apiVersion": "v1", "name": "w",'
        b' "type": "UPDATED", "object": {}, "timestamp": 1}'
    )
    with pytest.raises(DecodeError, match=r"type: Input should be 'ADDED', 'MODIFIED' or 'DELETED'"):
        decode(raw, WatchEvent)


def test_float_timestamp_is_refused() -> None:
    raw = (
        b'{"cluster": "c", "kind": "Workload", "apiVersion": "v1", "name": "w",'
        b' "type": "ADDED", "object": {}, "timestamp": 1.0}'
    )
    with pytest.raises(DecodeError, match="timestamp"):
        decode(raw, WatchEvent)


# JSON-like values as YAML gives them: floats, tuples and keys in any order included.
_leaves = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8)
_values = st.recursive(
    _leaves | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(obj=st.dictionaries(st.text(max_size=6), _values, max_size=6))
def test_reread_gives_what_decoding_the_bytes_gives(obj: dict[str, Any]) -> None:
    """A record read back in the process that wrote it equals its decoded bytes, key order included."""
    event = WatchEvent(
        cluster="local",
        kind="Workload",
        apiVersion="v1",
        name="w",
        type=WatchEventType.ADDED,
        object=obj,
        timestamp=1,
    )
    entry = AdmissionEntry(
        shard="cq:a",
        time_ms=1,
        type=EventType.UPSERT,
        kind="Workload",
        name="w",
        object=obj,
        source=SourceRef(cluster="local"),
        origin=Origin(stream="watch", offset=3, index=1),
    )
    for model in (event, entry):
        raw = encode(model)
        again, decoded = reread(model, raw), decode(raw, type(model))
        assert again == decoded
        # Dict order is what a consumer iterates: it must be the decoded one, not the writer's.
        assert orjson.dumps(again.model_dump()) == orjson.dumps(decoded.model_dump())
        assert encode(again) == raw


@settings(max_examples=200, deadline=None)
@given(obj=st.dictionaries(st.text(max_size=6), _values, max_size=6))
def test_a_record_writes_its_validated_object_as_a_full_dump_would(obj: dict[str, Any]) -> None:
    """``encode`` writes a normalized field without copying or searching it again: the bytes are
    those of the whole record dumped and checked, and no float survives."""
    event = WatchEvent(
        cluster="local",
        kind="Workload",
        apiVersion="v1",
        name="w",
        type=WatchEventType.ADDED,
        object=obj,
        timestamp=1,
    )
    entry = AdmissionEntry.model_validate(
        {
            "shard": "cq:a",
            "time_ms": 1,
            "type": EventType.UPSERT,
            "kind": "Workload",
            "name": "w",
            "object": event.object,
            "origin": Origin(stream="watch", offset=3, index=1),
        },
        context=FLOAT_FREE,
    )
    for model in (event, entry):
        raw = encode(model)
        assert raw == encode_json(model.model_dump(mode="python", by_alias=True))
        assert not contains_float(orjson.loads(raw))


def test_an_object_said_float_free_is_taken_as_it_is_and_any_other_is_normalized() -> None:
    """Without the ``FLOAT_FREE`` context a float becomes its text, as for any input; the context
    is the caller's word that the object was validated before, so it is not searched again."""
    fields: dict[str, Any] = {
        "shard": "cq:a",
        "time_ms": 1,
        "type": EventType.UPSERT,
        "kind": "Workload",
        "name": "w",
        "object": {"spec": {"cpu": 0.5}},
        "origin": Origin(stream="watch", offset=0, index=0),
    }
    assert AdmissionEntry.model_validate(fields).object == {"spec": {"cpu": "0.5"}}
    assert AdmissionEntry.model_validate(fields, context=FLOAT_FREE).object == {"spec": {"cpu": 0.5}}


def test_an_int_beyond_64_bits_in_an_object_is_an_encode_error_naming_the_record() -> None:
    event = WatchEvent(
        cluster="local",
        kind="Workload",
        apiVersion="v1",
        name="w",
        type=WatchEventType.ADDED,
        object={"spec": {"n": 2**70}},
        timestamp=1,
    )
    with pytest.raises(EncodeError, match="cannot encode WatchEvent"):
        encode(event)
