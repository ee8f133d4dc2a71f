"""``kueuestream run``: the embedded runtime, admitting continuously from a folder or a cluster."""

from __future__ import annotations

import argparse
import sys

from kueuestream.agents.cli.cluster_options import (
    IN_CLUSTER_HELP,
    add_cluster_options,
    add_lease_options,
    lease_or_report,
    watch_options,
)
from kueuestream.agents.cli.metrics_options import add_metrics_option, metrics_port_usable
from kueuestream.agents.cli.shadow_options import add_shadow_options, shadow_report


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run", help="the embedded runtime: admit continuously from a folder of manifests or a cluster"
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--source", metavar="DIR", help="folder of manifests, watched")
    source.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="a cluster: watch it, write Workload status to it, run its queued Jobs",
    )
    source.add_argument("--in-cluster", action="store_true", help=f"a cluster, {IN_CLUSTER_HELP}")
    p.add_argument("--log-dir", metavar="DIR", help="the admission log (default ./.kueuestream)")
    folder = p.add_argument_group("with --source")
    folder.add_argument("--status-dir", metavar="DIR", help="one Kueue status file per Workload")
    folder.add_argument("--once", action="store_true", help="process what is there now, then stop")
    cluster = p.add_argument_group("with --kubeconfig or --in-cluster")
    add_cluster_options(cluster)
    cluster.add_argument(
        "--multikueue-namespace",
        metavar="NAMESPACE",
        help="on a MultiKueue manager: the namespace of the Secrets holding the workers' kubeconfigs "
        "(default kueue-system)",
    )
    add_metrics_option(cluster)
    add_shadow_options(cluster)
    add_lease_options(p, "kueuestream-run")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.source is not None:
        flags = {
            "context": "--context",
            "cluster": "--cluster",
            "config": "--config",
            "config_map": "--config-map",
            "metrics_port": "--metrics-port",
            "shadow": "--shadow",
            "shadow_report": "--shadow-report",
            "leader_elect": "--leader-elect",
            "multikueue_namespace": "--multikueue-namespace",
        }
        given = [flag for attr, flag in flags.items() if getattr(args, attr) not in (None, False, "")]
        if args.metrics_port == 0:  # 0 == False, yet the flag was given
            given.append("--metrics-port")
        if given:
            print(
                f"error: {', '.join(given)} go with --kubeconfig or --in-cluster, not --source",
                file=sys.stderr,
            )
            return 2
        from kueuestream.agents.embedded.runtime import run_source

        return run_source(args.source, args.status_dir, args.log_dir, once=args.once)
    if args.status_dir or args.once:
        print(
            "error: --status-dir and --once go with --source; a cluster keeps the status itself",
            file=sys.stderr,
        )
        return 2
    report, usable = shadow_report(args)
    if not usable:
        return 2
    if not metrics_port_usable(args):
        return 2
    if args.multikueue_namespace is not None:
        from kueuestream.admission.names import label_problem

        problem = label_problem(args.multikueue_namespace)
        if problem is not None:
            print(f"error: --multikueue-namespace: {problem}", file=sys.stderr)
            return 2
    from kueuestream.agents.kube.runtime import Operating, run_cluster

    options = watch_options(args)
    lease, ok = lease_or_report(args)
    if options is None or not ok:
        return 2
    operating = Operating(metrics_port=args.metrics_port, shadow=args.shadow, shadow_report=report)
    return run_cluster(options, args.log_dir, lease=lease, operating=operating)
