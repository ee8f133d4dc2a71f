"""``kueuestream admit PATH... [-o yaml|json|table|wide]``: admit to quiescence, print the Workloads.

As a ``kind: List`` (YAML by default, or JSON), or as ``kubectl get workloads -A`` prints them.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from typing import Any

from kueuestream.agents.cli.collector import without_cyclic_gc
from kueuestream.agents.cli.common import EXIT_INVALID, dump, load_checked
from kueuestream.agents.cli.tables import workload_table
from kueuestream.agents.sources.manifests import LoadedDoc


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("admit", help="admit the Workloads in Kueue manifests and print their status")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders of YAML/JSON manifests")
    p.add_argument("-o", "--output", choices=("yaml", "json", "table", "wide"), default="yaml")
    p.set_defaults(func=without_cyclic_gc(run))


def _handed_over(docs: list[LoadedDoc]) -> Iterator[Any]:
    """The manifests, each dropped from ``docs`` as it is taken: once in the log, they are not kept twice."""
    docs.reverse()
    while docs:
        yield docs.pop().manifest


def run(args: argparse.Namespace) -> int:
    from kueuestream.admission.decode import remembering_every_outcome

    # Each manifest is decoded once, by the checks, and found again by the pipeline.
    with remembering_every_outcome():
        return _admit(args)


def _admit(args: argparse.Namespace) -> int:
    from kueuestream.agents.embedded.runtime import admit
    from kueuestream.agents.sources.watch_events import ObjId, identify

    docs = load_checked(args.paths, as_logged=True)
    if docs is None:
        return EXIT_INVALID
    where: dict[ObjId, str] = {}
    for doc in docs:
        found = identify(doc.manifest)
        if not isinstance(found, str):
            where.setdefault(found.id, doc.where)
    admitted = admit(_handed_over(docs))
    if admitted.errors:
        # What validate's checks let through but the pipeline refused: still a problem, still exit 2.
        for about, error in admitted.errors:
            place = where.get(about) if about is not None else None
            print(f"{place or error.source}: {error.error}", file=sys.stderr)
        return EXIT_INVALID
    if args.output in ("table", "wide"):
        sys.stdout.write(workload_table(admitted.workloads, int(time.time() * 1000), args.output == "wide"))
    else:
        dump({"apiVersion": "v1", "kind": "List", "items": admitted.workloads}, args.output, sys.stdout)
    return 0
