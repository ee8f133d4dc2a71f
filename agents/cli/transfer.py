"""``kueuestream export`` and ``import``: copy the logs between Kafka and a local log folder."""

from __future__ import annotations

import argparse

from kueuestream.agents.cli.kafka_options import add_broker_options, with_broker_settings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("export", help="copy the logs from Kafka into a local log folder")
    p.add_argument("--out", required=True, metavar="DIR")
    add_broker_options(p, topic_prefix_help="prefix of the topics read (default none)")
    p.set_defaults(func=run_export)

    p = sub.add_parser("import", help="copy a local log folder into Kafka")
    p.add_argument("dir", metavar="DIR")
    add_broker_options(p, topic_prefix_help="prefix of the topics written (default none)")
    p.set_defaults(func=run_import)


def run_export(args: argparse.Namespace) -> int:
    from kueuestream.agents.audit.transfer import export_log

    return with_broker_settings(args, lambda s: export_log(s, args.out, prefix=args.topic_prefix))


def run_import(args: argparse.Namespace) -> int:
    from kueuestream.agents.audit.transfer import import_log

    return with_broker_settings(args, lambda s: import_log(args.dir, s, prefix=args.topic_prefix))
