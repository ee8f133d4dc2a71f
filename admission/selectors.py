"""Matching pods against flavors: node labels, node affinity, taints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kueuestream.admission.api.base import LabelSelector
from kueuestream.admission.api.core import NodeSelectorRequirement, PodSpec, Taint, Toleration


def _requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(req.key)
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        try:
            have, bound = int(value or ""), int(req.values[0])
        except (ValueError, IndexError):
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def flavor_matches_pod(pod: PodSpec, node_labels: Mapping[str, str]) -> bool:
    """Whether a node carrying the flavor's labels could run the pod.

    Only label keys the flavor itself defines are considered, as Kueue does:
    the rest are for kube-scheduler to decide among the flavor's nodes.
    """
    for key, value in pod.node_selector.items():
        if key in node_labels and node_labels[key] != value:
            return False
    affinity = pod.affinity.node_affinity if pod.affinity else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
    if required is None or not required.node_selector_terms:
        return True
    terms = [
        [r for r in term.match_expressions if r.key in node_labels] for term in required.node_selector_terms
    ]
    # Terms are ORed: one that says nothing about the flavor's keys lets any flavor through.
    if any(not reqs for reqs in terms):
        return True
    return any(all(_requirement_matches(r, node_labels) for r in reqs) for reqs in terms)


def _tolerates(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.operator == "Exists":
        return not toleration.key or toleration.key == taint.key
    return toleration.key == taint.key and toleration.value == taint.value


def untolerated_taint(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    for taint in taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return taint
    return None


def format_taint(taint: Taint) -> str:
    return f"{{{taint.key} {taint.value} {taint.effect} <nil>}}"


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """A nil selector selects nothing and an empty one everything, as in Kubernetes."""
    if selector is None:
        return False
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    for expr in selector.match_expressions:
        have = labels.get(expr.key)
        if expr.operator == "In" and (have is None or have not in expr.values):
            return False
        if expr.operator == "NotIn" and have is not None and have in expr.values:
            return False
        if expr.operator == "Exists" and have is None:
            return False
        if expr.operator == "DoesNotExist" and have is not None:
            return False
    return True
