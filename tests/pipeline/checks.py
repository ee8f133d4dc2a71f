"""Checks on decision streams (quota limits after every decision, exactly-once, outcomes) and on
the admission shards' state (each Workload and ClusterQueue in exactly one shard)."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kueuestream.admission.events import Action
from kueuestream.admission.quantity import parse_quantity, resource_value
from kueuestream.agents.admission import AdmissionHandler
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.streams import codec
from kueuestream.streams.schemas import DecisionRecord

FR = tuple[str, str]  # flavor, resource


def decode_all(raw: Iterable[bytes]) -> list[DecisionRecord]:
    return [codec.decode(r, DecisionRecord) for r in raw]


def usage_of(status: dict[str, Any]) -> tuple[str, dict[FR, int]]:
    """The ClusterQueue and amounts a status holds quota for ("" and {} when none)."""
    admission = status.get("admission")
    conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
    if not admission or conditions.get("QuotaReserved") != "True" or conditions.get("Finished") == "True":
        return "", {}
    usage: dict[FR, int] = {}
    for psa in admission.get("podSetAssignments", []):
        for resource, amount in (psa.get("resourceUsage") or {}).items():
            fr = (psa["flavors"][resource], resource)
            usage[fr] = usage.get(fr, 0) + resource_value(resource, parse_quantity(amount))
    return admission["clusterQueue"], usage


@dataclass
class Limits:
    """ClusterQueue quotas and cohort trees, from manifests."""

    nominal: dict[str, dict[FR, int]] = field(default_factory=dict)
    borrowing: dict[str, dict[FR, int]] = field(default_factory=dict)
    cohort_of: dict[str, str] = field(default_factory=dict)
    parent_of: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, manifests: Iterable[dict[str, Any]]) -> Limits:
        limits = cls()
        for m in manifests:
            limits.add(m)
        return limits

    def add(self, m: dict[str, Any]) -> None:
        name, spec = m["metadata"]["name"], m.get("spec") or {}
        if m["kind"] == "Cohort":
            self.parent_of[name] = spec.get("parentName", "")
        if m["kind"] != "ClusterQueue":
            return
        self.cohort_of[name] = spec.get("cohortName", spec.get("cohort", ""))  # v1beta2, v1beta1
        self.nominal[name], self.borrowing[name] = {}, {}
        for group in spec.get("resourceGroups", []):
            for fl in group["flavors"]:
                for rq in fl["resources"]:
                    fr = (fl["name"], rq["name"])
                    self.nominal[name][fr] = resource_value(rq["name"], parse_quantity(rq["nominalQuota"]))
                    if "borrowingLimit" in rq:
                        self.borrowing[name][fr] = resource_value(
                            rq["name"], parse_quantity(rq["borrowingLimit"])
                        )

    def root(self, cq: str) -> str:
        node = self.cohort_of.get(cq, "")
        if not node:
            return f"cq:{cq}"
        seen = {node}
        while (parent := self.parent_of.get(node, "")) and parent not in seen:
            seen.add(parent)
            node = parent
        return f"cohort:{node}"


@dataclass
class UsageTracker:
    """Replays decisions in order and checks, after each one, that nothing is over its limits."""

    limits: Limits
    held: dict[str, tuple[str, dict[FR, int]]] = field(default_factory=dict)  # workload -> (cq, usage)
    checked: int = 0

    def apply(self, d: DecisionRecord) -> None:
        key = f"{d.ref.namespace}/{d.ref.name}"
        if d.action in (Action.DELETED, Action.REJECTED):
            self.held.pop(key, None)
        else:
            cq, usage = usage_of(d.status)
            if usage:
                self.held[key] = (cq, usage)
            else:
                self.held.pop(key, None)
        self.check(f"after {d.action.value} {key} (cause {d.cause.shard}@{d.cause.offset} #{d.index})")

    def per_cq(self) -> dict[str, dict[FR, int]]:
        out: dict[str, dict[FR, int]] = {}
        for cq, usage in self.held.values():
            for fr, amount in usage.items():
                out.setdefault(cq, {})[fr] = out.setdefault(cq, {}).get(fr, 0) + amount
        return out

    def check(self, when: str, *, trees: bool = True) -> None:
        self.checked += 1
        per_cq = self.per_cq()
        tree_usage: dict[str, dict[FR, int]] = {}
        for cq, usage in per_cq.items():
            nominal = self.limits.nominal.get(cq, {})
            for fr, amount in usage.items():
                limit = self.limits.borrowing.get(cq, {}).get(fr)
                if limit is not None:
                    assert amount <= nominal.get(fr, 0) + limit, f"{cq} {fr} over nominal+borrowing {when}"
                root = self.limits.root(cq)
                tree_usage.setdefault(root, {})[fr] = tree_usage.setdefault(root, {}).get(fr, 0) + amount
        if not trees:
            return
        tree_quota: dict[str, dict[FR, int]] = {}
        for cq, nominal in self.limits.nominal.items():
            root = self.limits.root(cq)
            for fr, amount in nominal.items():
                tree_quota.setdefault(root, {})[fr] = tree_quota.setdefault(root, {}).get(fr, 0) + amount
        for root, usage in tree_usage.items():
            for fr, amount in usage.items():
                quota = tree_quota.get(root, {}).get(fr, 0)
                assert amount <= quota, f"tree {root} uses {amount} of {fr}, quota {quota}, {when}"


def check_limits(limits: Limits, partitions: Sequence[Sequence[DecisionRecord]]) -> UsageTracker:
    """Every partition's decisions in order (shards are independent, so any interleaving will do)."""
    tracker = UsageTracker(limits)
    for decisions in partitions:
        for d in decisions:
            tracker.apply(d)
    return tracker


def assert_exactly_once(partitions: Sequence[Sequence[DecisionRecord]]) -> None:
    seen: set[tuple[str, int, int]] = set()
    for decisions in partitions:
        for d in decisions:
            key = (d.cause.shard, d.cause.offset, d.index)
            assert key not in seen, f"decision {key} written twice"
            seen.add(key)


def assert_admitted_once(parts: list[list[Any]]) -> None:
    """A Workload admitted once stays admitted across moves: never admitted again unless requeued."""
    actions: dict[str, list[str]] = {}
    for part in parts:
        for d in part:
            actions.setdefault(d.ref.name, []).append(d.action.value)
    for name, seq in actions.items():
        admitted = [i for i, a in enumerate(seq) if a == "Admitted"]
        for first, second in itertools.pairwise(admitted):
            assert "Requeued" in seq[first:second], f"{name} admitted twice: {seq}"


def per_workload(partitions: Sequence[Sequence[DecisionRecord]]) -> dict[str, list[tuple[str, str, str]]]:
    """Each Workload's decisions in order, without their cause: comparable across runtimes."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for decisions in partitions:
        for d in decisions:
            out.setdefault(f"{d.ref.namespace}/{d.ref.name}", []).append(
                (d.action.value, codec.encode_json(d.status).decode(), d.message)
            )
    return dict(sorted(out.items()))


def final_statuses(partitions: Sequence[Sequence[DecisionRecord]]) -> dict[str, tuple[str, dict[str, Any]]]:
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for decisions in partitions:
        for d in decisions:
            out[f"{d.ref.namespace}/{d.ref.name}"] = (d.action.value, d.status)
    return dict(sorted(out.items()))


def engines(pipeline: EmbeddedPipeline | AdmissionHandler) -> dict[str, Any]:
    handler = pipeline.admission if isinstance(pipeline, EmbeddedPipeline) else pipeline
    states = [handler.states[p] for p in sorted(handler.states)]
    return {shard: st.engine for state in states for shard, st in state.shards.items()}


def holders(pipeline: EmbeddedPipeline | AdmissionHandler) -> Counter[tuple[str, str]]:
    """How many shards hold each Workload: it must be exactly one."""
    return Counter(key for engine in engines(pipeline).values() for key in engine.workloads)


def assert_usage_consistent(pipeline: EmbeddedPipeline | AdmissionHandler) -> dict[str, dict[FR, int]]:
    """Every ClusterQueue is in one shard, and its usage is its admitted Workloads' usage."""
    seen: dict[str, str] = {}
    usage: dict[str, dict[FR, int]] = {}
    for shard, engine in engines(pipeline).items():
        for name, cq in engine.cqs.items():
            assert name not in seen, f"ClusterQueue {name} in {seen[name]} and {shard}"
            seen[name] = shard
            expected: dict[FR, int] = {}
            for rec in engine.workloads.values():
                if rec.phase.value == "Admitted" and rec.cluster_queue == name:
                    for fr, amount in rec.usage.items():
                        expected[fr] = expected.get(fr, 0) + amount
            assert {fr: a for fr, a in cq.node.usage.items() if a} == expected, name
            usage[name] = expected
    return usage
