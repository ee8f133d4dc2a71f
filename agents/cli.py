"""The `kueuestream` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import orjson
import yaml

from agents.loader import load_paths
from agents.validate import check_documents

EXIT_INVALID = 2


def _print_problems(lines: Sequence[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr)


def _load_valid(paths: Sequence[str]) -> list[Any] | None:
    loaded = load_paths(paths)
    report = check_documents(loaded.docs)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    problems = loaded.errors + report.problems
    if problems:
        _print_problems(problems)
        return None
    return [doc.manifest for doc in loaded.docs]


def _dump(obj: Any, output: str) -> str:
    if output == "json":
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n"
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, width=1_000_000)


def cmd_validate(args: argparse.Namespace) -> int:
    manifests = _load_valid(args.paths)
    if manifests is None:
        return EXIT_INVALID
    print(f"{len(manifests)} objects valid", file=sys.stderr)
    return 0


def cmd_admit(args: argparse.Namespace) -> int:
    from agents.embedded import admit_documents

    manifests = _load_valid(args.paths)
    if manifests is None:
        return EXIT_INVALID
    items = admit_documents(manifests)
    sys.stdout.write(_dump({"apiVersion": "v1", "kind": "List", "items": items}, args.output))
    return 0


def cmd_drs(args: argparse.Namespace) -> int:
    from agents.drs_command import run_drs

    return run_drs(list(args.paths), args.output)


def cmd_run(args: argparse.Namespace) -> int:
    from agents.embedded import run_source

    return run_source(args.source, args.status_dir, args.log_dir, once=args.once)


def cmd_worker(args: argparse.Namespace) -> int:
    from agents.faust_app import run_worker

    return run_worker(args.broker, app_id=args.app_id, prefix=args.topic_prefix, datadir=args.datadir)


def cmd_publish(args: argparse.Namespace) -> int:
    from agents.publish import publish_dir

    return publish_dir(args.dir, args.broker, prefix=args.topic_prefix)


def cmd_replay(args: argparse.Namespace) -> int:
    from agents.replay import replay

    return replay(args.log, args.config, prefix=args.topic_prefix)


def cmd_export(args: argparse.Namespace) -> int:
    from agents.replay import export_log

    return export_log(args.broker, args.out, prefix=args.topic_prefix)


def cmd_import(args: argparse.Namespace) -> int:
    from agents.replay import import_log

    return import_log(args.dir, args.broker)


def cmd_simulate(args: argparse.Namespace) -> int:
    from agents.simulate_command import run_simulate

    return run_simulate(
        args.generator,
        rangespec=args.rangespec,
        configs=list(args.config or []),
        out=args.out,
        broker=args.broker,
        progress=not args.no_progress,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kueuestream",
        description="Kueue-compatible quota and admission control plane, as an event-sourced pipeline.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("admit", help="admit the Workloads in Kueue manifests and print their status")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders of YAML/JSON manifests")
    p.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    p.set_defaults(func=cmd_admit)

    p = sub.add_parser("validate", help="check manifests; exit 2 with one line per problem")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("drs", help="dominant resource shares of every ClusterQueue and Cohort")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    p.set_defaults(func=cmd_drs)

    p = sub.add_parser("run", help="the embedded runtime: admit continuously from a folder of manifests")
    p.add_argument("--source", required=True, metavar="DIR", help="folder of manifests, watched")
    p.add_argument("--status-dir", metavar="DIR", help="one Kueue status file per Workload")
    p.add_argument("--log-dir", metavar="DIR", help="the admission log (default ./.kueuestream)")
    p.add_argument("--once", action="store_true", help="process what is there now, then stop")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("worker", help="a Faust worker on Kafka; any number share the shards")
    p.add_argument("--broker", required=True, metavar="kafka://HOST:PORT")
    p.add_argument("--app-id", default="kueuestream")
    p.add_argument("--topic-prefix", default="")
    p.add_argument("--datadir", default=None, help="Faust's local state directory")
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("publish", help="send a folder of manifests to Kafka as watch events")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--broker", required=True, metavar="kafka://HOST:PORT")
    p.add_argument("--topic-prefix", default="")
    p.set_defaults(func=cmd_publish)

    p = sub.add_parser("replay", help="re-run a recorded admission log; with --config, a what-if")
    p.add_argument("log", metavar="LOG", help="an embedded log folder or kafka://HOST:PORT")
    p.add_argument("--config", metavar="FILE", help="another Configuration or flavors to compare with")
    p.add_argument("--topic-prefix", default="")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("export", help="copy the logs from Kafka into a local log folder")
    p.add_argument("--broker", required=True, metavar="kafka://HOST:PORT")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--topic-prefix", default="")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="copy a local log folder into Kafka")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--broker", required=True, metavar="kafka://HOST:PORT")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("simulate", help="run a Kueue scheduler-benchmark scenario in virtual time")
    p.add_argument("generator", metavar="GENERATOR.yaml")
    p.add_argument("--rangespec", metavar="RANGESPEC.yaml", help="Kueue's expected ranges to check")
    p.add_argument(
        "--config",
        action="append",
        metavar="FILE",
        help="a Kueue Configuration to run under; give it twice to compare two side by side",
    )
    p.add_argument("--out", metavar="DIR", default="simulation", help="summary, stats and plots")
    p.add_argument("--broker", metavar="kafka://HOST:PORT", help="run through Kafka instead of embedded")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_simulate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
