"""What the commands share: loading valid manifests, printing problems and YAML/JSON output."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import orjson
import yaml

from kueuestream.agents.sources.checks import check_documents
from kueuestream.agents.sources.manifests import load_paths

EXIT_INVALID = 2


def load_valid(paths: Sequence[str]) -> list[Any] | None:
    """The manifests under PATHS, or None after printing every problem (one per line) on stderr."""
    loaded = load_paths(paths)
    report = check_documents(loaded.docs)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    problems = loaded.errors + report.problems
    if problems:
        for line in problems:
            print(line, file=sys.stderr)
        return None
    return [doc.manifest for doc in loaded.docs]


def dump(obj: Any, output: str) -> str:
    if output == "json":
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n"
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, width=1_000_000)
