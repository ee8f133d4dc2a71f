"""``kueuestream validate PATH...``: exit 0 when valid, else 2 with one line per problem."""

from __future__ import annotations

import argparse
import sys

from kueuestream.agents.cli.common import EXIT_INVALID, count_valid


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("validate", help="check manifests; exit 2 with one line per problem")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    count = count_valid(args.paths)
    if count is None:
        return EXIT_INVALID
    print(f"{count} objects valid", file=sys.stderr)
    return 0
