"""``kueuestream multikueue status LOG [-o table|json]``: worker clusters and where each Workload runs."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import orjson

from kueuestream.agents.cli.kafka_options import add_kafka_options, log_settings_or_report
from kueuestream.agents.cli.tables import render
from kueuestream.agents.kafka_commands import EXIT_INVALID

CLUSTER_COLUMNS = ["cluster", "active", "reason", "lag", "dispatched", "running", "lost"]
WORKLOAD_COLUMNS = ["namespace", "name", "state", "cluster", "copies"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "multikueue", help="MultiKueue: the worker clusters and the Workloads dispatched to them"
    )
    commands = p.add_subparsers(dest="multikueue_command", required=True, metavar="COMMAND")
    status = commands.add_parser(
        "status",
        help="each worker cluster (active, lag, Workloads dispatched / running / lost) and where "
        "each Workload runs, from the log",
    )
    status.add_argument("log", metavar="LOG", help="an embedded log folder or kafka://HOST:PORT")
    status.add_argument("-o", "--output", choices=["table", "json"], default="table")
    status.add_argument("--topic-prefix", default="")
    add_kafka_options(status)
    status.set_defaults(func=run_status)


def _active(value: bool | None) -> str:
    return "Unknown" if value is None else str(value)


def table(status: dict[str, Any]) -> str:
    clusters = [
        [
            c["name"],
            _active(c["active"]),
            c["reason"],
            str(c["lag"]),
            str(c["dispatched"]),
            str(c["running"]),
            str(c["lost"]),
        ]
        for c in status["clusters"]
    ]
    workloads = [
        [w["namespace"], w["name"], w["state"], w["cluster"], ",".join(w["copies"])]
        for w in status["workloads"]
    ]
    return render(CLUSTER_COLUMNS, clusters) + "\n" + render(WORKLOAD_COLUMNS, workloads)


def run_status(args: argparse.Namespace) -> int:
    from kueuestream.agents.audit.multikueue_status import status_of_log
    from kueuestream.streams.log import LogError

    settings = log_settings_or_report(args)
    if not settings.valid:
        return EXIT_INVALID
    try:
        status = asyncio.run(status_of_log(args.log, args.topic_prefix, settings.kafka))
    except (LogError, OSError, ValueError) as exc:
        print(f"error: {settings.redact(str(exc))}", file=sys.stderr)
        return EXIT_INVALID
    if args.output == "json":
        sys.stdout.write(orjson.dumps(status, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(table(status))
    return 0
