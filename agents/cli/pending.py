"""``kueuestream pending LOG (--cluster-queue NAME | --local-queue NAMESPACE/NAME)``: the queue's order."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from kueuestream.agents.cli.common import namespaced_name_or_report
from kueuestream.agents.cli.kafka_options import add_kafka_options, log_settings_or_report
from kueuestream.agents.cli.tables import render
from kueuestream.agents.kafka_commands import EXIT_INVALID

COLUMNS = ["position", "namespace", "name", "localqueue", "position in lq", "priority", "reason", "message"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "pending",
        help="the pending Workloads of a ClusterQueue or LocalQueue, in the order the scheduler takes them",
    )
    p.add_argument("log", metavar="LOG", help="an embedded log folder or kafka://HOST:PORT")
    queue = p.add_mutually_exclusive_group(required=True)
    queue.add_argument("--cluster-queue", metavar="NAME")
    queue.add_argument("--local-queue", metavar="NAMESPACE/NAME")
    p.add_argument("-o", "--output", choices=["table", "json"], default="table")
    p.add_argument("--limit", type=int, default=1000, help="at most this many (default 1000, at most 100000)")
    p.add_argument("--offset", type=int, default=0, help="skip this many first (default 0)")
    p.add_argument("--topic-prefix", default="")
    add_kafka_options(p)
    p.set_defaults(func=run)


def table(summary: dict[str, Any]) -> str:
    rows = [
        [
            str(item["positionInClusterQueue"]),
            item["metadata"]["namespace"],
            item["metadata"]["name"],
            item["localQueueName"],
            str(item["positionInLocalQueue"]),
            str(item["priority"]),
            item["reason"],
            item["message"],
        ]
        for item in summary["items"]
    ]
    return render(COLUMNS, rows)


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.audit.pending import QueueNotFound, pending_json
    from kueuestream.streams.kafka_urls import redact_text
    from kueuestream.streams.log import LogError

    local_queue = None
    if args.local_queue is not None:
        local_queue = namespaced_name_or_report(
            args.local_queue, f"--local-queue {args.local_queue}", "team-a/main"
        )
        if local_queue is None:
            return EXIT_INVALID
    settings = log_settings_or_report(args)
    if not settings.valid:
        return EXIT_INVALID
    try:
        summary = pending_json(
            args.log,
            cluster_queue=args.cluster_queue,
            local_queue=local_queue,
            limit=args.limit,
            offset=args.offset,
            prefix=args.topic_prefix,
            kafka=settings.kafka,
        )
    except QueueNotFound as exc:
        print(f"error: {exc} (in {redact_text(args.log)})", file=sys.stderr)
        return EXIT_INVALID
    except (LogError, OSError, ValueError) as exc:
        print(f"error: {settings.redact(str(exc))}", file=sys.stderr)
        return EXIT_INVALID
    if args.output == "json":
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(table(summary))
    return 0
