"""A stop (SIGTERM cancels the main task) is never lost inside the Lease's bounded calls.

On Python 3.11, ``asyncio.wait_for`` returns the call's result when the
cancel arrives in the loop iteration the call completes in; the Lease's
renewal loop then slept on, and ``run --kubeconfig --leader-elect`` never
stopped. Every call the elector makes is bounded with ``asyncio.timeout``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s

from kueuestream.agents.kube.lease import LeaseElector, LeaseSettings


async def test_a_cancel_arriving_as_a_lease_call_completes_still_stops_the_caller() -> None:
    api = k8s.ApiClient()
    try:
        elector = LeaseElector(api, LeaseSettings("ns", "work", "a", 3.0, 2.0, 0.5))
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        calling = asyncio.create_task(elector._call(answer))
        await asyncio.sleep(0)  # the call is under way
        answer.set_result({"kind": "Lease"})
        calling.cancel()  # in the same loop iteration
        with pytest.raises(asyncio.CancelledError):
            await calling
    finally:
        await api.close()


async def test_a_lease_call_that_does_not_answer_in_the_retry_period_times_out() -> None:
    api = k8s.ApiClient()
    try:
        elector = LeaseElector(api, LeaseSettings("ns", "work", "a", 3.0, 2.0, 0.05))
        never: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        with pytest.raises(TimeoutError):
            await elector._call(never)
        assert never.cancelled()
    finally:
        await api.close()
