"""``kueuestream crds``: the CustomResourceDefinitions of the Kueue kinds Kueuestream reads."""

from __future__ import annotations

import argparse
import sys

import orjson
import yaml


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "crds",
        help="print CRDs of the kueue.x-k8s.io kinds Kueuestream reads, for a cluster without Kueue",
        description=(
            "Print the CustomResourceDefinitions, generated from Kueuestream's models, for a cluster "
            "without Kueue: kueuestream crds | kubectl apply --server-side -f -"
        ),
    )
    p.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueuestream.agents.kube.crds import all_crds

    crds = all_crds()
    if args.output == "json":
        listing = {"apiVersion": "v1", "kind": "List", "items": crds}
        sys.stdout.write(orjson.dumps(listing, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(yaml.safe_dump_all(crds, sort_keys=False, width=1_000_000))
    return 0
