"""``kueuestream simulate``: Kueue's scheduler benchmarks in virtual time.

The simulator (:mod:`kueuestream.agents.simulator.command`) and its plotting
libraries load only when the command runs.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("simulate", help="run a Kueue scheduler-benchmark scenario in virtual time")
    p.add_argument("generator", metavar="GENERATOR.yaml")
    p.add_argument("--rangespec", metavar="RANGESPEC.yaml", help="Kueue's expected ranges to check")
    p.add_argument(
        "--config",
        action="append",
        metavar="FILE",
        help="a Kueue Configuration to run under; give it twice to compare two side by side",
    )
    p.add_argument("--out", metavar="DIR", default="simulation", help="summary, stats and plots")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.simulator.command import run_simulate

    return run_simulate(
        args.generator,
        rangespec=args.rangespec,
        configs=list(args.config or []),
        out=args.out,
        progress=not args.no_progress,
    )
