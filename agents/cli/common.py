"""What the commands share: loading valid manifests, printing problems and YAML/JSON output."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TextIO

import orjson

from kueuestream.agents.cli.yaml_output import write_yaml
from kueuestream.agents.sources.checks import DocumentChecker, check_documents
from kueuestream.agents.sources.manifests import LoadedDoc, load_file, load_paths, manifest_files
from kueuestream.streams.codec import contains_float

EXIT_INVALID = 2


def namespaced_name_or_report(text: str, shown: str, example: str) -> tuple[str, str] | None:
    """``(namespace, name)`` of a ``NAMESPACE/NAME`` argument, or None after one ``error:`` line on
    stderr that names it as ``shown`` and gives ``example``."""
    namespace, slash, name = text.partition("/")
    if slash and namespace and name and "/" not in name:
        return namespace, name
    print(f"error: {shown}: expected NAMESPACE/NAME, for example {example}", file=sys.stderr)
    return None


def _print(warnings: list[str], problems: list[str]) -> None:
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for line in problems:
        print(line, file=sys.stderr)


def count_valid(paths: Sequence[str]) -> int | None:
    """How many objects are under PATHS, or None after printing every problem (one per line) on stderr.

    Reads file after file, keeping none of them: what ``validate`` needs, in
    little memory however large the input.
    """
    files, errors = manifest_files(paths)
    checker = DocumentChecker()
    for path in files:
        loaded = load_file(path)
        errors += loaded.errors
        checker.check(loaded.docs)
    report = checker.finish()
    problems = errors + report.problems
    _print(report.warnings, problems)
    return None if problems else checker.count


def _as_logged(doc: LoadedDoc) -> LoadedDoc:
    """``doc`` with its manifest as the pipeline's log gives it back: keys sorted at every level.

    A manifest with a float keeps its own (the log holds the float as text, so
    the two would decode differently anyway), and so does one orjson cannot write.
    """
    manifest = doc.manifest
    if contains_float(manifest):
        return doc
    try:
        logged = orjson.loads(orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS))
    except orjson.JSONEncodeError:
        return doc
    return LoadedDoc(doc.path, doc.index, logged)


def load_checked(paths: Sequence[str], *, as_logged: bool = False) -> list[LoadedDoc] | None:
    """The documents under PATHS, or None after printing every problem (one per line) on stderr.

    With ``as_logged`` the manifests come back as the pipeline's log holds them
    (see :func:`_as_logged`), and are checked so: inside
    :func:`~kueuestream.admission.decode.remembering_every_outcome`, the
    pipeline then finds every manifest already decoded. The problems and
    warnings printed are still those of the manifests as written.
    """
    loaded = load_paths(paths)
    docs = [_as_logged(doc) for doc in loaded.docs] if as_logged else loaded.docs
    report = check_documents(docs)
    if as_logged and (report.problems or report.warnings):
        # Told about in the order the user wrote things in.
        report = check_documents(loaded.docs)
    problems = loaded.errors + report.problems
    _print(report.warnings, problems)
    return None if problems else docs


def load_valid(paths: Sequence[str]) -> list[Any] | None:
    """The manifests under PATHS, or None after printing every problem (one per line) on stderr."""
    docs = load_checked(paths)
    return None if docs is None else [doc.manifest for doc in docs]


def dump(obj: Any, output: str, stream: TextIO) -> None:
    """Write ``obj`` to ``stream`` as YAML or JSON."""
    if output == "json":
        stream.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        write_yaml(obj, stream)
