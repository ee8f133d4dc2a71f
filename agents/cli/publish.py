"""``kueuestream publish DIR --broker ...``: a folder of manifests into Kafka as watch events."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("publish", help="send a folder of manifests to Kafka as watch events")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--broker", required=True, metavar="kafka://HOST:PORT")
    p.add_argument("--topic-prefix", default="")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.faust_worker.publish import publish_dir

    return publish_dir(args.dir, args.broker, prefix=args.topic_prefix)
