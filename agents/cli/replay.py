"""``kueuestream replay LOG [--config FILE]``: re-run a recorded admission log, or a what-if."""

from __future__ import annotations

import argparse

from kueuestream.agents.cli.kafka_options import add_kafka_options, log_settings_or_report
from kueuestream.agents.kafka_commands import EXIT_INVALID


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("replay", help="re-run a recorded admission log; with --config, a what-if")
    p.add_argument("log", metavar="LOG", help="an embedded log folder or kafka://HOST:PORT")
    p.add_argument("--config", metavar="FILE", help="another Configuration or flavors to compare with")
    p.add_argument("--topic-prefix", default="")
    add_kafka_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.audit.replay import replay

    settings = log_settings_or_report(args)
    if not settings.valid:
        return EXIT_INVALID
    return replay(args.log, args.config, prefix=args.topic_prefix, kafka=settings.kafka)
