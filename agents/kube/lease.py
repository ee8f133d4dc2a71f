"""Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does it.

One replica holds the Lease and works; the others wait. A candidate takes
the Lease when it is free, or when the record it holds (holder, renew time,
transitions) has not changed for ``leaseDurationSeconds`` of the candidate's
own monotonic clock: no two machines' clocks are ever compared. Every
update carries the Lease's ``resourceVersion``, so of two candidates that
race, the API server lets one win.

The holder renews every ``retry_period_s``. It counts as holding only until
``renew_deadline_s`` after it *sent* its last successful renewal; past that
:meth:`LeaseElector.check` raises :class:`LeaseLost`, and every write of the
connector calls it first. Since the deadline is shorter than the lease
duration, the old holder has stopped writing before a standby may take over,
however the old holder was stopped (SIGKILL, a paused VM, a lost network).

kubernetes_asyncio ships a leader elector too; this one exists because that
one compares wall-clock times, sets no timeout on its calls (a hung renewal
never lets the leader notice it lost), and offers no check a writer can make
before each write.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client as k8s

from kueuestream.agents.kube.client import RetryPolicy
from kueuestream.agents.kube.rest import CONFLICT, NOT_FOUND, KubeObjects, Resource, status_of

LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
# One quick retry inside a period; the period itself is the retry loop.
_LEASE_RETRY = RetryPolicy(initial_s=0.1, max_s=0.5, max_attempts=2)


class LeaseLost(BaseException):
    """The Lease is no longer ours: stop writing at once.

    A ``BaseException``, as ``CancelledError`` is, so that no ``except
    Exception`` on a write path can turn it into an outcome and carry on.
    """


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    """Which Lease, who we are, and client-go's default timing."""

    namespace: str
    name: str
    identity: str
    duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0

    def problems(self) -> list[str]:
        out = []
        if not self.retry_period_s > 0:
            out.append(f"--retry-period must be above 0, not {self.retry_period_s:g}")
        if not self.renew_deadline_s > self.retry_period_s:
            out.append(
                f"--renew-deadline ({self.renew_deadline_s:g}s) must be longer than "
                f"--retry-period ({self.retry_period_s:g}s)"
            )
        if not self.duration_s > self.renew_deadline_s:
            out.append(
                f"--lease-duration ({self.duration_s:g}s) must be longer than "
                f"--renew-deadline ({self.renew_deadline_s:g}s)"
            )
        return out

    @property
    def where(self) -> str:
        return f"Lease {self.namespace}/{self.name}"


def default_identity() -> str:
    """Host name and a random part, as client-go's callers do: unique per process."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def default_namespace() -> str:
    """The pod's namespace when the Deployment passes it down, else ``kueuestream-system``."""
    return os.environ.get("POD_NAMESPACE", "") or "kueuestream-system"


def _micro_time(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    def __init__(
        self,
        api: k8s.ApiClient,
        settings: LeaseSettings,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.objects = KubeObjects(api, _LEASE_RETRY)
        self.settings = settings
        self.clock = clock
        self.wall = wall
        self._renewed_at: float | None = None  # clock() when the last successful write was sent
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self.holder = ""  # the holder last seen
        self.transitions = 0

    def holding(self) -> bool:
        return (
            self._renewed_at is not None and self.clock() - self._renewed_at < self.settings.renew_deadline_s
        )

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless the Lease is still ours: called before every write."""
        if not self.holding():
            raise LeaseLost(f"{self.settings.where} is no longer held by {self.settings.identity}")

    async def _call(self, call: Awaitable[dict[str, Any]]) -> dict[str, Any]:
        async with asyncio.timeout(self.settings.retry_period_s):
            return await call

    async def try_acquire_or_renew(self) -> bool:
        s = self.settings
        sent = self.clock()
        now = _micro_time(self.wall())
        try:
            lease = await self._call(self.objects.get(LEASES, s.namespace, s.name))
        except Exception as exc:
            if status_of(exc) != NOT_FOUND:
                return False
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": s.name, "namespace": s.namespace},
                "spec": self._spec(now, now, 0),
            }
            return await self._write(sent, self.objects.create(LEASES, s.namespace, body))
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        transitions = int(spec.get("leaseTransitions") or 0)
        self.holder, self.transitions = holder, transitions
        record = (holder, spec.get("renewTime"), spec.get("acquireTime"), transitions)
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()
        duration = float(spec.get("leaseDurationSeconds") or s.duration_s)
        if holder and holder != s.identity and self.clock() - self._observed_at < duration:
            return False  # another holder, not yet expired
        if holder == s.identity:
            acquired = str(spec.get("acquireTime") or now)
        else:
            acquired, transitions = now, transitions + 1
        patch = {
            "metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
            "spec": self._spec(acquired, now, transitions),
        }
        return await self._write(sent, self.objects.patch(LEASES, s.namespace, s.name, patch))

    def _spec(self, acquired: str, renewed: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.settings.identity,
            "leaseDurationSeconds": max(1, round(self.settings.duration_s)),
            "acquireTime": acquired,
            "renewTime": renewed,
            "leaseTransitions": transitions,
        }

    async def _write(self, sent: float, call: Awaitable[dict[str, Any]]) -> bool:
        try:
            await self._call(call)
        except Exception as exc:
            if status_of(exc) == CONFLICT:
                self._observed = None  # someone else wrote: look again
            return False
        self._renewed_at = sent
        self.holder = self.settings.identity
        return True

    async def acquire(self) -> None:
        """Wait until the Lease is ours."""
        while not await self.try_acquire_or_renew():
            await asyncio.sleep(self.settings.retry_period_s)

    async def keep(self) -> None:
        """Renew every retry period; raise :class:`LeaseLost` once the renew deadline has passed."""
        while True:
            await asyncio.sleep(self.settings.retry_period_s)
            if not self.holding():
                break
            await self.try_acquire_or_renew()
            if not self.holding():
                break
        raise LeaseLost(
            f"{self.settings.where}: not renewed within {self.settings.renew_deadline_s:g}s; "
            f"{self.settings.identity} stops"
        )

    async def release(self) -> None:
        """Hand the Lease over at once on a clean stop, as client-go's ReleaseOnCancel does."""
        if not self.holding():
            return
        s = self.settings
        self._renewed_at = None
        with contextlib.suppress(Exception):
            lease = await self._call(self.objects.get(LEASES, s.namespace, s.name))
            if (lease.get("spec") or {}).get("holderIdentity") == s.identity:
                patch = {
                    "metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
                    "spec": {"holderIdentity": None, "leaseDurationSeconds": 1},
                }
                await self._call(self.objects.patch(LEASES, s.namespace, s.name, patch))


@contextlib.asynccontextmanager
async def leadership(
    api: k8s.ApiClient, settings: LeaseSettings | None, announce: Callable[[str], None]
) -> AsyncIterator[LeaseElector | None]:
    """Wait for the Lease (when ``settings`` asks for one), then hold it while the body runs.

    A lost Lease cancels the body and raises :class:`LeaseLost` in its place;
    the body's writers call :meth:`LeaseElector.check` before each write.
    """
    if settings is None:
        yield None
        return
    elector = LeaseElector(api, settings)
    announce(f"waiting for {settings.where} as {settings.identity}")
    await elector.acquire()
    announce(f"holding {settings.where} as {settings.identity}")
    body = asyncio.current_task()
    assert body is not None
    inside = True

    def lost(task: asyncio.Task[None]) -> None:
        # Run by the loop after keep() ends: by then the body may have left on its own
        # (its check() saw the same deadline pass), and a cancel would hit the caller's next await.
        if inside and not task.cancelled():
            body.cancel()

    keeping = asyncio.create_task(elector.keep(), name="lease")
    keeping.add_done_callback(lost)
    try:
        yield elector
    finally:
        inside = False
        if keeping.done():
            if not keeping.cancelled():
                keeping.result()  # raises the LeaseLost that stopped the body
        else:
            keeping.cancel()
            await asyncio.gather(keeping, return_exceptions=True)
            await elector.release()
