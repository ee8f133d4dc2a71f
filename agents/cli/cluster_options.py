"""The flags of the commands that watch a cluster (``run --kubeconfig``, ``watch``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kueuestream.agents.kube.watch_service import WatchOptions


def add_cluster_options(container: argparse._ActionsContainer) -> None:
    """``--context``, ``--cluster`` and one of ``--config`` / ``--config-map`` (``--kubeconfig`` apart)."""
    container.add_argument(
        "--context", metavar="NAME", help="kubeconfig context (default: its current context)"
    )
    container.add_argument(
        "--cluster", metavar="NAME", help="cluster name in the watch events (default: the kubeconfig's)"
    )
    config = container.add_mutually_exclusive_group()
    config.add_argument(
        "--config", metavar="FILE", help="Kueue Configuration file, read at start as Kueue reads it"
    )
    config.add_argument(
        "--config-map",
        metavar="NAMESPACE/NAME",
        help="ConfigMap carrying the Kueue Configuration (as kueue-manager-config does), watched",
    )


def watch_options(args: argparse.Namespace) -> WatchOptions | None:
    """What to watch, from the flags; None after an ``error:`` line when ``--config-map`` is malformed."""
    from kueuestream.agents.kube.watch_service import WatchOptions, parse_config_map

    try:
        config_map = parse_config_map(args.config_map) if args.config_map else None
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    return WatchOptions(
        kubeconfig=args.kubeconfig,
        context=args.context,
        cluster=args.cluster,
        config_file=Path(args.config) if args.config else None,
        config_map=config_map,
    )
