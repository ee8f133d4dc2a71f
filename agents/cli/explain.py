"""``kueuestream explain NAMESPACE/NAME LOG [-o text|json]``: why a Workload waits, from the log."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

import orjson

from kueuestream.agents.cli.kafka_options import add_kafka_options, settings_or_report
from kueuestream.agents.kafka_commands import EXIT_INVALID


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("explain", help="a Workload's timeline from the log, and what would admit it now")
    p.add_argument("workload", metavar="NAMESPACE/NAME")
    p.add_argument("log", metavar="LOG", help="an embedded log folder or kafka://HOST:PORT")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    p.add_argument("--topic-prefix", default="")
    add_kafka_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.audit.explain import ExplainError, explain_json
    from kueuestream.agents.audit.replay import is_kafka
    from kueuestream.streams.kafka_urls import redact_text
    from kueuestream.streams.log import LogError

    namespace, slash, name = str(args.workload).partition("/")
    if not slash or not namespace or not name or "/" in name:
        print(
            f"error: {args.workload!r}: expected NAMESPACE/NAME, for example default/my-job", file=sys.stderr
        )
        return EXIT_INVALID
    settings = None
    if is_kafka(args.log):
        settings = settings_or_report(args, args.log, broker_source="LOG")
        if settings is None:
            return EXIT_INVALID
    try:
        answer = explain_json(args.log, namespace, name, prefix=args.topic_prefix, kafka=settings)
    except (ExplainError, LogError, OSError, ValueError) as exc:
        message = settings.redact(str(exc)) if settings is not None else redact_text(str(exc))
        print(f"error: {message}", file=sys.stderr)
        return EXIT_INVALID
    if args.output == "json":
        sys.stdout.write(orjson.dumps(answer, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        write_text(answer, sys.stdout)
    return 0


def write_text(answer: dict[str, Any], out: TextIO) -> None:
    """The timeline one entry a line (the numbers indented below), then what would admit it."""
    wl = answer["workload"]
    print(f"Workload {wl['namespace']}/{wl['name']}", file=out)
    for entry in answer["timeline"]:
        cycles = entry.get("cycles")
        span = ""
        if cycles:
            span = (
                f"cycle {cycles['from']}"
                if cycles["from"] == cycles["to"]
                else f"cycles {cycles['from']}-{cycles['to']}"
            )
        head = "  ".join(x for x in (entry["time"] or "-", entry["event"], entry["reason"], span) if x)
        print(f"  {head}", file=out)
        if entry["message"]:
            print(f"      {entry['message']}", file=out)
        if "preemptor" in entry:
            print(f"      preempted by {entry['preemptor']} ({entry['policy']})", file=out)
        for victim in entry.get("victims", []):
            print(
                f"      preempts {victim['workload']} in {victim['clusterQueue']} ({victim['policy']})",
                file=out,
            )
        for ps in entry.get("podSets", []):
            flavors = ", ".join(f"{r}: {f}" for r, f in ps["flavors"].items())
            print(f"      pod set {ps['name']}: {flavors}", file=out)
        if entry.get("borrowing"):
            print(f"      borrowing at height {entry['borrowing']} of the cohort tree", file=out)
        for short in entry.get("short", []):
            print(
                f"      {short['resource']} in flavor {short['flavor']}: requested {short['requested']}, "
                f"available {short['available']}, short {short['short']} ({short['reason']}, "
                f"{short['level']} {short['levelName']})",
                file=out,
            )
    would = answer["wouldAdmit"]
    if would is None:
        return
    print("What would admit it now:", file=out)
    for option in would["quotaIncrease"]:
        more = ", ".join(f"{r} +{v}" for r, v in option["resources"].items())
        print(
            f"  nominal quota of ClusterQueue {option['clusterQueue']}, flavor {option['flavor']}: {more}",
            file=out,
        )
    if would["finishing"]:
        print(f"  the finishing of: {', '.join(would['finishing'])}", file=out)
    if "note" in would:
        print(f"  {would['note']}", file=out)
