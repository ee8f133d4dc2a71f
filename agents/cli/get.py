"""``kueuestream get workloads|clusterqueues PATH... [-o table|wide|yaml|json]``: list like kubectl."""

from __future__ import annotations

import argparse
import sys
import time

from kueuestream.agents.cli.common import EXIT_INVALID, dump, load_valid
from kueuestream.agents.cli.tables import cluster_queue_table, workload_table

# Kueue's plural, singular and short names of each kind.
KINDS = {
    "workloads": "workloads",
    "workload": "workloads",
    "wl": "workloads",
    "clusterqueues": "clusterqueues",
    "clusterqueue": "clusterqueues",
    "cq": "clusterqueues",
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "get",
        help="admit the manifests, then list Workloads or ClusterQueues as kubectl get does",
    )
    p.add_argument("kind", choices=sorted(KINDS), metavar="KIND", help="workloads (wl) or clusterqueues (cq)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders of YAML/JSON manifests")
    p.add_argument("-o", "--output", choices=("table", "wide", "yaml", "json"), default="table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.embedded.runtime import admit

    manifests = load_valid(args.paths)
    if manifests is None:
        return EXIT_INVALID
    admitted = admit(manifests)
    if admitted.errors:
        for _, error in admitted.errors:
            print(f"{error.source}: {error.error}", file=sys.stderr)
        return EXIT_INVALID
    kind = KINDS[args.kind]
    items = admitted.workloads if kind == "workloads" else admitted.cluster_queues
    if args.output in ("yaml", "json"):
        dump({"apiVersion": "v1", "kind": "List", "items": items}, args.output, sys.stdout)
    elif kind == "workloads":
        sys.stdout.write(workload_table(items, int(time.time() * 1000), wide=args.output == "wide"))
    else:
        sys.stdout.write(cluster_queue_table(items, wide=args.output == "wide"))
    return 0
