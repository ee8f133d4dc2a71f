"""``kueuestream watch --kubeconfig PATH --broker ...``: a cluster's objects into Kafka ``kueue.watch``."""

from __future__ import annotations

import argparse

from kueuestream.agents.cli.cluster_options import (
    add_cluster_options,
    add_connection_options,
    add_lease_options,
    lease_or_report,
    watch_options,
)
from kueuestream.agents.cli.kafka_options import add_broker_options, with_broker_settings
from kueuestream.agents.cli.metrics_options import add_metrics_option, metrics_port_usable


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "watch",
        help="list and watch a Kubernetes cluster into Kafka kueue.watch, for any number of workers",
    )
    add_connection_options(p)
    add_cluster_options(p)
    add_broker_options(p)
    add_lease_options(p, "kueuestream-watch")
    add_metrics_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.kube.watch_service import run_watch

    options = watch_options(args)
    lease, ok = lease_or_report(args)
    if options is None or not ok or not metrics_port_usable(args):
        return 2
    return with_broker_settings(
        args,
        lambda s: run_watch(
            options, s, prefix=args.topic_prefix, lease=lease, metrics_port=args.metrics_port
        ),
    )
