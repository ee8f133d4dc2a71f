"""``kueuestream explain NAMESPACE/NAME LOG [-o text|json]``: why a Workload waits, from the log."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

import orjson

from kueuestream.agents.cli.common import namespaced_name_or_report
from kueuestream.agents.cli.kafka_options import add_kafka_options, log_settings_or_report
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
    from kueuestream.streams.log import LogError

    workload = namespaced_name_or_report(str(args.workload), repr(args.workload), "default/my-job")
    if workload is None:
        return EXIT_INVALID
    namespace, name = workload
    settings = log_settings_or_report(args)
    if not settings.valid:
        return EXIT_INVALID
    try:
        answer = explain_json(args.log, namespace, name, prefix=args.topic_prefix, kafka=settings.kafka)
    except (ExplainError, LogError, OSError, ValueError) as exc:
        print(f"error: {settings.redact(str(exc))}", file=sys.stderr)
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
        for name, after in entry.get("resumedAfter", {}).items():
            print(
                f"      pod set {name}: flavor search resumed after {', '.join(after)}, "
                "where the previous cycle's stopped",
                file=out,
            )
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
