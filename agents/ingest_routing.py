"""Where each object goes: the shard routing of the ingest agent.

A shard is a cohort tree (``kueuestream.streams.topics.shard_for_root``). Routing state
lives in tables so that the Faust runtime keeps it in changelogged tables and
the embedded runtime in dicts; every value is plain JSON.

Routes are derived, never stored per Workload: a Workload goes where its
LocalQueue goes, a LocalQueue where its ClusterQueue goes, a ClusterQueue to
the root of its cohort chain. So when a tree changes, only the tables of the
changed object are written, and the objects whose route changed are moved with
a handover (:mod:`kueuestream.agents.admission_shards` carries it out):

- ``Out`` to the old shard, which removes the moving objects and sends their
  Workloads with their current status (``In``) to the new one. Only the old
  shard knows that status (admitted, evicted, ...), and it must travel with
  the Workload so that its usage is adopted, not decided again.
- ``Expect`` to the new shard, which holds everything after it until the
  ``In`` arrives: admitting anything there before the moved usage is counted
  could over-admit.
- the moving Cohorts, ClusterQueues and LocalQueues, from ingest's own copies.

Workloads whose LocalQueue or ClusterQueue is not known yet wait in the
:data:`UNROUTED` shard (where they are pending with a clear reason) and are
handed over the same way once their route is known. Deleting a ClusterQueue or
LocalQueue keeps its route, so its Workloads stay where their usage is.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

from kueuestream.admission.events import EventType
from kueuestream.agents.log_entries import handover_manifest
from kueuestream.streams.topics import BROADCAST, shard_for_root

Table = MutableMapping[str, Any]

# Workloads (and LocalQueues) whose route is not known yet. Not a cohort tree:
# shard names of trees always carry a "cohort:" or "cq:" prefix.
UNROUTED = "unrouted"

# Cluster-wide objects every shard needs. kueuestream.streams.topics.BROADCAST_KINDS lacks
# PriorityClass and the namespaced objects Workloads of any shard may depend on
# (DRA claims, LimitRanges).
BROADCAST_KINDS = frozenset(
    {
        "Configuration",
        "ResourceFlavor",
        "AdmissionCheck",
        "WorkloadPriorityClass",
        "PriorityClass",
        "Namespace",
        "DeviceClass",
        "ResourceSlice",
        "ResourceClaimTemplate",
        "ResourceClaim",
        "LimitRange",
        "RuntimeClass",
    }
)
CLAIM_KINDS = frozenset({"ResourceClaimTemplate", "ResourceClaim"})
WORKLOAD_KINDS = frozenset({"Workload", "Job"})
ROUTED_KINDS = frozenset({"Cohort", "ClusterQueue", "LocalQueue"}) | WORKLOAD_KINDS

# Names of the routing tables, as the Faust runtime names its Tables.
TABLES = (
    "objects",  # Kind/namespace/name -> manifest of each Cohort, ClusterQueue, LocalQueue
    "cohort_parents",  # cohort -> parent cohort ("" for none)
    "cq_cohorts",  # ClusterQueue -> cohort ("" for none); kept after a delete
    "lq_cqs",  # namespace/LocalQueue -> ClusterQueue; kept after a delete
    "wl_queues",  # Kind/namespace/name of a Workload or Job -> namespace/LocalQueue
    "unrouted_lqs",  # namespace/LocalQueue -> True while it or its Workloads wait in UNROUTED
    "claims",  # Kind/namespace/name -> ResourceClaim(Template) manifest
    "ingest_state",  # batch, open shards, handover counter
)


def object_key(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


def queue_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


@dataclass(frozen=True, slots=True)
class Planned:
    """One admission record to write, before it gets its time and origin."""

    shard: str
    type: EventType
    kind: str = ""
    namespace: str = ""
    name: str = ""
    object: dict[str, Any] | None = None


def upsert(shard: str, manifest: dict[str, Any], kind: str, namespace: str, name: str) -> Planned:
    return Planned(shard, EventType.UPSERT, kind, namespace, name, manifest)


def delete(shard: str, kind: str, namespace: str, name: str) -> Planned:
    return Planned(shard, EventType.DELETE, kind, namespace, name)


class Router:
    """The routing tables and the moves they imply; one per ingest agent."""

    def __init__(self, tables: MutableMapping[str, Table]) -> None:
        self.objects = tables["objects"]
        self.cohort_parents = tables["cohort_parents"]
        self.cq_cohorts = tables["cq_cohorts"]
        self.lq_cqs = tables["lq_cqs"]
        self.wl_queues = tables["wl_queues"]
        self.unrouted_lqs = tables["unrouted_lqs"]
        self.claims = tables["claims"]
        self.state = tables["ingest_state"]

    # --- routes ------------------------------------------------------------------

    def root(self, cohort: str) -> str:
        seen: list[str] = []
        node = cohort
        while node not in seen:
            seen.append(node)
            parent = self.cohort_parents.get(node) or ""
            if not parent:
                return node
            node = parent
        # A cycle (the engine reports it on the ClusterQueues); any fixed member will do.
        return min(seen[seen.index(node) :])

    def cohort_shard(self, cohort: str) -> str:
        return shard_for_root(self.root(cohort), "Cohort")

    def cq_shard(self, cq: str) -> str | None:
        if cq not in self.cq_cohorts:
            return None
        cohort = self.cq_cohorts[cq]
        return self.cohort_shard(cohort) if cohort else shard_for_root(cq, "ClusterQueue")

    def lq_shard(self, lq: str) -> str:
        cq = self.lq_cqs.get(lq)
        shard = self.cq_shard(cq) if cq is not None else None
        return shard or UNROUTED

    def workload_shard(self, key: str) -> str | None:
        lq = self.wl_queues.get(key)
        return None if lq is None else self.lq_shard(lq)

    # --- upserts -----------------------------------------------------------------

    def broadcast(self, kind: str, namespace: str, name: str, manifest: dict[str, Any] | None) -> Planned:
        if kind in CLAIM_KINDS:
            key = object_key(kind, namespace, name)
            if manifest is None:
                self.claims.pop(key, None)
            else:
                self.claims[key] = manifest
        if manifest is None:
            return delete(BROADCAST, kind, namespace, name)
        return upsert(BROADCAST, manifest, kind, namespace, name)

    def upsert_cohort(self, name: str, parent: str, manifest: dict[str, Any]) -> list[Planned]:
        before = self._tree_shards()
        self.cohort_parents[name] = parent
        self.objects[object_key("Cohort", "", name)] = manifest
        out = self._tree_moves(before)
        if not any(p.kind == "Cohort" and p.name == name and p.type == EventType.UPSERT for p in out):
            out.append(upsert(self.cohort_shard(name), manifest, "Cohort", "", name))
        return out

    def upsert_cluster_queue(self, name: str, cohort: str, manifest: dict[str, Any]) -> list[Planned]:
        old = self.cq_shard(name)
        self.cq_cohorts[name] = cohort
        self.objects[object_key("ClusterQueue", "", name)] = manifest
        new = self.cq_shard(name)
        assert new is not None
        out = (
            self._move(old, new, cqs=[name])
            if old is not None and old != new
            else [upsert(new, manifest, "ClusterQueue", "", name)]
        )
        waiting = sorted(lq for lq in self.unrouted_lqs if self.lq_cqs.get(lq) == name)
        if waiting:
            out += self._move(UNROUTED, new, lqs=waiting)
        return out

    def upsert_local_queue(
        self, namespace: str, name: str, cq: str, manifest: dict[str, Any]
    ) -> list[Planned]:
        key = queue_key(namespace, name)
        old = UNROUTED if key in self.unrouted_lqs else (self.lq_shard(key) if key in self.lq_cqs else None)
        self.lq_cqs[key] = cq
        self.objects[object_key("LocalQueue", namespace, name)] = manifest
        new = self.lq_shard(key)
        if new == UNROUTED:
            self.unrouted_lqs[key] = True
        if old is None or old == new:
            return [upsert(new, manifest, "LocalQueue", namespace, name)]
        return self._move(old, new, lqs=[key])

    def upsert_workload(
        self, kind: str, namespace: str, name: str, queue: str, manifest: dict[str, Any]
    ) -> list[Planned]:
        key = object_key(kind, namespace, name)
        lq = queue_key(namespace, queue)
        old = self.workload_shard(key)
        self.wl_queues[key] = lq
        new = self.lq_shard(lq)
        if new == UNROUTED:
            self.unrouted_lqs[lq] = True
        out: list[Planned] = []
        if old is not None and old != new:
            # Its own queue changed: the old shard hands over its state, then the update applies.
            out += self._move(old, new, workloads=[key])
        out.append(upsert(new, manifest, kind, namespace, name))
        return out

    # --- deletes -----------------------------------------------------------------

    def delete_cohort(self, name: str) -> list[Planned]:
        before = self._tree_shards()
        old = self.cohort_shard(name)
        self.cohort_parents.pop(name, None)
        self.objects.pop(object_key("Cohort", "", name), None)
        return [delete(old, "Cohort", "", name), *self._tree_moves(before)]

    def delete_cluster_queue(self, name: str) -> list[Planned]:
        self.objects.pop(object_key("ClusterQueue", "", name), None)
        shard = self.cq_shard(name)
        return [] if shard is None else [delete(shard, "ClusterQueue", "", name)]

    def delete_local_queue(self, namespace: str, name: str) -> list[Planned]:
        key = queue_key(namespace, name)
        self.objects.pop(object_key("LocalQueue", namespace, name), None)
        if key not in self.lq_cqs and key not in self.unrouted_lqs:
            return []
        return [delete(self.lq_shard(key), "LocalQueue", namespace, name)]

    def delete_workload(self, kind: str, namespace: str, name: str) -> list[Planned]:
        shard = self.workload_shard(object_key(kind, namespace, name))
        self.wl_queues.pop(object_key(kind, namespace, name), None)
        return [] if shard is None else [delete(shard, kind, namespace, name)]

    # --- moves -------------------------------------------------------------------

    def _tree_shards(self) -> dict[tuple[str, str], str]:
        """The shard of every Cohort and ClusterQueue, to see what a Cohort change moves."""
        out: dict[tuple[str, str], str] = {}
        cohorts = set(self.cohort_parents) | {c for c in self.cq_cohorts.values() if c}
        for cohort in sorted(cohorts):
            out[("Cohort", cohort)] = self.cohort_shard(cohort)
        for cq in sorted(self.cq_cohorts):
            shard = self.cq_shard(cq)
            assert shard is not None
            out[("ClusterQueue", cq)] = shard
        return out

    def _tree_moves(self, before: dict[tuple[str, str], str]) -> list[Planned]:
        after = self._tree_shards()
        pairs: dict[tuple[str, str], tuple[list[str], list[str]]] = {}
        for item in sorted(before):
            old, new = before[item], after.get(item)
            if new is None or new == old:
                continue
            cohorts, cqs = pairs.setdefault((old, new), ([], []))
            (cohorts if item[0] == "Cohort" else cqs).append(item[1])
        out: list[Planned] = []
        for (old, new), (cohorts, cqs) in sorted(pairs.items()):
            out += self._move(old, new, cohorts=cohorts, cqs=cqs)
        return out

    def _next_handover(self) -> str:
        count = int(self.state.get("handovers", 0)) + 1
        self.state["handovers"] = count
        return f"handover-{count}"

    def _move(
        self,
        old: str,
        new: str,
        *,
        cohorts: list[str] | None = None,
        cqs: list[str] | None = None,
        lqs: list[str] | None = None,
        workloads: list[str] | None = None,
    ) -> list[Planned]:
        cohorts, cqs, lqs, workloads = cohorts or [], cqs or [], lqs or [], workloads or []
        if old == UNROUTED:
            for lq in lqs:
                self.unrouted_lqs.pop(lq, None)
        # The LocalQueues of a moving ClusterQueue move with it.
        moving_cqs = set(cqs)
        all_lqs = sorted(set(lqs) | {lq for lq, cq in self.lq_cqs.items() if cq in moving_cqs})
        handover = self._next_handover()
        spec = {"from": old, "to": new}
        out_spec = {
            **spec,
            "cohorts": sorted(cohorts),
            "clusterQueues": sorted(cqs),
            "localQueues": all_lqs,
            "workloads": sorted(workloads),
        }
        out = [
            upsert(
                old, handover_manifest(handover, {"phase": "Out", **out_spec}), "ShardHandover", "", handover
            ),
            upsert(
                new, handover_manifest(handover, {"phase": "Expect", **spec}), "ShardHandover", "", handover
            ),
        ]
        # Parents before children, so the new shard never sees a Cohort before its parent.
        for cohort in sorted(cohorts, key=lambda c: (self._depth(c), c)):
            manifest = self.objects.get(object_key("Cohort", "", cohort))
            if manifest is not None:
                out.append(upsert(new, manifest, "Cohort", "", cohort))
        for cq in sorted(cqs):
            manifest = self.objects.get(object_key("ClusterQueue", "", cq))
            if manifest is not None:
                out.append(upsert(new, manifest, "ClusterQueue", "", cq))
        for lq in all_lqs:
            namespace, name = lq.split("/", 1)
            manifest = self.objects.get(object_key("LocalQueue", namespace, name))
            if manifest is not None:
                out.append(upsert(new, manifest, "LocalQueue", namespace, name))
        return out

    def _depth(self, cohort: str) -> int:
        depth, node, seen = 0, cohort, {cohort}
        while parent := self.cohort_parents.get(node) or "":
            if parent in seen:
                break
            seen.add(parent)
            depth, node = depth + 1, parent
        return depth
