"""``kueuestream apply --kubeconfig PATH --broker ...``: decisions from Kafka written to a cluster."""

from __future__ import annotations

import argparse

from kueuestream.agents.cli.kafka_options import add_kafka_options, settings_or_report
from kueuestream.agents.kafka_commands import EXIT_INVALID


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "apply",
        help="write the decisions in Kafka to a cluster's Workloads and run its queued Jobs "
        "(beside kueuestream watch and workers started with --cluster)",
    )
    p.add_argument("--kubeconfig", required=True, metavar="PATH")
    p.add_argument("--context", metavar="NAME", help="kubeconfig context (default: its current context)")
    p.add_argument("--broker", required=True, metavar="kafka://HOST:PORT")
    p.add_argument("--topic-prefix", default="")
    add_kafka_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.kube.apply_service import run_apply

    settings = settings_or_report(args, args.broker)
    if settings is None:
        return EXIT_INVALID
    return run_apply(args.kubeconfig, settings, context=args.context, prefix=args.topic_prefix)
