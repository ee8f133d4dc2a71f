"""The fold of a log reads each record's fields with msgspec, and a record of any other shape
whole with orjson: both readings give the same queues.

Random ``kueue.admission`` Workload entries and ``kueue.decisions`` records,
with fields of the expected types and of others (priorities that are
missing, booleans, strings or beyond 64 bits, metadata and statuses that are
null or not objects, duplicated origins), are folded as ``pending`` folds
them and again with every record read whole: the Workloads, their order
keys, the metadata shown and the decisions are the same, and so is the
error when one is raised.
"""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from kueuestream.agents.audit import queue_fold
from kueuestream.agents.audit.queue_fold import fold_admission, last_decisions, queued_order
from kueuestream.streams.log import Record

ABSENT = object()


def _cannot_read(_: bytes) -> Any:
    raise msgspec.DecodeError("read whole")


def _present(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _present(v) for k, v in doc.items() if v is not ABSENT}
    return doc


def _json(doc: dict[str, Any]) -> bytes:
    # The standard encoder, unlike orjson, writes integers beyond 64 bits.
    return json.dumps(_present(doc), sort_keys=True, separators=(",", ":")).encode()


conditions = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["QuotaReserved", "Finished"]),
            "status": st.sampled_from(["True", "False"]),
            "reason": st.sampled_from(["WaitingForQuota", "Inadmissible", "Pending"]),
            "message": st.sampled_from(
                ["no quota", "Pending the preemption of 2 workload(s)", "is inactive"]
            ),
        }
    ),
    max_size=2,
)
# Entries of the shape ingest writes.
workload_entries = st.fixed_dictionaries(
    {
        "kind": st.just("Workload"),
        "name": st.sampled_from(["a", "b"]),
        "namespace": st.sampled_from(["ns-1", "ns-2"]),
        "type": st.sampled_from(["Upsert", "Upsert", "Upsert", "Delete", "Stopped"]),
        "shard": st.sampled_from(["cq:x", "*"]),
        "time_ms": st.integers(0, 10**13),
        "origin": st.fixed_dictionaries(
            {"stream": st.just("watch"), "offset": st.integers(0, 6), "index": st.just(0)}
        ),
        "object": st.fixed_dictionaries(
            {
                "metadata": st.fixed_dictionaries(
                    {"name": st.just("a")},
                    optional={
                        "creationTimestamp": st.sampled_from(
                            ["2023-11-14T22:13:20Z", "2023-11-14T22:13:20.5+01:00", "2023-11-15T00:00:00Z"]
                        ),
                        "ownerReferences": st.just([{"kind": "Job", "name": "j", "uid": "u"}]),
                    },
                ),
                "spec": st.fixed_dictionaries(
                    {"priority": st.sampled_from([0, 1, 2, -1, 2**63 - 1]), "queueName": st.just("main")},
                    optional={"active": st.booleans()},
                ),
            },
            optional={"status": st.fixed_dictionaries({"conditions": conditions})},
        ),
    }
)
# Fields of other shapes, each at its path in an entry.
ODD_ENTRY_FIELDS: list[tuple[tuple[str, ...], list[Any]]] = [
    (("object", "spec", "priority"), [None, True, "3", 2.0, 2**63, -(2**63) - 1, 2**70, ABSENT]),
    (("object", "spec", "queueName"), [None, 4, 2**70, ABSENT]),
    (("object", "spec", "active"), [None, 0, "no", ABSENT]),
    (("object", "spec", "priorityClassName"), ["high"]),
    (("object", "spec", "podSets"), [[{"name": "m", "template": {"spec": {"priority": 1}}}]]),
    (
        ("object", "spec"),
        [
            None,
            [],
            {},
            ABSENT,
            {"queueName": "main", "priorityClassName": "high"},
            {
                "queueName": "main",
                "podSets": [{"name": "m", "template": {"spec": {"priorityClassName": "x"}}}],
            },
        ],
    ),
    (("object", "metadata"), [None, [], {}, "x", ABSENT]),
    (("object", "metadata", "creationTimestamp"), [5, 2**70, None, "yesterday", "2023-02-30T00:00:00Z"]),
    (("object", "metadata", "uid"), [2**70]),
    (("object", "status"), [None, {}, [1], {"requeueState": {"count": 1}}]),
    (("object", "status", "conditions"), [[{"type": "QuotaReserved", "reason": 2**70}], [3], None]),
    (("object",), [None, [], ABSENT]),
    (("name",), [3, None, ABSENT]),
    (("namespace",), [None, 2, ABSENT]),
    (("type",), [None, 5, ABSENT]),
    (("time_ms",), ["5", 2**64, 2**63, 1.5, ABSENT]),
    (("origin", "index"), [2**70, "0", None]),
    (("origin",), [None, ABSENT]),
    (("shard",), [1, None, ABSENT]),
    (("kind",), ["Tick", None, 3]),
]


def _with(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Set ``path`` in ``doc`` to ``value`` where its parent is an object."""
    for step in path[:-1]:
        doc = doc.get(step)  # type: ignore[assignment]
        if not isinstance(doc, dict):
            return
    doc[path[-1]] = value


def _perturbed(docs: list[dict[str, Any]], odd: list[tuple[tuple[str, ...], list[Any]]], picks: Any) -> None:
    for at, field, choice in picks:
        path, values = odd[field % len(odd)]
        _with(docs[at % len(docs)], path, values[choice % len(values)])


picks = st.lists(st.tuples(st.integers(0, 9), st.integers(0, 99), st.integers(0, 9)), max_size=4)


def _outcome(run: Any) -> Any:
    try:
        return ("folded", run())
    except Exception as exc:  # the same failure, whichever reading
        return ("failed", type(exc).__name__, str(exc))


def _admission(records: list[Record]) -> Any:
    folded = fold_admission([records])
    return [
        (key, wl.queue_name, wl.priority, wl.created_ms, wl.manifest_metadata(), wl.active, wl.standing)
        for key, wl in folded.workloads.items()
    ], [
        queued_order(wl) if wl.standing[0] != queue_fold.INACTIVE else None
        for wl in folded.workloads.values()
    ]


@settings(max_examples=500, deadline=None)
@given(entries=st.lists(workload_entries, min_size=1, max_size=6), odd=picks)
def test_admission_entries_fold_the_same_read_either_way(entries: list[dict[str, Any]], odd: Any) -> None:
    _perturbed(entries, ODD_ENTRY_FIELDS, odd)
    records = [Record("kueue.admission", 0, i, b"", _json(e)) for i, e in enumerate(entries)]
    read = _outcome(lambda: _admission(records))
    with mock.patch.object(queue_fold, "_read_entry", _cannot_read):
        whole = _outcome(lambda: _admission(records))
    assert read == whole


decision_records = st.fixed_dictionaries(
    {
        "action": st.sampled_from(["Pending", "Admitted", "Deleted", "Evicted"]),
        "ref": st.fixed_dictionaries(
            {
                "kind": st.just("Workload"),
                "name": st.sampled_from(["a", "b"]),
                "namespace": st.sampled_from(["ns-1", "ns-2"]),
            }
        ),
        "status": st.fixed_dictionaries({"conditions": conditions}),
        "trace": st.just({"cycle": 1}),
    }
)
ODD_DECISION_FIELDS: list[tuple[tuple[str, ...], list[Any]]] = [
    (("action",), [None, 2**70, ABSENT]),
    (("ref",), [None, [], {}, ABSENT]),
    (("ref", "kind"), ["ClusterQueue", None, ABSENT]),
    (("ref", "name"), [None, 3, 2**70, ABSENT]),
    (("ref", "namespace"), [None, 2**70, ABSENT]),
    (("status",), [None, {}, [1], ABSENT]),
    (("status", "conditions"), [[{"type": "QuotaReserved", "reason": 2**70}], [3], None]),
]


@settings(max_examples=500, deadline=None)
@given(
    decisions=st.lists(decision_records, max_size=6),
    keys=st.lists(st.sampled_from([b"", b"ns-1/a", b"ns-2/b"]), min_size=6, max_size=6),
    odd=picks,
)
def test_decisions_fold_the_same_read_either_way(
    decisions: list[dict[str, Any]], keys: list[bytes], odd: Any
) -> None:
    if decisions:
        _perturbed(decisions, ODD_DECISION_FIELDS, odd)
    records = [Record("kueue.decisions", 0, i, keys[i], _json(d)) for i, d in enumerate(decisions)]
    read = _outcome(lambda: last_decisions([records]))
    with mock.patch.object(queue_fold, "_read_decision", _cannot_read):
        whole = _outcome(lambda: last_decisions([records]))
    assert read == whole
