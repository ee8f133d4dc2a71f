"""A large multi-document file read on several cores gives exactly what reading it whole gives."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kueuestream.admission.strict_yaml import YamlDocument, load_documents
from kueuestream.agents.sources.parallel_yaml import cut_points, load_documents_parallel

# Documents of every sort the reader tells apart: valid objects, a List, empty
# documents and end markers, rule breaches (a duplicate key, an alias inside
# its own anchor, an unsupported tag) that are reported for their document
# alone, and syntax errors that end the text.
SNIPPETS = [
    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns-{i}\n",
    "kind: Workload\nmetadata:\n  name: w-{i}\n  namespace: ns\n"
    "spec:\n  podSets:\n  - count: {i}\n    name: main\n",
    "kind: List\nitems:\n- kind: Namespace\n  metadata: {{name: a-{i}}}\n"
    "- kind: Namespace\n  metadata: {{name: b-{i}}}\n",
    "# only a comment {i}\n",
    "a: {i}\n...\n",
    "base: &b {{cpu: '{i}'}}\nuse: *b\n",
    "kind: Namespace\nmetadata:\n  name: x{i}\n  name: y{i}\n",
    "loop: &l [*l]\n",
    "value: !!binary aGVsbG8=\n",
    "key: [unclosed {i}\n",
    'text: "open quote {i}\n',
    "  bad: indentation\n wrong: {i}\n",
    "quantity: 0.5\nflag: yes\nnothing: ~\nbig: 100000000000000000000\n",
    "--- |\n  block text {i}\n",
]


def text_of(picks: list[int], leading: bool) -> str:
    docs = [SNIPPETS[p].format(i=i) for i, p in enumerate(picks)]
    return ("---\n" if leading else "") + "---\n".join(docs)


def seen(documents: list[YamlDocument]) -> list[Any]:
    return [
        (d.value, None)
        if d.problem is None
        else (None, (d.problem.message, d.problem.line, d.problem.column, d.problem.syntax, d.problem.label))
        for d in documents
    ]


@settings(max_examples=60, deadline=None)
@given(
    picks=st.lists(st.integers(0, len(SNIPPETS) - 1), min_size=2, max_size=30),
    leading=st.booleans(),
    parts=st.integers(2, 4),
)
def test_reading_in_parts_gives_what_reading_whole_gives(picks: list[int], leading: bool, parts: int) -> None:
    """Values, problems, their lines and columns, and the documents' positions are all the same."""
    text = text_of(picks, leading)
    assert len(cut_points(text, parts)) > 1  # the text is really cut
    whole = seen(list(load_documents(text)))
    assert seen(load_documents_parallel(text, min_chars=0, parts=parts)) == whole


def test_a_problem_in_a_later_part_names_its_line_in_the_whole_file() -> None:
    text = "".join(f"---\nkind: Namespace\nmetadata:\n  name: n{i}\n" for i in range(50))
    text += "---\nkind: Namespace\nmetadata:\n  name: a\n  name: b\n"
    documents = load_documents_parallel(text, min_chars=0, parts=2)
    problem = documents[-1].problem
    assert problem is not None and (problem.line, problem.column) == (205, 3)
    assert (
        "metadata.name: duplicate key 'name' at line 205, column 3, first given at line 204"
        in problem.message
    )
    assert [d.value["metadata"]["name"] for d in documents[:50]] == [f"n{i}" for i in range(50)]
