"""The `kueuestream` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import orjson
import yaml

from agents.loader import load_paths
from agents.validate import check_documents

EXIT_INVALID = 2


def _print_problems(lines: Sequence[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr)


def _load_valid(paths: Sequence[str]) -> list[Any] | None:
    loaded = load_paths(paths)
    report = check_documents(loaded.docs)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    problems = loaded.errors + report.problems
    if problems:
        _print_problems(problems)
        return None
    return [doc.manifest for doc in loaded.docs]


def _dump(obj: Any, output: str) -> str:
    if output == "json":
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n"
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, width=1_000_000)


def cmd_validate(args: argparse.Namespace) -> int:
    manifests = _load_valid(args.paths)
    if manifests is None:
        return EXIT_INVALID
    print(f"{len(manifests)} objects valid", file=sys.stderr)
    return 0


def cmd_admit(args: argparse.Namespace) -> int:
    from agents.embedded import admit_documents

    manifests = _load_valid(args.paths)
    if manifests is None:
        return EXIT_INVALID
    items = admit_documents(manifests)
    sys.stdout.write(_dump({"apiVersion": "v1", "kind": "List", "items": items}, args.output))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kueuestream",
        description="Kueue-compatible quota and admission control plane, as an event-sourced pipeline.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("admit", help="admit the Workloads in Kueue manifests and print their status")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders of YAML/JSON manifests")
    p.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    p.set_defaults(func=cmd_admit)

    p = sub.add_parser("validate", help="check manifests; exit 2 with one line per problem")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.set_defaults(func=cmd_validate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
