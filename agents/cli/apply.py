"""``kueuestream apply --kubeconfig PATH --broker ...``: decisions from Kafka written to a cluster."""

from __future__ import annotations

import argparse


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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.kube.apply_service import run_apply

    return run_apply(args.kubeconfig, args.broker, context=args.context, prefix=args.topic_prefix)
