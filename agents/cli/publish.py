"""``kueuestream publish DIR --broker ...``: a folder of manifests into Kafka as watch events."""

from __future__ import annotations

import argparse

from kueuestream.agents.cli.kafka_options import add_kafka_options, settings_or_report
from kueuestream.agents.kafka_commands import EXIT_INVALID


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("publish", help="send a folder of manifests to Kafka as watch events")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--broker", required=True, metavar="kafka://HOST:PORT")
    p.add_argument("--topic-prefix", default="")
    add_kafka_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.faust_worker.publish import publish_dir

    settings = settings_or_report(args, args.broker)
    if settings is None:
        return EXIT_INVALID
    return publish_dir(args.dir, settings, prefix=args.topic_prefix)
