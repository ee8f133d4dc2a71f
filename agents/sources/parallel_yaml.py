"""Reading a large multi-document YAML text on several cores at once.

A line that starts with ``---`` at column 0 always starts a new document
(YAML 1.1 and 1.2 forbid it inside a document's content: libyaml ends a
block scalar there, and refuses it inside a quoted one), and anchors,
aliases and tags never reach across documents. So a text cut just before
such lines reads, part by part, as the same documents, with one exception:
a syntax error, whose message depends on where the parser stopped. Then
the whole text is read again in one piece, which gives exactly what
:func:`~kueuestream.admission.strict_yaml.load_documents` gives.

Each part but the first is read by a forked child process, which sends its
documents back through a pipe, pickled; the parent reads the first part
meanwhile. A part is prefixed with as many empty lines as come before it,
so every line number in a message is the whole text's. Texts with a
directive (``%YAML``, ``%TAG``: it belongs to the document after it, on the
far side of a cut) and texts the guarded composer must read are read in one
piece, and so is everything when only one core is available, when the process
has other threads (forking them is unsafe), or when the text is small.
"""

from __future__ import annotations

import os
import pickle
import re
import threading
from collections.abc import Callable
from typing import Any

from kueuestream.admission.strict_yaml import (
    YamlDocument,
    YamlProblem,
    load_documents,
    uses_libyaml_composer,
)

# Below this, a fork and a pickle round trip cost more than half the parsing saves.
PARALLEL_MIN_CHARS = 1 << 20
MAX_PARTS = 4

_DOCUMENT_START = re.compile(r"^---(?=[ \t\r\n]|\Z)", re.MULTILINE)
_DIRECTIVE = re.compile(r"^%", re.MULTILINE)

# A document as a child sends it: (value, None) or (None, the problem's fields).
_Sent = tuple[Any, tuple[str, int, int, bool, str] | None]


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


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


def _part(text: str, start: int, end: int) -> str:
    return "\n" * text.count("\n", 0, start) + text[start:end]


def _sent(documents: list[YamlDocument]) -> list[_Sent]:
    out: list[_Sent] = []
    for d in documents:
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


def _read(part: str) -> list[YamlDocument]:
    return list(load_documents(part, libyaml_composer=True))


def _fork_reader(part: str) -> Callable[[], list[YamlDocument]]:
    """Start reading ``part`` in a child; the function returned gives its documents.

    They are read in this process instead if the child could not be started or failed.
    """
    try:
        r, w = os.pipe()
    except OSError:
        return lambda: _read(part)
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return lambda: _read(part)
    if pid == 0:  # the child: never returns to the caller's code
        code = 1
        try:
            os.close(r)
            payload = pickle.dumps(_sent(_read(part)), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(w, "wb") as pipe:
                pipe.write(payload)
            code = 0
        finally:
            os._exit(code)
    os.close(w)

    def result() -> list[YamlDocument]:
        with os.fdopen(r, "rb") as pipe:
            payload = pipe.read()
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) == 0:
            try:
                return _received(pickle.loads(payload))
            except (pickle.UnpicklingError, EOFError, ValueError, TypeError):
                pass
        return _read(part)

    return result


def _parallel_allowed(text: str, min_chars: int, parts: int) -> bool:
    return (
        len(text) >= min_chars
        and parts > 1
        and hasattr(os, "fork")
        and threading.active_count() == 1
        and _DIRECTIVE.search(text) is None
        and uses_libyaml_composer(text)
    )


def load_documents_parallel(
    text: str, *, min_chars: int = PARALLEL_MIN_CHARS, parts: int | None = None
) -> list[YamlDocument]:
    """What ``list(load_documents(text))`` gives, read in ``parts`` parts at once.

    By default as many parts as there are cores available, at most
    :data:`MAX_PARTS`, and a text under ``min_chars`` characters in one piece.
    """
    count = min(_cores(), MAX_PARTS) if parts is None else parts
    if not _parallel_allowed(text, min_chars, count):
        return list(load_documents(text))
    cuts = cut_points(text, count)
    if len(cuts) < 2:
        return list(load_documents(text))
    ends = [*cuts[1:], len(text)]
    readers = [_fork_reader(_part(text, start, end)) for start, end in zip(cuts[1:], ends[1:], strict=True)]
    documents = _read(text[: ends[0]])
    for reader in readers:
        documents += reader()
    if any(d.problem is not None and d.problem.syntax for d in documents):
        # Where a syntax error is found depends on where the text was cut: read it whole.
        return list(load_documents(text))
    return documents
