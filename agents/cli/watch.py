"""``kueuestream watch --kubeconfig PATH --broker ...``: a cluster's objects into Kafka ``kueue.watch``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kueuestream.agents.cli.kafka_options import add_kafka_options, settings_or_report
from kueuestream.agents.kafka_commands import EXIT_INVALID


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "watch",
        help="list and watch a Kubernetes cluster into Kafka kueue.watch, for any number of workers",
    )
    p.add_argument("--kubeconfig", required=True, metavar="PATH")
    p.add_argument("--context", metavar="NAME", help="kubeconfig context (default: its current context)")
    p.add_argument(
        "--cluster", metavar="NAME", help="cluster name in the watch events (default: the kubeconfig's)"
    )
    p.add_argument("--broker", required=True, metavar="kafka://HOST:PORT")
    p.add_argument("--topic-prefix", default="")
    config = p.add_mutually_exclusive_group()
    config.add_argument(
        "--config", metavar="FILE", help="Kueue Configuration file, read at start as Kueue reads it"
    )
    config.add_argument(
        "--config-map",
        metavar="NAMESPACE/NAME",
        help="ConfigMap carrying the Kueue Configuration (as kueue-manager-config does), watched",
    )
    add_kafka_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.kube.watch_service import WatchOptions, parse_config_map, run_watch

    try:
        config_map = parse_config_map(args.config_map) if args.config_map else None
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    settings = settings_or_report(args, args.broker)
    if settings is None:
        return EXIT_INVALID
    options = WatchOptions(
        kubeconfig=args.kubeconfig,
        context=args.context,
        cluster=args.cluster,
        config_file=Path(args.config) if args.config else None,
        config_map=config_map,
    )
    return run_watch(options, settings, prefix=args.topic_prefix)
