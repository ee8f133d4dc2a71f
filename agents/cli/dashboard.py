"""``kueuestream dashboard LOG [--port N]``: the live dashboard of a log, over HTTP.

LOG is an embedded log folder or ``kafka://HOST:PORT``, as for ``replay``. The
page is served at ``/dashboard`` on the operators' HTTP endpoint (with
``/metrics``, ``/healthz`` and ``/readyz``; ready once the log has been read
through once) and follows the log as decisions land in it. It runs until
SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import sys

from kueuestream.agents.cli.kafka_options import add_kafka_options, log_settings_or_report
from kueuestream.agents.kafka_commands import EXIT_INVALID

DEFAULT_PORT = 8080


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("dashboard", help="serve a live web dashboard of an admission log")
    p.add_argument("log", metavar="LOG", help="an embedded log folder or kafka://HOST:PORT")
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT}; 0: any free port)"
    )
    p.add_argument("--address", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--topic-prefix", default="")
    add_kafka_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    if not 0 <= args.port <= 65535:
        print(f"error: --port {args.port}: a port is 0 to 65535 (0: any free port)", file=sys.stderr)
        return EXIT_INVALID
    settings = log_settings_or_report(args)
    if not settings.valid:
        return EXIT_INVALID
    if settings.kafka is None and not Path(args.log).is_dir():
        print(
            f"error: LOG {args.log}: no embedded log folder there (expected a directory, "
            "or kafka://HOST:PORT)",
            file=sys.stderr,
        )
        return EXIT_INVALID
    from kueuestream.agents.dashboard.serve import serve_log

    return serve_log(args.log, args.address, args.port, prefix=args.topic_prefix, kafka=settings.kafka)
