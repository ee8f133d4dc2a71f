"""``kueuestream publish DIR --broker ...``: a folder of manifests into Kafka as watch events."""

from __future__ import annotations

import argparse

from kueuestream.agents.cli.kafka_options import add_broker_options, with_broker_settings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("publish", help="send a folder of manifests to Kafka as watch events")
    p.add_argument("dir", metavar="DIR")
    add_broker_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.faust_worker.publish import publish_dir

    return with_broker_settings(args, lambda s: publish_dir(args.dir, s, prefix=args.topic_prefix))
