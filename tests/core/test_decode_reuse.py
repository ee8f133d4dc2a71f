"""A manifest decoded again right after is not validated twice, and no caller sees another's changes.

The embedded pipeline decodes each manifest in ingest and again in its shard's
engine; the second time reuses the first outcome only for exactly the same input.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import pytest

from kueuestream.admission.decode import decode, remembering_every_outcome
from kueuestream.admission.errors import FieldError
from tests.helpers import workload_manifest


def _workload(count: Any = 1) -> dict[str, Any]:
    manifest = workload_manifest("train", "lq", {"cpu": "1"}, namespace="team-a")
    manifest["spec"]["podSets"][0]["count"] = count
    return manifest


def test_the_same_manifest_again_shares_its_object_but_not_its_lists() -> None:
    first = decode(_workload())
    again = decode(copy.deepcopy(_workload()))
    assert first.obj is not None
    assert again.obj is first.obj
    first.errors.append(FieldError("spec", "added by one caller"))
    first.warnings.append("added by one caller")
    third = decode(_workload())
    assert (third.errors, third.warnings) == ([], [])


@pytest.mark.parametrize(
    "manifest", [_workload(), _workload(count=True), {"kind": "Service", "apiVersion": "v1"}]
)
def test_a_reused_outcome_equals_the_first_in_every_field(manifest: dict[str, Any]) -> None:
    """Every field of :class:`Decoded` comes back: one added to it must be copied on reuse too."""
    first = decode(manifest)
    again = decode(copy.deepcopy(manifest))
    for f in dataclasses.fields(first):
        assert getattr(again, f.name) == getattr(first, f.name), f.name


@pytest.mark.parametrize(
    ("count", "message"),
    [
        (True, "expected an integer, got bool True"),
        (None, "expected an integer, got None"),
        (math.nan, "Input should be a finite number"),
    ],
)
def test_a_manifest_that_differs_only_in_a_type_is_decoded_on_its_own(count: Any, message: str) -> None:
    """``true`` equals ``1`` in Python and orjson writes NaN as None: each gets its own error."""
    assert decode(_workload(1)).errors == []
    assert [(e.path, e.message) for e in decode(_workload(count)).errors] == [
        ("spec.podSets[0].count", message)
    ]
    # And in the other order: an invalid one first does not spoil the valid one.
    assert decode(_workload(1)).obj is not None


def test_every_outcome_is_kept_within_the_block_and_only_the_last_few_after() -> None:
    """``admit`` checks all its manifests, then its pipeline decodes them again: far more than a few apart."""
    manifests = [workload_manifest(f"w{i}", "lq", {"cpu": "1"}, namespace="team-a") for i in range(200)]
    with remembering_every_outcome():
        first = [decode(m).obj for m in manifests]
        again = [decode(copy.deepcopy(m)).obj for m in manifests]
        assert all(a is b for a, b in zip(first, again, strict=True))
    # Afterwards the old bound holds again: the first ones are gone, the last one is kept.
    assert decode(copy.deepcopy(manifests[0])).obj is not first[0]
    assert decode(copy.deepcopy(manifests[-1])).obj is first[-1]
