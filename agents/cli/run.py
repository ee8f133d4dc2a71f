"""``kueuestream run --source DIR``: the embedded runtime, admitting continuously from a folder."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="the embedded runtime: admit continuously from a folder of manifests")
    p.add_argument("--source", required=True, metavar="DIR", help="folder of manifests, watched")
    p.add_argument("--status-dir", metavar="DIR", help="one Kueue status file per Workload")
    p.add_argument("--log-dir", metavar="DIR", help="the admission log (default ./.kueuestream)")
    p.add_argument("--once", action="store_true", help="process what is there now, then stop")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.embedded.runtime import run_source

    return run_source(args.source, args.status_dir, args.log_dir, once=args.once)
