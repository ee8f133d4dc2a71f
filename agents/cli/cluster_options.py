"""The flags of the commands that watch a cluster (``run --kubeconfig``, ``watch``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kueuestream.agents.kube.lease import LeaseSettings
    from kueuestream.agents.kube.watch_service import WatchOptions


IN_CLUSTER_HELP = (
    "in a pod: connect with its service account (the mounted token and KUBERNETES_SERVICE_HOST/PORT)"
)


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """One of ``--kubeconfig PATH`` and ``--in-cluster``."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--kubeconfig", metavar="PATH")
    where.add_argument("--in-cluster", action="store_true", help=IN_CLUSTER_HELP)


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
    namespace = getattr(args, "multikueue_namespace", None)
    multikueue = {"multikueue_namespace": namespace} if namespace else {}
    return WatchOptions(
        kubeconfig=args.kubeconfig,
        context=args.context,
        cluster=args.cluster,
        config_file=Path(args.config) if args.config else None,
        config_map=config_map,
        **multikueue,
    )


def add_lease_options(parser: argparse.ArgumentParser, default_name: str) -> None:
    """``--leader-elect`` and its Lease: replicas of one command wait while one of them works."""
    group = parser.add_argument_group(
        "leader election",
        "With --leader-elect, replicas share a coordination.k8s.io Lease: one works, the others wait "
        "and take over within --lease-duration when it stops.",
    )
    group.add_argument("--leader-elect", action="store_true", help="work only while holding the Lease")
    group.add_argument(
        "--lease",
        metavar="NAMESPACE/NAME",
        help=f"the Lease (default: $POD_NAMESPACE or kueuestream-system, /{default_name})",
    )
    group.add_argument(
        "--lease-identity", metavar="ID", help="this replica's name (default: host name and a random part)"
    )
    group.add_argument("--lease-duration", type=float, default=15.0, metavar="SECONDS")
    group.add_argument("--renew-deadline", type=float, default=10.0, metavar="SECONDS")
    group.add_argument("--retry-period", type=float, default=2.0, metavar="SECONDS")
    parser.set_defaults(lease_default_name=default_name)


def lease_settings(args: argparse.Namespace) -> tuple[LeaseSettings | None, list[str]]:
    """The Lease to hold (None without ``--leader-elect``), and what is wrong with the flags."""
    from kueuestream.agents.kube.lease import LeaseSettings, default_identity, default_namespace

    if not args.leader_elect:
        given = [f for f, v in (("--lease", args.lease), ("--lease-identity", args.lease_identity)) if v]
        return None, [f"{', '.join(given)} go with --leader-elect"] if given else []
    namespace, name = default_namespace(), args.lease_default_name
    if args.lease:
        namespace, sep, name = args.lease.partition("/")
        if not sep or not namespace or not name or "/" in name:
            return None, [f"--lease: expected NAMESPACE/NAME, not {args.lease!r}"]
    settings = LeaseSettings(
        namespace=namespace,
        name=name,
        identity=args.lease_identity or default_identity(),
        duration_s=args.lease_duration,
        renew_deadline_s=args.renew_deadline,
        retry_period_s=args.retry_period,
    )
    return settings, settings.problems()


def lease_or_report(args: argparse.Namespace) -> tuple[LeaseSettings | None, bool]:
    """:func:`lease_settings`, after an ``error:`` line per problem; False when there were any."""
    settings, problems = lease_settings(args)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return settings, not problems
