"""The applier against a real API server: conflicts, newer decisions, vanished Workloads."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kueuestream.admission.events import Action
from kueuestream.agents.kube.applier import ClusterApplier
from kueuestream.agents.kube.cache import ObjectCache
from kueuestream.agents.kube.jobs import CACHED_KINDS
from kueuestream.agents.kube.rest import WORKLOADS
from kueuestream.streams.schemas import AppliedRecord, ApplyOutcome, Cause, DecisionRecord, Ref
from tests.cluster.kube_rig import Rig, cluster, eventually, start_runtime
from tests.helpers import workload_manifest

pytestmark = pytest.mark.kube


def _workload(namespace: str, name: str, queue: str = "lq", cpu: str = "1") -> dict[str, Any]:
    return workload_manifest(name, queue, {"cpu": cpu}, namespace=namespace, priority=None, created=None)


def _decision(namespace: str, name: str, action: Action, offset: int, reason: str) -> DecisionRecord:
    status: dict[str, Any] = {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True" if action is Action.ADMITTED else "False",
                "reason": reason,
                "message": reason,
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    if action is Action.ADMITTED:
        status["admission"] = {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": "1"}, "count": 1}
            ],
        }
    return DecisionRecord(
        ref=Ref(kind="Workload", namespace=namespace, name=name),
        action=action,
        status=status,
        cause=Cause(shard="cq:cq", offset=offset),
        index=0,
    )


class Applier:
    def __init__(self, rig: Rig) -> None:
        self.outcomes: list[AppliedRecord] = []
        self.cache = ObjectCache(CACHED_KINDS)
        self.applier = ClusterApplier(rig.api, self.cache, self.outcomes.append)

    def of(self, decision: DecisionRecord) -> tuple[ApplyOutcome, str]:
        [found] = [o for o in self.outcomes if (o.cause, o.index) == (decision.cause, decision.index)]
        return found.outcome, found.detail


async def test_a_conflicting_status_write_is_read_again_and_kept(kube_config: str) -> None:
    """Another client writes the status after our copy was read: our write gets 409, the Workload
    is read again, and the decision is applied on top, keeping the other client's condition."""
    async with cluster(kube_config) as rig:
        ns = await rig.namespace("conflict")
        created = await rig.create(WORKLOADS, _workload(ns, "w"))
        a = Applier(rig)
        a.cache.put(("Workload", ns, "w"), created)  # what the watch brought: soon stale
        theirs = {
            "type": "PodsReady",
            "status": "False",
            "reason": "WaitForStart",
            "message": "theirs",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        await rig.api.patch(WORKLOADS, ns, "w", {"status": {"conditions": [theirs]}}, subresource="status")

        decision = _decision(ns, "w", Action.ADMITTED, 1, "QuotaReserved")
        a.applier.submit(decision)
        await a.applier.idle()
        assert a.of(decision)[0] is ApplyOutcome.APPLIED
        assert a.applier.counters.conflicts == 1
        live = await rig.get(WORKLOADS, ns, "w")
        assert live is not None
        assert live["status"]["admission"]["clusterQueue"] == "cq"
        types = [c["type"] for c in live["status"]["conditions"]]
        assert types == ["PodsReady", "QuotaReserved"]

        # The same decision again: the status already says so, nothing is written.
        writes = rig.api.writes
        again = decision.model_copy(update={"cause": Cause(shard="cq:cq", offset=2)})
        a.applier.submit(again)
        await a.applier.idle()
        assert a.of(again)[0] is ApplyOutcome.UNCHANGED and rig.api.writes == writes


async def test_an_older_decision_never_overwrites_a_newer_one(kube_config: str) -> None:
    """Two decisions about one Workload in a row: the older one, refused on a conflict while the
    newer one waits, is dropped, and the Workload ends with the newer status."""
    async with cluster(kube_config) as rig:
        ns = await rig.namespace("newer")
        created = await rig.create(WORKLOADS, _workload(ns, "w"))
        a = Applier(rig)
        a.cache.put(("Workload", ns, "w"), created)
        await rig.api.patch(
            WORKLOADS, ns, "w", {"metadata": {"labels": {"touched": "yes"}}}
        )  # the cached version is now stale
        older = _decision(ns, "w", Action.PENDING, 1, "Pending")
        newer = _decision(ns, "w", Action.ADMITTED, 2, "QuotaReserved")
        a.applier.submit(older)
        a.applier.submit(newer)
        await a.applier.idle()
        assert a.of(older)[0] is ApplyOutcome.SUPERSEDED
        assert a.of(newer)[0] is ApplyOutcome.APPLIED
        live = await rig.get(WORKLOADS, ns, "w")
        assert live is not None and live["status"]["conditions"][0]["status"] == "True"

        # Three in a row while one is being written: the middle one never reaches the server.
        first = _decision(ns, "w", Action.PENDING, 3, "Pending")
        middle = _decision(ns, "w", Action.PENDING, 4, "Middle")
        last = _decision(ns, "w", Action.ADMITTED, 5, "QuotaReserved")
        for d in (first, middle, last):
            a.applier.submit(d)
        await a.applier.idle()
        assert a.of(middle)[0] is ApplyOutcome.SUPERSEDED
        assert a.of(last)[0] in (ApplyOutcome.APPLIED, ApplyOutcome.UNCHANGED)
        live = await rig.get(WORKLOADS, ns, "w")
        assert live is not None and live["status"]["conditions"][0]["reason"] == "QuotaReserved"


async def test_a_workload_deleted_before_its_status_is_written_is_gone(kube_config: str) -> None:
    async with cluster(kube_config) as rig:
        ns = await rig.namespace("gone")
        created = await rig.create(WORKLOADS, _workload(ns, "w"))
        a = Applier(rig)
        a.cache.put(("Workload", ns, "w"), created)
        await rig.api.delete(WORKLOADS, ns, "w")
        decision = _decision(ns, "w", Action.ADMITTED, 1, "QuotaReserved")
        a.applier.submit(decision)
        await a.applier.idle()
        outcome, detail = a.of(decision)
        assert outcome is ApplyOutcome.GONE
        assert detail == f"Workload {ns}/w no longer exists"


async def test_a_workload_deleted_during_admission_frees_its_quota(kube_config: str, tmp_path: Path) -> None:
    """End to end: the first Workload is deleted while the pipeline admits it; its quota goes to the
    second, and every decision about it has an outcome in kueue.applied."""
    async with cluster(kube_config) as rig:
        q = await rig.quota("del", "1")
        running = await start_runtime(rig.conn, tmp_path)
        try:
            await rig.create(WORKLOADS, _workload(q.namespace, "first", q.local_queue))
            await asyncio.sleep(0)
            await rig.api.delete(WORKLOADS, q.namespace, "first")
            await rig.create(WORKLOADS, _workload(q.namespace, "second", q.local_queue))

            async def second_admitted() -> bool:
                found = await rig.get(WORKLOADS, q.namespace, "second")
                return found is not None and "admission" in (found.get("status") or {})

            await eventually(second_admitted, "the second Workload admitted")
            await running.runtime.settle()
            about_first = [
                d for d in running.decisions() if d.ref.name == "first" and d.ref.namespace == q.namespace
            ]
            assert about_first and about_first[-1].action is Action.DELETED
            outcomes = {(o.cause, o.index): o.outcome for o in running.outcomes()}
            for d in about_first:
                assert (d.cause, d.index) in outcomes
            assert outcomes[(about_first[-1].cause, about_first[-1].index)] is ApplyOutcome.GONE
        finally:
            await running.stop()


async def test_our_own_status_writes_decide_nothing(kube_config: str, tmp_path: Path) -> None:
    """The status the applier writes comes back through the watch; it makes no new decision."""
    async with cluster(kube_config) as rig:
        q = await rig.quota("echo", "1")
        running = await start_runtime(rig.conn, tmp_path)
        try:
            await rig.create(WORKLOADS, _workload(q.namespace, "w", q.local_queue))
            await rig.create(WORKLOADS, _workload(q.namespace, "waits", q.local_queue))

            async def both_written() -> bool:
                found = [await rig.get(WORKLOADS, q.namespace, n) for n in ("w", "waits")]
                return all(f is not None and (f.get("status") or {}).get("conditions") for f in found)

            await eventually(both_written, "both statuses written")
            await running.runtime.settle()
            before = [d for d in running.decisions() if d.ref.namespace == q.namespace]
            rv = {
                n: (await rig.get(WORKLOADS, q.namespace, n) or {})["metadata"]["resourceVersion"]
                for n in ("w", "waits")
            }

            async def echoes_seen() -> bool:
                cached = [running.runtime.side.cache.get(("Workload", q.namespace, n)) for n in rv]
                return all(
                    c is not None and c["metadata"]["resourceVersion"] == rv[c["metadata"]["name"]]
                    for c in cached
                )

            await eventually(echoes_seen, "the written statuses back through the watch")
            await running.runtime.settle()
            after = [d for d in running.decisions() if d.ref.namespace == q.namespace]
            assert after == before
            assert sorted(d.action.value for d in before) == ["Admitted", "Pending"]
        finally:
            await running.stop()
