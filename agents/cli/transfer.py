"""``kueuestream export`` and ``import``: copy the logs between Kafka and a local log folder."""

from __future__ import annotations

import argparse

from kueuestream.agents.cli.kafka_options import add_kafka_options, settings_or_report
from kueuestream.agents.kafka_commands import EXIT_INVALID


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("export", help="copy the logs from Kafka into a local log folder")
    p.add_argument("--broker", required=True, metavar="kafka://HOST:PORT")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--topic-prefix", default="")
    add_kafka_options(p)
    p.set_defaults(func=run_export)

    p = sub.add_parser("import", help="copy a local log folder into Kafka")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--broker", required=True, metavar="kafka://HOST:PORT")
    p.add_argument("--topic-prefix", default="", help="prefix of the topics written (default none)")
    add_kafka_options(p)
    p.set_defaults(func=run_import)


def run_export(args: argparse.Namespace) -> int:
    from kueuestream.agents.audit.transfer import export_log

    settings = settings_or_report(args, args.broker)
    if settings is None:
        return EXIT_INVALID
    return export_log(settings, args.out, prefix=args.topic_prefix)


def run_import(args: argparse.Namespace) -> int:
    from kueuestream.agents.audit.transfer import import_log

    settings = settings_or_report(args, args.broker)
    if settings is None:
        return EXIT_INVALID
    return import_log(args.dir, settings, prefix=args.topic_prefix)
