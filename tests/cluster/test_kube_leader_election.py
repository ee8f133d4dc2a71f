"""Two replicas of ``kueuestream run --kubeconfig --leader-elect`` on one cluster, one SIGKILLed."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from tests.cluster.kube_rig import Cli, cluster, eventually, is_true, start_cli
from tests.helpers import queued_job

pytestmark = pytest.mark.kube

DURATION, RENEW, RETRY = 4.0, 3.0, 0.5


async def replica(kube_config: str, lease: str, name: str, log_dir: Path) -> Cli:
    return await start_cli(
        "run",
        "--kubeconfig",
        kube_config,
        "--log-dir",
        str(log_dir),
        "--leader-elect",
        "--lease",
        lease,
        "--lease-identity",
        name,
        "--lease-duration",
        str(DURATION),
        "--renew-deadline",
        str(RENEW),
        "--retry-period",
        str(RETRY),
    )


async def test_a_standby_replica_takes_over_and_nothing_is_lost_or_written_twice(
    kube_config: str, tmp_path: Path
) -> None:
    async with cluster(kube_config) as rig:
        q = await rig.quota("leader", "3")
        lease = f"{q.namespace}/kueuestream-run"
        first = await replica(kube_config, lease, "first", tmp_path / "first")
        second: Cli | None = None
        try:

            async def first_runs() -> bool:
                return first.said("running against")

            await eventually(first_runs, "the first replica holding the Lease and running", 120)
            second = await replica(kube_config, lease, "second", tmp_path / "second")

            async def second_waits() -> bool:
                return second is not None and second.said("waiting for Lease")

            await eventually(second_waits, "the second replica waiting for the Lease")
            before = [await rig.job(queued_job(q.namespace, f"before-{i}", q.local_queue)) for i in range(2)]

            async def started(jobs: list[dict[str, object]]) -> bool:
                return all([(await rig.read_job(j))["spec"].get("suspend") is False for j in jobs])

            await eventually(lambda: started(before), "the leader starting both Jobs")
            admitted = {}
            for job in before:
                workload = await rig.workload_of(job)
                assert workload is not None and is_true(workload, "Admitted")
                admitted[workload["metadata"]["name"]] = workload["metadata"]["resourceVersion"]
            assert not second.said("holding"), "\n".join(second.lines)

            first.process.send_signal(signal.SIGKILL)
            killed = time.monotonic()

            async def second_holds() -> bool:
                return second is not None and second.said("holding Lease")

            await eventually(second_holds, "the second replica taking the Lease over", 60)
            took = time.monotonic() - killed
            # Within the lease duration of the last renewal, plus the standby's polling.
            assert took <= DURATION + 2 * RETRY + 2.0, f"took over {took:.1f}s after the kill"

            after = await rig.job(queued_job(q.namespace, "after", q.local_queue))
            await eventually(lambda: started([after]), "the new leader starting a new Job")
            await asyncio.sleep(2 * RETRY)
            for job in before:
                workload = await rig.workload_of(job)
                assert workload is not None and is_true(workload, "Admitted")
                name = workload["metadata"]["name"]
                assert workload["metadata"]["resourceVersion"] == admitted[name], (
                    f"the new leader wrote {name} again"
                )
        finally:
            await first.stop(signal.SIGKILL)
            if second is not None:
                await second.stop()
        assert second.process.returncode == 0, "\n".join(second.lines)
