"""What the commands share: loading valid manifests, printing problems and YAML/JSON output."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TextIO

import orjson

from kueuestream.agents.cli.yaml_output import write_yaml
from kueuestream.agents.sources.checks import DocumentChecker, check_documents
from kueuestream.agents.sources.manifests import LoadedDoc, load_file, load_paths, manifest_files

EXIT_INVALID = 2


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


def load_checked(paths: Sequence[str]) -> list[LoadedDoc] | None:
    """The documents under PATHS, or None after printing every problem (one per line) on stderr."""
    loaded = load_paths(paths)
    report = check_documents(loaded.docs)
    problems = loaded.errors + report.problems
    _print(report.warnings, problems)
    return None if problems else loaded.docs


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
