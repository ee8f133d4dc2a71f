"""The flags of shadow mode, shared by ``run --kubeconfig`` and ``apply``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_shadow_options(container: argparse._ActionsContainer) -> None:
    container.add_argument(
        "--shadow",
        action="store_true",
        help="write nothing to the cluster; report where the live Workload status differs from ours",
    )
    container.add_argument(
        "--shadow-report", metavar="FILE", help="with --shadow: keep a JSON report in FILE"
    )


def shadow_report(args: argparse.Namespace) -> tuple[Path | None, bool]:
    """The report file asked for, and whether the flags can be used (else an ``error:`` line was printed)."""
    if not args.shadow_report:
        return None, True
    if not args.shadow:
        print("error: --shadow-report goes with --shadow", file=sys.stderr)
        return None, False
    report = Path(args.shadow_report)
    if not report.parent.is_dir():
        print(f"error: --shadow-report {report}: no folder {report.parent}", file=sys.stderr)
        return None, False
    return report, True
