"""How :func:`~kueuestream.agents.kube.lease.leadership` ends when the body and the renewal see the
Lease lost at once: no API server needed, the elector's calls are replaced."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from kueuestream.agents.kube.lease import LeaseElector, LeaseLost, LeaseSettings, leadership


async def _held(self: LeaseElector) -> None:
    return None


async def _lost_at_once(self: LeaseElector) -> None:
    raise LeaseLost("not renewed")


async def test_a_body_that_stops_itself_as_the_renewal_fails_is_not_cancelled_afterwards(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The renewal ends with LeaseLost in the same turn of the loop in which the body's own
    check() raises it: the body leaves with LeaseLost, and its task goes on uncancelled."""
    monkeypatch.setattr(LeaseElector, "acquire", _held)
    monkeypatch.setattr(LeaseElector, "keep", _lost_at_once)
    monkeypatch.setattr(LeaseElector, "release", _held)
    settings = LeaseSettings("ns", "work", "a", 3.0, 2.0, 0.25)
    with pytest.raises(LeaseLost):
        async with leadership(cast(Any, None), settings, lambda _: None):
            # keep() runs and ends during this yield; its done callback is only queued.
            await asyncio.sleep(0)
            raise LeaseLost("the body's own check")
    # The caller's next awaits: a late cancel from the callback would land here.
    for _ in range(3):
        await asyncio.sleep(0)
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
