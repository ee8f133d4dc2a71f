"""``kueuestream admit PATH... [-o yaml|json]``: admit to quiescence, print a ``kind: List`` of Workloads."""

from __future__ import annotations

import argparse
import sys

from kueuestream.agents.cli.common import EXIT_INVALID, dump, load_valid


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("admit", help="admit the Workloads in Kueue manifests and print their status")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders of YAML/JSON manifests")
    p.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.embedded.runtime import admit_documents

    manifests = load_valid(args.paths)
    if manifests is None:
        return EXIT_INVALID
    items = admit_documents(manifests)
    sys.stdout.write(dump({"apiVersion": "v1", "kind": "List", "items": items}, args.output))
    return 0
