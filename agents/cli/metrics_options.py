"""``--metrics-port``, shared by ``run --kubeconfig``, ``watch`` and ``apply``."""

from __future__ import annotations

import argparse
import sys


def add_metrics_option(container: argparse._ActionsContainer) -> None:
    container.add_argument(
        "--metrics-port",
        metavar="PORT",
        type=int,
        help="serve /metrics, /healthz and /readyz over HTTP on PORT (0: any free port, printed)",
    )


def metrics_port_usable(args: argparse.Namespace) -> bool:
    """Whether ``--metrics-port`` names a port (else an ``error:`` line was printed)."""
    port = args.metrics_port
    if port is not None and not 0 <= port <= 65535:
        print(f"error: --metrics-port {port}: a port is 0 to 65535 (0: any free port)", file=sys.stderr)
        return False
    return True
