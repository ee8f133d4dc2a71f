"""admit's YAML output is byte for byte what PyYAML's safe_dump writes, only faster."""

from __future__ import annotations

import copy
import io
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kueuestream.agents.cli import yaml_output
from kueuestream.agents.cli.yaml_output import write_yaml

# Strings like those in Workload status, and strings that stress quoting.
WORDS = st.sampled_from(
    [
        "QuotaReserved",
        "True",
        "False",
        "true",
        "yes",
        "null",
        "~",
        "=",
        "1",
        "0.5",
        "1e3",
        "0x1F",
        "2024-01-01T00:00:00Z",
        "2024-01-01",
        "nvidia.com/gpu",
        "cq-1",
        "team-a/job",
        "a,b",
        "a: b",
        "a:b",
        "a:",
        "a::b",
        "...",
        "...x",
        "---",
        "---x",
        "..",
        "registry.k8s.io/pause:3.9",
        "http://example.com:8080/x",
        "10:30",
        "1:2:3",
        "a:b c:d",
        "a:b c: d",
        "-a",
        "- a",
        "-",
        "?",
        "? x",
        ":x",
        "# x",
        "a #b",
        "a#b",
        "'q'",
        '"q"',
        "it's",
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default",
        " lead",
        "trail ",
        "two  spaces",
        "",
        "x" * 150,
        "tab\there",
        "line\nbreak",
        "ünïcode",
        "a\x00b",
        "[x]",
        "{x}",
        "*x",
        "&x",
        "!x",
        "|x",
        ">x",
        "%x",
        "@x",
        "`x",
        "(x)",
        "a=b",
        "a+b",
        "a;b",
        "~x",
    ]
)
TEXT = st.one_of(WORDS, st.text(max_size=12), st.text(alphabet="ab -:#,'\"?.", max_size=8))
SCALARS = st.one_of(TEXT, st.integers(-(2**63), 2**63), st.booleans(), st.none(), st.floats(allow_nan=False))
DATA = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=30,
)


def written(data: Any) -> str:
    out = io.StringIO()
    write_yaml(data, out)
    return out.getvalue()


def pyyaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=1_000_000)


@settings(max_examples=500, deadline=None)
@given(data=DATA)
def test_any_data_is_written_as_pyyaml_writes_it(data: Any) -> None:
    assert written(data) == pyyaml(data)


@settings(max_examples=300, deadline=None)
@given(items=st.lists(st.dictionaries(TEXT, DATA, max_size=5), max_size=5), kind=WORDS)
def test_a_list_document_is_written_as_pyyaml_writes_it(items: list[Any], kind: str) -> None:
    data = {"apiVersion": "v1", "kind": kind, "items": items}
    assert written(data) == pyyaml(data)


def test_a_workload_list() -> None:
    item = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job", "namespace": "team-a"},
        "spec": {"podSets": [{"name": "main", "count": 2, "template": {"spec": {"containers": [{}]}}}]},
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": "couldn't assign flavors to pod set main: insufficient quota",
                    "lastTransitionTime": "2024-01-01T00:00:00Z",
                }
            ],
            "admission": None,
        },
    }
    other = copy.deepcopy(item)
    other["metadata"]["name"] = "ünï"
    data = {"apiVersion": "v1", "kind": "List", "items": [item, other]}
    assert written(data) == pyyaml(data)
    assert yaml.safe_load(written(data)) == data


def test_a_job_derived_workload_never_needs_pyyaml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Image references and condition messages, in every item, are written without PyYAML's emitter.

    PyYAML's emitter takes milliseconds per Workload; an ``admit`` of thousands of
    Workloads spent most of its time there when every item had an image ``name:tag``.
    """

    def refuse(data: Any, stream: Any) -> None:
        raise AssertionError(f"PyYAML's emitter was used for {data!r}")

    monkeypatch.setattr(yaml_output, "_pyyaml", refuse)
    item = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-sample-3f2a1", "namespace": "team-a"},
        "spec": {
            "podSets": [
                {
                    "name": "main",
                    "template": {"spec": {"containers": [{"image": "registry.k8s.io/pause:3.9"}]}},
                }
            ]
        },
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": "couldn't assign flavors to pod set main: insufficient unused quota "
                    "for cpu in flavor default, 1 more needed",
                    "lastTransitionTime": "2024-01-01T00:00:00Z",
                }
            ]
        },
    }
    data = {"apiVersion": "v1", "kind": "List", "items": [item, copy.deepcopy(item)]}
    assert written(data) == pyyaml(data)


def test_strings_that_open_like_a_document_marker_are_quoted() -> None:
    data = {"...": "...", "a": ["---", "...x", "x..."]}
    assert written(data) == pyyaml(data)
    assert yaml.safe_load(written(data)) == data


def test_a_long_list_written_in_parts_on_several_cores_is_pyyamls_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Items cut into three parts, each written by its own process, come out whole and in order."""
    monkeypatch.setattr(yaml_output, "cores", lambda: 3)
    unusual = ["plain", "multi\nline", "naïve", "yes", "", "- dash", "x: y", "123"]
    items = [
        {"metadata": {"name": f"w{i:05d}", "note": unusual[i % len(unusual)]}, "spec": {"count": i}}
        for i in range(yaml_output.PARALLEL_MIN_ITEMS + 7)
    ]
    data = {"apiVersion": "v1", "kind": "List", "items": items}
    assert written(data) == pyyaml(data)
