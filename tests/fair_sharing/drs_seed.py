"""Seed 002's Examples A, A2 and B: the numbers the seed prints, and the manifests in config/examples/drs/."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from kueuestream.admission import drs
from tests.helpers import GPU, load_yaml, run_manifests, strip_weights

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples" / "drs"

# example -> ({resource: (weighted ratio, unweighted ratio)}, dominant, unweighted dominant)
SEED = {
    "example-a": (
        {
            "cpu": (Fraction(3, 10), Fraction(3, 10)),
            GPU: (Fraction(100 * 8, 100 * 8 + 1000), Fraction(100, 1100)),
        },
        GPU,
        "cpu",
    ),
    "example-a2": (
        {
            "cpu": (Fraction(3, 10), Fraction(3, 10)),
            GPU: (Fraction(10 * 8 + 400, 100 * 8 + 1000), Fraction(410, 1100)),
        },
        "cpu",
        GPU,
    ),
    "example-b": (
        {
            "cpu": (Fraction(250 * 3 + 50, 300 * 3 + 700), Fraction(300, 1000)),
            GPU: (Fraction(100 * 8, 100 * 8 + 1000), Fraction(100, 1100)),
        },
        "cpu",
        "cpu",
    ),
}
# What the seed prints, to 3 decimals.
PRINTED = {
    ("example-a", "cpu"): ("0.300", "0.300"),
    ("example-a", GPU): ("0.444", "0.091"),
    ("example-a2", "cpu"): ("0.300", "0.300"),
    ("example-a2", GPU): ("0.267", "0.373"),
    ("example-b", "cpu"): ("0.500", "0.300"),
    ("example-b", GPU): ("0.444", "0.091"),
}
# The seed's input tables: (resource, flavor) -> (borrowed, lendable, weight)
INPUTS: dict[str, dict[tuple[str, str], tuple[int, int, int | Fraction]]] = {
    "example-a": {
        ("cpu", "standard-cpu"): (300, 1000, 1),
        (GPU, "h100-reserved"): (100, 100, 8),
        (GPU, "a10-spot"): (0, 1000, 1),
    },
    "example-a2": {
        ("cpu", "standard-cpu"): (300, 1000, 1),
        (GPU, "h100-reserved"): (10, 100, 8),
        (GPU, "a10-spot"): (400, 1000, 1),
    },
    "example-b": {
        ("cpu", "cpu-premium"): (250, 300, 3),
        ("cpu", "cpu-standard"): (50, 700, 1),
        (GPU, "h100-reserved"): (100, 100, 8),
        (GPU, "a10-spot"): (0, 1000, 1),
    },
}


def example_docs(name: str, weighted: bool = True) -> list[dict[str, object]]:
    docs = load_yaml(EXAMPLES / "flavors.yaml", EXAMPLES / f"{name}.yaml")
    return docs if weighted else strip_weights(docs)


def team_report(name: str, weighted: bool = True) -> drs.NodeReport:
    r = run_manifests(example_docs(name, weighted))
    weights = drs.flavor_weights(r.engine.flavors)
    return drs.explain(r.engine.cqs[f"{name}-team"].node, weights)
