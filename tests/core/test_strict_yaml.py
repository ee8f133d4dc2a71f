"""The manifest loader: PyYAML's values for valid YAML, the API server's refusals for the rest.

Upstream rules: the API server's strict field validation refuses a key given
twice (sigs.k8s.io/yaml ``YAMLToJSONStrict``); go-yaml refuses excessive
aliasing by ``allowedAliasRatio`` (go.yaml.in/yaml/v2 decode.go); the API
server takes at most ``MaxRequestBodyBytes`` (3 MiB) per object.
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kueuestream.admission import strict_yaml
from kueuestream.admission.strict_yaml import (
    C_COMPOSER_SAFE_DEPTH,
    MAX_DEPTH,
    YamlDocument,
    alias_ratio_allowed,
    load_documents,
    load_one,
    nesting_bound,
)


def values(text: str) -> list[Any]:
    out = []
    for document in load_documents(text):
        assert document.problem is None, document.problem
        out.append(document.value)
    return out


def problems(text: str) -> list[str]:
    return [d.problem.message for d in load_documents(text) if d.problem is not None]


keys = st.text(min_size=1, max_size=8)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=12),
)
trees = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(tree=trees, flow=st.sampled_from([None, True, False]))
def test_valid_yaml_loads_as_pyyaml_loads_it(tree: Any, flow: bool | None) -> None:
    text = yaml.safe_dump(tree, default_flow_style=flow, allow_unicode=True)
    assert values(text) == [yaml.safe_load(text)]


@settings(max_examples=200, deadline=None)
@given(tree=trees, flow=st.sampled_from([None, True, False]))
def test_the_nesting_bound_is_never_below_the_real_depth(tree: Any, flow: bool | None) -> None:
    def depth(value: Any) -> int:
        if isinstance(value, dict):
            return 1 + max((depth(v) for v in value.values()), default=0)
        if isinstance(value, list):
            return 1 + max((depth(v) for v in value), default=0)
        return 1

    text = yaml.safe_dump(tree, default_flow_style=flow, allow_unicode=True)
    assert nesting_bound(text) >= depth(tree)


def test_nesting_bound_of_compact_and_indentless_block_nesting() -> None:
    compact = "- " * 40 + "x\n"
    # k0: / - k1: / "  - k2:" ...: each sequence sits right under its key, two levels per indent.
    indentless = "k0:\n" + "".join("  " * (i - 1) + f"- k{i}:\n" for i in range(1, 20)) + "  " * 19 + "- x\n"
    for text in (compact, indentless, "a: " + "[" * 30 + "]" * 30 + "\n"):
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        deepest, stack = 0, [(node, 1)]
        while stack:
            item, d = stack.pop()
            deepest = max(deepest, d)
            if isinstance(item, yaml.MappingNode):
                stack += [(v, d + 1) for _, v in item.value]
            elif isinstance(item, yaml.SequenceNode):
                stack += [(v, d + 1) for v in item.value]
        assert nesting_bound(text) >= deepest


def test_kubernetes_scalars() -> None:
    text = (
        "int: 0x10\nbig: 100000000000000000000000\nfloat: 0.5\nyes: yes\nnull: ~\n"
        "stamp: 2024-01-01T00:00:00Z\nquoted: '1'\n1: one\ntrue: two\n"
    )
    assert values(text) == [
        {
            "int": 16,
            "big": "100000000000000000000000",
            "float": 0.5,
            "yes": True,
            "null": None,
            "stamp": "2024-01-01T00:00:00Z",
            "quoted": "1",
            "1": "one",
            "true": "two",
        }
    ]


def test_merge_keys_and_shared_anchors() -> None:
    text = "base: &b {x: 1, y: 2}\nover: {<<: *b, y: 3}\nboth: {<<: [{a: 1}, {a: 2, b: 2}]}\nsame: *b\n"
    [value] = values(text)
    assert value == yaml.safe_load(text)
    assert value["same"] is value["base"]


def test_documents_and_empty_documents_keep_their_positions() -> None:
    assert values("a: 1\n---\n# only a comment\n---\nb: 2\n") == [{"a": 1}, None, {"b": 2}]


def test_duplicate_key_names_key_path_and_both_lines() -> None:
    text = (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: q, namespace: ns}\n"
        "spec:\n  clusterQueue: a\n  clusterQueue: b\n"
    )
    [document] = list(load_documents(text))
    assert document.value is None and document.problem is not None
    assert document.problem.label == "LocalQueue ns/q"
    assert document.problem.message == (
        "spec.clusterQueue: duplicate key 'clusterQueue' at line 6, column 3, first given at line 5, "
        "column 3; a key may appear once in a map, as the API server's strict field validation requires"
    )


def test_a_key_written_two_ways_is_still_a_duplicate() -> None:
    [message] = problems("a: {'name': x, \"name\": y}\n")
    assert message.startswith("a.name: duplicate key 'name'")


def test_a_duplicate_in_a_list_item_is_reported_for_that_item() -> None:
    text = (
        "apiVersion: v1\nkind: List\nitems:\n- {kind: ResourceFlavor, metadata: {name: a}}\n"
        "- kind: ResourceFlavor\n  metadata: {name: b, name: c}\n"
    )
    [document] = list(load_documents(text))
    assert document.problem is not None
    assert document.problem.label == "ResourceFlavor b"
    assert document.problem.message.startswith("metadata.name: duplicate key 'name' at line 6")


def test_a_bad_document_does_not_hide_the_next_one() -> None:
    found = list(load_documents("a: 1\na: 2\n---\nb: 1\n"))
    assert [d.value for d in found] == [None, {"b": 1}]
    assert found[0].problem is not None


def test_a_syntax_error_ends_the_text() -> None:
    found = list(load_documents("a: 1\n---\nb: [1\n---\nc: 1\n"))
    assert [d.value for d in found[:1]] == [{"a": 1}]
    assert len(found) == 2
    last = found[1].problem
    assert last is not None and last.syntax
    assert last.message.startswith("line 4, column 1: ")


def bomb(levels: int, width: int = 9) -> str:
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_before_it_expands() -> None:
    # Nine levels of nine: 387,420,489 values once expanded.
    [message] = problems(bomb(9))
    assert "excessive aliasing at line " in message
    assert "refused, as the API server refuses alias bombs" in message


def test_moderate_aliasing_is_fine() -> None:
    [value] = values(bomb(3))
    assert len(value["l2"]) == 9 and value["l2"][0] is value["l1"]


def test_the_alias_ratio_follows_go_yaml() -> None:
    assert alias_ratio_allowed(1000) == 0.99
    assert alias_ratio_allowed(400_000) == 0.99
    assert alias_ratio_allowed(4_000_000) == pytest.approx(0.10)
    assert alias_ratio_allowed(2_200_000) == pytest.approx(0.545)


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    [message] = problems("a: &a [1, *a]\n")
    assert message.startswith("a: an alias refers to a collection that contains it at line 1")


def test_tags_with_no_json_value_are_refused() -> None:
    for text in ("a: !!binary aGVsbG8=\n", "a: !!set {x, y}\n", "a: !custom x\n", "a: !!omap [b: 1]\n"):
        [message] = problems(text)
        assert message.startswith("a: tag !")
        assert (
            "is not supported: a manifest holds maps, lists, strings, numbers, booleans and null" in message
        )


def test_map_keys_must_be_scalars() -> None:
    [message] = problems("? [a, b]\n: c\n")
    assert message.startswith("a map key must be a string, not a map or a list at line 1")


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n",
        "- " * (MAX_DEPTH + 5) + "x\n",
    ],
)
def test_nesting_deeper_than_the_limit_is_refused(text: str) -> None:
    [message] = problems(text)
    assert f"nested more than {MAX_DEPTH} levels deep at line 1" in message


@pytest.mark.parametrize("libyaml_composer", [True, False])
@pytest.mark.parametrize(
    "deep",
    ["[" * 1500 + "]" * 1500, "- " * 1500 + "x", "".join(" " * i + "b:\n" for i in range(1500))],
)
def test_nesting_past_libyamls_own_limit_is_refused_as_ours(deep: str, libyaml_composer: bool) -> None:
    """libyaml 0.2.6 (PyYAML 6.0.4's wheels) stops at 1,000 levels with its own wording; past
    that limit, whichever composer reads it, the refusal is MAX_DEPTH's and the document
    before it is still read."""
    found = list(load_documents("ok: 1\n---\n" + deep + "\n", libyaml_composer=libyaml_composer))
    assert found[0].problem is None and found[0].value == {"ok": 1}
    assert [d.value for d in found[1:]] == [None]
    problem = found[1].problem
    assert problem is not None
    assert problem.message.startswith(f"nested more than {MAX_DEPTH} levels deep at line "), problem.message
    assert "exceeded maximum nesting depth" not in problem.message


def test_nesting_at_the_limit_is_fine() -> None:
    depth = MAX_DEPTH - 1  # the lists, and the scalar inside the innermost
    [value] = values("[" * depth + "x" + "]" * depth + "\n")
    assert value is not None


@pytest.mark.parametrize(
    "deep",
    [
        "[" * 200_000 + "]" * 200_000,
        "- " * 100_000 + "x",
        "a:\n" + "".join(" " * i + "b:\n" for i in range(1, 3000)),
    ],
)
def test_very_deep_nesting_neither_crashes_nor_hangs(deep: str) -> None:
    """libyaml's composer recurses in C, and its scanner works per flow level for every token.

    Past C_COMPOSER_SAFE_DEPTH the composer must not be used at all, and
    reading must stop at MAX_DEPTH; before that, the documents are read.
    """
    assert nesting_bound(deep) > C_COMPOSER_SAFE_DEPTH
    script = (
        "from kueuestream.admission.strict_yaml import load_documents\n"
        f"text = 'ok: 1\\n---\\n' + {deep!r} + '\\n---\\nnever: read\\n'\n"
        "for d in load_documents(text):\n"
        "    print(d.problem.message if d.problem else d.value)\n"
    )
    # In a child process: a C stack overflow would kill it, not the test run.
    done = subprocess.run([sys.executable], input=script, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    first, second = done.stdout.splitlines()
    assert first == "{'ok': 1}"
    pattern = rf"nested more than {MAX_DEPTH} levels deep at line \d+, column \d+; "
    pattern += "the rest of the text is not read"
    assert re.fullmatch(pattern, second)


def test_an_object_over_three_mebibytes_is_refused() -> None:
    big = "x" * (3 * 1024 * 1024)
    text = f"kind: ConfigMap\nmetadata: {{name: big}}\ndata: {{a: {big}}}\n---\nkind: Namespace\n"
    found = list(load_documents(text))
    assert found[0].problem is not None
    assert found[0].problem.label == "ConfigMap big"
    assert found[0].problem.message.startswith("the object at line 1, column 1 is 3,145,7")
    assert "the API server takes at most 3,145,728 bytes (3 MiB) per object" in found[0].problem.message
    assert found[1] == YamlDocument({"kind": "Namespace"})


def test_a_list_is_measured_item_by_item() -> None:
    item = "- {kind: ConfigMap, metadata: {name: c}, data: {a: " + "x" * (1024 * 1024) + "}}\n"
    text = "apiVersion: v1\nkind: List\nitems:\n" + item * 4
    [value] = values(text)
    assert len(value["items"]) == 4


def test_load_one() -> None:
    assert load_one("a: 1\n") == {"a": 1}
    assert load_one("") is None
    with pytest.raises(Exception, match="expected one document, found 2"):
        load_one("a: 1\n---\nb: 2\n")


def _composer_safe_span_by_span(text: str) -> bool:
    """The libyaml composer's safety as the spans between document markers give it, one by one."""
    if nesting_bound(text) > strict_yaml.C_COMPOSER_SAFE_DEPTH:
        return False
    spans = strict_yaml._chunks(text)
    work = sum(strict_yaml._flow_bound(text, a, b) * (b - a) for a, b in spans)
    return work <= strict_yaml.FLOW_WORK_PER_CHAR * max(len(text), 1)


_LINES = st.sampled_from(["---", "...", "--- [", "x", "xxxxxx", "[", "{", "[]", "{}", "[x", "- [{", "]", ""])


@settings(max_examples=400, deadline=None)
@given(text=st.lists(_LINES | st.text(alphabet="[]{}-.\n x", max_size=8), max_size=12).map("\n".join))
def test_the_whole_text_shortcut_decides_as_the_spans_do(text: str) -> None:
    """Limits this low make the whole-text bound pass or fail on texts a few lines long."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(strict_yaml, "C_COMPOSER_SAFE_DEPTH", 14)
        patch.setattr(strict_yaml, "FLOW_WORK_PER_CHAR", 3)
        assert strict_yaml._c_composer_is_safe(text) == _composer_safe_span_by_span(text)
