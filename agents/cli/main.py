"""The ``kueuestream`` command line: every command's module registers its own sub-parser."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kueuestream.agents.cli import (
    admit,
    apply,
    crds,
    dashboard,
    drs,
    explain,
    get,
    multikueue,
    pending,
    publish,
    replay,
    run,
    simulate,
    transfer,
    validate,
    watch,
    worker,
)

COMMANDS = (
    admit,
    get,
    validate,
    drs,
    run,
    worker,
    publish,
    replay,
    explain,
    pending,
    multikueue,
    transfer,
    simulate,
    crds,
    watch,
    apply,
    dashboard,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kueuestream",
        description="Kueue-compatible quota and admission control plane, as an event-sourced pipeline.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
    except OSError as exc:
        # A folder that cannot be written, a full disk: what and why in one line, exit 2.
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    return result


if __name__ == "__main__":
    sys.exit(main())
