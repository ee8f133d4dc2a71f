"""Leader election on a real API server's coordination.k8s.io Lease.

The semantics are client-go's ``leaderelection`` (``tryAcquireOrRenew``): a
candidate takes a Lease held by another only once the record it observed has
stayed the same for the lease duration on its own clock, and every update is
conditional on the Lease's resourceVersion.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from kueuestream.agents.kube.client import KubeConnection
from kueuestream.agents.kube.lease import LEASES, LeaseElector, LeaseLost, LeaseSettings, leadership
from kueuestream.agents.kube.rest import KubeObjects
from tests.cluster.kube_rig import cluster

pytestmark = pytest.mark.kube

DURATION, RENEW, RETRY = 3.0, 2.0, 0.25


@asynccontextmanager
async def lease_namespace(kube_config: str) -> AsyncIterator[tuple[KubeConnection, str]]:
    async with cluster(kube_config) as rig:
        yield rig.conn, await rig.namespace("lease")


def settings(namespace: str, identity: str) -> LeaseSettings:
    return LeaseSettings(namespace, "work", identity, DURATION, RENEW, RETRY)


async def holder(conn: KubeConnection, namespace: str) -> str:
    lease = await KubeObjects(conn.api).get(LEASES, namespace, "work")
    return str(lease["spec"].get("holderIdentity") or "")


async def test_one_candidate_holds_the_lease_and_the_other_waits(kube_config: str) -> None:
    async with lease_namespace(kube_config) as (conn, namespace):
        a = LeaseElector(conn.api, settings(namespace, "a"))
        b = LeaseElector(conn.api, settings(namespace, "b"))
        await asyncio.wait_for(a.acquire(), 10)
        renewing = asyncio.create_task(a.keep())
        try:
            deadline = time.monotonic() + DURATION * 2
            while time.monotonic() < deadline:
                assert not await b.try_acquire_or_renew()
                assert a.holding() and not b.holding()
                await asyncio.sleep(RETRY)
            assert await holder(conn, namespace) == "a"
        finally:
            renewing.cancel()


async def test_a_standby_takes_over_a_dead_holder_within_the_lease_duration(kube_config: str) -> None:
    """The holder stops renewing (as if SIGKILLed): its own check refuses writes before the
    standby may take over, and the standby holds the Lease within a lease duration and a retry."""
    async with lease_namespace(kube_config) as (conn, namespace):
        a = LeaseElector(conn.api, settings(namespace, "a"))
        b = LeaseElector(conn.api, settings(namespace, "b"))
        await asyncio.wait_for(a.acquire(), 10)
        died = time.monotonic()  # a never renews again
        waiting = asyncio.create_task(b.acquire())
        both = False
        while not waiting.done():
            both = both or (a.holding() and b.holding())
            await asyncio.sleep(0.01)
        took = time.monotonic() - died
        assert not both, "two replicas held the Lease at once"
        assert took <= DURATION + 2 * RETRY + 1.0, f"took over after {took:.1f}s"
        assert took >= DURATION - 0.5, f"took over a live lease after {took:.1f}s"
        with pytest.raises(LeaseLost):
            a.check()
        assert await holder(conn, namespace) == "b"
        lease = await KubeObjects(conn.api).get(LEASES, namespace, "work")
        assert lease["spec"]["leaseTransitions"] == 1


async def test_a_clean_stop_hands_the_lease_over_at_once(kube_config: str) -> None:
    """client-go's ReleaseOnCancel: the standby need not wait out the lease duration."""
    async with lease_namespace(kube_config) as (conn, namespace):
        a = LeaseElector(conn.api, settings(namespace, "a"))
        b = LeaseElector(conn.api, settings(namespace, "b"))
        await asyncio.wait_for(a.acquire(), 10)
        assert not await b.try_acquire_or_renew()
        await a.release()
        started = time.monotonic()
        await asyncio.wait_for(b.acquire(), 10)
        assert time.monotonic() - started < DURATION
        assert not a.holding()


async def test_a_body_that_loses_the_lease_is_stopped_with_lease_lost(kube_config: str) -> None:
    """Another writer takes the Lease (a split brain the resourceVersion check cannot see
    coming): the holder's next renewal fails, and the body is cancelled with LeaseLost."""
    async with lease_namespace(kube_config) as (conn, namespace):
        writes: list[float] = []

        async def body(elector: LeaseElector) -> None:
            while True:
                elector.check()
                writes.append(time.monotonic())
                await asyncio.sleep(0.05)

        async def thief() -> None:
            objects = KubeObjects(conn.api)
            lease = await objects.get(LEASES, namespace, "work")
            patch = {
                "metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
                "spec": {"holderIdentity": "thief", "leaseDurationSeconds": 60},
            }
            await objects.patch(LEASES, namespace, "work", patch)

        lost_at = 0.0
        with pytest.raises(LeaseLost):
            async with leadership(conn.api, settings(namespace, "a"), lambda _: None) as elector:
                assert elector is not None
                await thief()
                lost_at = time.monotonic()
                await body(elector)
        assert writes, "the body never ran"
        assert writes[-1] - lost_at < RENEW + RETRY, "writes went on past the renew deadline"
        assert await holder(conn, namespace) == "thief"
