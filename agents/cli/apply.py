"""``kueuestream apply --kubeconfig PATH --broker ...``: decisions from Kafka written to a cluster."""

from __future__ import annotations

import argparse

from kueuestream.agents.cli.cluster_options import add_connection_options, add_lease_options, lease_or_report
from kueuestream.agents.cli.kafka_options import add_broker_options, with_broker_settings
from kueuestream.agents.cli.metrics_options import add_metrics_option, metrics_port_usable
from kueuestream.agents.cli.shadow_options import add_shadow_options, shadow_report


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "apply",
        help="write the decisions in Kafka to a cluster's Workloads and run its queued Jobs "
        "(beside kueuestream watch and workers started with --cluster)",
    )
    add_connection_options(p)
    add_lease_options(p, "kueuestream-apply")
    p.add_argument("--context", metavar="NAME", help="kubeconfig context (default: its current context)")
    add_broker_options(p)
    add_shadow_options(p)
    add_metrics_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.kube.apply_service import run_apply

    lease, ok = lease_or_report(args)
    report, usable = shadow_report(args)
    if not ok or not usable or not metrics_port_usable(args):
        return 2
    return with_broker_settings(
        args,
        lambda s: run_apply(
            args.kubeconfig,
            s,
            context=args.context,
            prefix=args.topic_prefix,
            lease=lease,
            shadow=args.shadow,
            shadow_report=report,
            metrics_port=args.metrics_port,
        ),
    )
