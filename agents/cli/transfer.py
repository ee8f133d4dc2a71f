"""``kueuestream export`` and ``import``: copy the logs between Kafka and a local log folder."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("export", help="copy the logs from Kafka into a local log folder")
    p.add_argument("--broker", required=True, metavar="kafka://HOST:PORT")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--topic-prefix", default="")
    p.set_defaults(func=run_export)

    p = sub.add_parser("import", help="copy a local log folder into Kafka")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--broker", required=True, metavar="kafka://HOST:PORT")
    p.set_defaults(func=run_import)


def run_export(args: argparse.Namespace) -> int:
    from kueuestream.agents.audit.transfer import export_log

    return export_log(args.broker, args.out, prefix=args.topic_prefix)


def run_import(args: argparse.Namespace) -> int:
    from kueuestream.agents.audit.transfer import import_log

    return import_log(args.dir, args.broker)
