"""`kueuestream drs PATH... [-o table|json]`: every queue's Dominant Resource Share.

The manifests are loaded like `admit` loads them (files and folders, sorted,
YAML or JSON) and applied to an engine as one batch, so the shares are those
of the state the engine settles in: pre-admitted Workloads (``status.admission``
with ``QuotaReserved=True``) count as they are, pending ones count once the
engine admits them. For every ClusterQueue and Cohort it prints what seed 002's
example tables print: per (resource, flavor) the borrowed and lendable amounts
and the ``resourceWeights`` multiplier, per resource the weighted and the
unweighted ratio, the dominant resource and the weighted share.

Number formats:

* ``-o table`` (Markdown): amounts in the resource's base unit (cpu in
  cores, ``0.5``; counts as counts), except memory-like resources, shown as
  Kubernetes quantities (``10Gi``); weights exactly as configured; ratios
  and shares with 3 decimals, rounded half up, like the seed's tables; the
  share is also given as Kueue reports it in
  ``status.fairSharing.weightedShare`` (per mille, rounded up).
* ``-o json``: ``{"clusterQueues": [NODE...], "cohorts": [NODE...]}``, nodes
  sorted by name, with ``NODE = {"name", "dominantResource", "weightedShare",
  "resources": [{"resource", "ratio", "unweightedRatio", "flavors": [{"flavor",
  "borrowed", "lendable", "weight"}]}]}``. Ratios and ``weightedShare`` are plain
  fractions (0.444, not Kueue's per-mille 444) as JSON numbers rounded half up
  to 6 decimals. ``weightedShare`` is ``null`` for an infinite share
  (``fairSharing.weight`` 0 while borrowing); ``dominantResource`` is ``null``
  when the node borrows nothing that is lent. ``borrowed`` and ``lendable``
  are JSON numbers in the resource's base unit (cpu in cores, memory in
  bytes, anything else in units); ``weight`` is the exact multiplier. A root
  Cohort, or a ClusterQueue without a cohort, has nothing to borrow from: its
  share is 0 and ``resources`` is empty.

Exit status: 0, or 2 when a manifest cannot be read or is invalid (the
problems are printed on stderr, one per line, as `validate` prints them).
"""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction
from typing import Any

import orjson

from kueuestream.admission import drs
from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action, Event, EventType
from kueuestream.admission.quantity import resource_quantity
from kueuestream.agents.cli.common import EXIT_INVALID, load_valid

OUTPUTS = ("table", "json")
TABLE_PLACES = 3
JSON_PLACES = 6


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("drs", help="dominant resource shares of every ClusterQueue and Cohort")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("-o", "--output", choices=OUTPUTS, default="table")
    p.set_defaults(func=lambda args: run_drs(list(args.paths), args.output))


def run_drs(paths: list[str], output: str) -> int:
    if output not in OUTPUTS:
        print(f"unsupported output {output!r}; accepted: {', '.join(OUTPUTS)}", file=sys.stderr)
        return EXIT_INVALID
    manifests = load_valid(paths)
    if manifests is None:
        return EXIT_INVALID
    engine = load_engine(manifests)
    cqs, cohorts = reports(engine)
    if output == "json":
        body = {"clusterQueues": [json_node(r) for r in cqs], "cohorts": [json_node(r) for r in cohorts]}
        sys.stdout.write(orjson.dumps(body, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(table(cqs, cohorts))
    return 0


def load_engine(manifests: list[Any]) -> Engine:
    """One engine, fed every manifest as one batch and settled."""
    engine = Engine()
    for i, manifest in enumerate(manifests):
        for decision in engine.apply(
            Event(EventType.UPSERT, 0, manifest=manifest, batch=i < len(manifests) - 1)
        ):
            if decision.action == Action.REJECTED:  # validated above; kept for safety
                print(f"warning: {decision.ref}: {decision.message}", file=sys.stderr)
    while engine.paused:  # scheduling goes on after a preemption; no job stops here
        engine.apply(Event(EventType.TICK, 0))
    return engine


def reports(engine: Engine) -> tuple[list[drs.NodeReport], list[drs.NodeReport]]:
    weights = drs.flavor_weights(engine.flavors)
    cqs = [drs.explain(engine.cqs[name].node, weights) for name in sorted(engine.cqs)]
    cohorts = [drs.explain(engine.cohorts[name], weights) for name in sorted(engine.cohorts)]
    return cqs, cohorts


# ------------------------------------------------------------------ numbers


def rounded(value: Fraction, places: int) -> str:
    """``value`` with exactly ``places`` decimals, rounded half up (away from zero)."""
    scale = 10**places
    units = abs(value) * scale
    whole = int(units)
    if units - whole >= Fraction(1, 2):
        whole += 1
    sign = "-" if value < 0 and whole else ""
    text = str(whole).rjust(places + 1, "0")
    return f"{sign}{text[:-places]}.{text[-places:]}" if places else f"{sign}{text}"


def exact(value: Fraction) -> str:
    """A fraction with a finite decimal expansion (every quantity has one), exactly."""
    if value.denominator == 1:
        return str(value.numerator)
    places = 0
    while (10**places) % value.denominator:
        places += 1
        if places > 40:  # not a decimal fraction: give a close value
            return rounded(value, 18).rstrip("0")
    return rounded(value, places).rstrip("0").rstrip(".")


def _json_number(text: str) -> int | float:
    return int(text) if "." not in text else float(text)


def base_units(resource: str, amount: int) -> Fraction:
    """Kueue keeps cpu in millicores; everything else already is in base units."""
    return Fraction(amount, 1000) if resource == "cpu" else Fraction(amount)


# --------------------------------------------------------------------- json


def json_node(report: drs.NodeReport) -> dict[str, Any]:
    share = report.share.weighted_share
    return {
        "name": report.name,
        "dominantResource": report.dominant_resource or None,
        "weightedShare": None if share is None else _json_number(rounded(share, JSON_PLACES)),
        "resources": [
            {
                "resource": r.resource,
                "ratio": _json_number(rounded(r.ratio, JSON_PLACES)),
                "unweightedRatio": _json_number(rounded(r.unweighted_ratio, JSON_PLACES)),
                "flavors": [
                    {
                        "flavor": f.flavor,
                        "borrowed": _json_number(exact(base_units(r.resource, f.borrowed))),
                        "lendable": _json_number(exact(base_units(r.resource, f.lendable))),
                        "weight": _json_number(exact(f.weight)),
                    }
                    for f in r.flavors
                ],
            }
            for r in report.resources
        ],
    }


# -------------------------------------------------------------------- table


def _binary(resource: str) -> bool:
    return resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")


def amount_text(resource: str, amount: int) -> str:
    if _binary(resource):
        return resource_quantity(resource, amount)
    return exact(base_units(resource, amount))


def _ratio_formula(r: drs.ResourceShare, weighted: bool) -> str:
    def term(amount: int, weight: Fraction) -> str:
        shown = amount_text(r.resource, amount)
        return f"{shown}*{exact(weight)}" if weighted else shown

    top = " + ".join(term(f.borrowed, f.weight) for f in r.flavors)
    bottom = " + ".join(term(f.lendable, f.weight) for f in r.flavors)
    if len(r.flavors) > 1 or weighted:
        top, bottom = f"({top})", f"({bottom})"
    value = r.ratio if weighted else r.unweighted_ratio
    return f"{top}/{bottom} = {rounded(value, TABLE_PLACES)}"


def _node_table(report: drs.NodeReport) -> list[str]:
    kind = "ClusterQueue" if report.is_cluster_queue else "Cohort"
    where = f" (cohort {report.parent})" if report.parent else ""
    lines = [f"## {kind} {report.name}{where}", ""]
    if not report.parent:
        what = "a root Cohort" if not report.is_cluster_queue else "a ClusterQueue without a cohort"
        lines += [f"{what}: nothing to borrow from; weighted share 0", ""]
        return lines
    lines += [
        "| Resource | Flavor | Borrowed | Lendable | Weight |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for r in report.resources:
        for f in r.flavors:
            borrowed = amount_text(r.resource, f.borrowed)
            lendable = amount_text(r.resource, f.lendable)
            lines.append(f"| `{r.resource}` | `{f.flavor}` | {borrowed} | {lendable} | {exact(f.weight)} |")
    lines += [
        "",
        "| Resource | Weighted ratio | Unweighted ratio |",
        "| --- | ---: | ---: |",
    ]
    for r in report.resources:
        lines.append(f"| `{r.resource}` | {_ratio_formula(r, True)} | {_ratio_formula(r, False)} |")
    share = report.share
    dominant = report.dominant_resource or "none"
    unweighted = report.unweighted_dominant_resource or "none"
    weight = exact(share.fair_weight)
    value = share.weighted_share
    shown = "+Inf (fairSharing.weight 0 while borrowing)" if value is None else rounded(value, TABLE_PLACES)
    lines += [
        "",
        f"Dominant resource: {dominant} (unweighted: {unweighted})",
        f"Weighted share: {shown} (fairSharing.weight {weight}; "
        f"status.fairSharing.weightedShare {report.status})",
        "",
    ]
    return lines


def table(cqs: list[drs.NodeReport], cohorts: list[drs.NodeReport]) -> str:
    lines: list[str] = ["# ClusterQueues", ""]
    for report in cqs:
        lines += _node_table(report)
    lines += ["# Cohorts", ""]
    for report in cohorts:
        lines += _node_table(report)
    return "\n".join(lines).rstrip("\n") + "\n"
