"""``kueuestream worker --broker kafka://HOST:PORT``: a Faust worker; any number share the shards."""

from __future__ import annotations

import argparse
import re

from kueuestream.agents.cli.kafka_options import add_broker_options, with_broker_settings
from kueuestream.agents.cli.metrics_options import add_metrics_option, metrics_port_usable
from kueuestream.agents.faust_worker import DEFAULT_SNAPSHOT_EVERY

# What the broker accepts as a group.instance.id: the rule for topic names.
_INSTANCE_ID = re.compile(r"(?!\.{1,2}$)[A-Za-z0-9._-]{1,249}")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("worker", help="a Faust worker on Kafka; any number share the shards")
    p.add_argument("--app-id", default="kueuestream")
    p.add_argument("--datadir", default=None, help="Faust's local state directory")
    p.add_argument("--loglevel", default="warning", help="Faust's log level (debug, info, warning, error)")
    p.add_argument(
        "--no-clock",
        action="store_true",
        help="write no clock ticks: time moves only with the events the sources write",
    )
    p.add_argument(
        "--cluster",
        action="store_true",
        help="the watch comes from a cluster (kueuestream watch): its job integration creates the "
        "Workloads and stops the jobs, and kueuestream apply writes the decisions",
    )
    p.add_argument(
        "--snapshot-every",
        type=_records,
        default=DEFAULT_SNAPSHOT_EVERY,
        metavar="RECORDS",
        help="write a snapshot of an admission partition's state every RECORDS records, so a restart "
        f"reads only the log after it (default {DEFAULT_SNAPSHOT_EVERY}; 0: none)",
    )
    p.add_argument(
        "--instance-id",
        type=_instance_id,
        default=None,
        metavar="ID",
        help="join the consumer group as a static member under ID (Kafka's group.instance.id), unique "
        "per worker and kept across its restarts (a pod's name): a worker that restarts within the 6 s "
        "session timeout takes its partitions back with no rebalance, and the other workers go on",
    )
    add_broker_options(p)
    add_metrics_option(p)
    p.set_defaults(func=run)


def _records(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a record count: give a whole number, 0 or more")
    return value


def _instance_id(text: str) -> str:
    if not _INSTANCE_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a group instance id: use 1-249 letters, digits, '.', '_' or '-' "
            "(not '.' or '..' alone)"
        )
    return text


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.faust_worker.app import run_worker

    if not metrics_port_usable(args):
        return 2
    return with_broker_settings(
        args,
        lambda settings: run_worker(
            settings,
            app_id=args.app_id,
            prefix=args.topic_prefix,
            datadir=args.datadir,
            loglevel=args.loglevel,
            clock=not args.no_clock,
            cluster=args.cluster,
            metrics_port=args.metrics_port,
            snapshot_every=args.snapshot_every,
            instance_id=args.instance_id,
        ),
    )
