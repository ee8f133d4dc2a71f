"""``kueuestream run --kubeconfig --metrics-port 0 [--shadow]`` as an operator runs it, in a process."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import orjson
import pytest

from kueuestream.agents.kube.rest import WORKLOADS
from tests.cluster.kube_rig import Cli, cluster, eventually, start_cli
from tests.cluster.test_metrics_endpoint import get, scrape, value, workload

pytestmark = pytest.mark.kube


async def start(kube_config: str, log_dir: Path, *flags: str) -> Cli:
    return await start_cli(
        "run", "--kubeconfig", kube_config, "--log-dir", str(log_dir), "--metrics-port", "0", *flags
    )


async def port_of(replica: Cli) -> int:
    return await replica.announced_port(
        "metrics on port ", r"metrics on port (\d+): /metrics, /healthz, /readyz"
    )


async def test_shadow_run_serves_metrics_and_writes_nothing(kube_config: str, tmp_path: Path) -> None:
    """The announced port answers /healthz at once and /readyz once synced; --shadow leaves the
    Workload's status to the other controller and keeps the report and the metric."""
    async with cluster(kube_config) as rig:
        q = await rig.quota("opcli", "1")
        report = tmp_path / "shadow.json"
        replica = await start(kube_config, tmp_path / "log", "--shadow", "--shadow-report", str(report))
        try:
            port = await port_of(replica)
            assert await asyncio.to_thread(get, port, "/healthz") == (200, "ok\n")

            async def ready() -> bool:
                return (await asyncio.to_thread(get, port, "/readyz"))[0] == 200

            await eventually(ready, "/readyz ready", 120)
            assert replica.said("running against")
            await rig.create(WORKLOADS, workload(q.namespace, "w", "1", q.local_queue))

            async def admitted_by_us() -> bool:
                s = await scrape(port)
                return (
                    value(
                        s,
                        "kueue_admitted_workloads_total",
                        cluster_queue=q.cluster_queue,
                        priority_class="",
                        replica_role="standalone",
                    )
                    == 1
                )

            await eventually(admitted_by_us, "our admission counted")
            s = await scrape(port)
            # Other tests' Workloads on the shared API server may differ; this test's must not.
            shown = orjson.loads(report.read_bytes())
            here = [w for w in shown["workloads"] if w["namespace"] == q.namespace]
            elsewhere = sum(
                any(d["field"] == "flavors" for d in w["differences"])
                for w in shown["workloads"]
                if w["namespace"] != q.namespace
            )
            assert here == []
            assert value(s, "kueuestream_shadow_differences", kind="flavors") == elsewhere
            live = await rig.get(WORKLOADS, q.namespace, "w")
            assert live is not None and not live.get("status"), live
        finally:
            await replica.stop()
        assert replica.process.returncode == 0, "\n".join(replica.lines)
        assert replica.said("0 API writes"), "\n".join(replica.lines)


async def test_a_standby_replica_is_alive_and_not_ready(kube_config: str, tmp_path: Path) -> None:
    """With --leader-elect, the replica waiting for the Lease answers /healthz and not /readyz."""
    async with cluster(kube_config) as rig:
        ns = await rig.namespace("standby")
        lease = ["--leader-elect", "--lease", f"{ns}/kueuestream-run"]
        first = await start(kube_config, tmp_path / "first", *lease, "--lease-identity", "first")
        second: Cli | None = None
        try:
            first_port = await port_of(first)

            async def first_ready() -> bool:
                return (await asyncio.to_thread(get, first_port, "/readyz"))[0] == 200

            await eventually(first_ready, "the leader ready", 120)
            second = await start(kube_config, tmp_path / "second", *lease, "--lease-identity", "second")
            second_port = await port_of(second)

            async def second_waits() -> bool:
                return second is not None and second.said("waiting for Lease")

            await eventually(second_waits, "the second replica waiting for the Lease")
            assert await asyncio.to_thread(get, second_port, "/healthz") == (200, "ok\n")
            assert (await asyncio.to_thread(get, second_port, "/readyz"))[0] == 503
        finally:
            await first.stop(signal.SIGTERM)
            if second is not None:
                await second.stop()
