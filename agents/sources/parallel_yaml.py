"""Reading a large multi-document YAML text on several cores at once.

A line that starts with ``---`` at column 0 always starts a new document
(YAML 1.1 and 1.2 forbid it inside a document's content: libyaml ends a
block scalar there, and refuses it inside a quoted one), and anchors,
aliases and tags never reach across documents. So a text cut just before
such lines reads, part by part, as the same documents, with one exception:
a syntax error, whose message depends on where the parser stopped. Then
the whole text is read again in one piece, which gives exactly what
:func:`~kueuestream.admission.strict_yaml.load_documents` gives.

Each part but the first is read by a forked child process
(:mod:`kueuestream.agents.forked`), which sends its documents back pickled;
the parent reads the first part meanwhile. A part is prefixed with as many empty lines as come before it,
so every line number in a message is the whole text's. Texts with a
directive (``%YAML``, ``%TAG``: it belongs to the document after it, on the
far side of a cut) and texts the guarded composer must read are read in one
piece, and so is everything when only one core is available, when the process
has other threads (forking them is unsafe), or when the text is small.
"""

from __future__ import annotations

import re
from typing import Any

from kueuestream.admission.strict_yaml import (
    YamlDocument,
    YamlProblem,
    load_documents,
    uses_libyaml_composer,
)
from kueuestream.agents.forked import can_fork, cores, map_parts

# Below this, a fork and a pickle round trip cost more than half the parsing saves.
PARALLEL_MIN_CHARS = 1 << 20

_DOCUMENT_START = re.compile(r"^---(?=[ \t\r\n]|\Z)", re.MULTILINE)
_DIRECTIVE = re.compile(r"^%", re.MULTILINE)

# A document as a child sends it: (value, None) or (None, the problem's fields).
_Sent = tuple[Any, tuple[str, int, int, bool, str] | None]


def cut_points(text: str, parts: int) -> list[int]:
    """Where the parts start: 0, then the document start nearest each even share of ``text``."""
    starts = [m.start() for m in _DOCUMENT_START.finditer(text) if m.start() > 0]
    cuts = [0]
    for i in range(1, parts):
        target = len(text) * i // parts
        best = min(starts, key=lambda s: abs(s - target), default=None)
        if best is not None and best > cuts[-1]:
            cuts.append(best)
    return cuts


def _read(part: str) -> list[_Sent]:
    out: list[_Sent] = []
    for d in load_documents(part, libyaml_composer=True):
        p = d.problem
        out.append((d.value, None if p is None else (p.message, p.line, p.column, p.syntax, p.label)))
    return out


def _received(sent: list[_Sent]) -> list[YamlDocument]:
    out: list[YamlDocument] = []
    for value, problem in sent:
        if problem is None:
            out.append(YamlDocument(value))
        else:
            message, line, column, syntax, label = problem
            out.append(
                YamlDocument(None, YamlProblem(message, line=line, column=column, syntax=syntax, label=label))
            )
    return out


def _parallel_allowed(text: str, min_chars: int, parts: int) -> bool:
    return (
        len(text) >= min_chars
        and parts > 1
        and can_fork()
        and _DIRECTIVE.search(text) is None
        and uses_libyaml_composer(text)
    )


def load_documents_parallel(
    text: str, *, min_chars: int = PARALLEL_MIN_CHARS, parts: int | None = None
) -> list[YamlDocument]:
    """What ``list(load_documents(text))`` gives, read in ``parts`` parts at once.

    By default as many parts as :func:`~kueuestream.agents.forked.cores`
    says, and a text under ``min_chars`` characters in one piece.
    """
    count = cores() if parts is None else parts
    if not _parallel_allowed(text, min_chars, count):
        return list(load_documents(text))
    cuts = cut_points(text, count)
    if len(cuts) < 2:
        return list(load_documents(text))
    ends = [*cuts[1:], len(text)]
    # Every part but the first starts with as many line breaks as come before it.
    texts = [text[: ends[0]]] + [
        "\n" * text.count("\n", 0, a) + text[a:b] for a, b in zip(cuts[1:], ends[1:], strict=True)
    ]
    documents = [d for sent in map_parts(_read, texts) for d in _received(sent)]
    if any(d.problem is not None and d.problem.syntax for d in documents):
        # Where a syntax error is found depends on where the text was cut: read it whole.
        return list(load_documents(text))
    return documents
