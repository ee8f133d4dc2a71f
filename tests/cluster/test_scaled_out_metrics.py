"""``watch`` and ``apply --shadow`` with ``--metrics-port``, as processes, on a real API server and broker."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from tests.cluster.kube_rig import Cli, cluster, eventually, start_cli
from tests.cluster.test_metrics_endpoint import get, scrape, value
from tests.cluster.test_operating_cli import port_of

pytestmark = [pytest.mark.kube, pytest.mark.kafka]


async def command(*argv: str) -> Cli:
    return await start_cli(*argv, "--metrics-port", "0")


async def test_watch_and_apply_serve_health_readiness_and_lag(
    kube_config: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """watch is ready once its first list is in kueue.watch; apply --shadow once it has read the
    topics, and then reports no lag on kueue.watch and no shadow difference."""
    async with cluster(kube_config):
        prefix = f"t{uuid.uuid4().hex[:8]}."
        broker = ["--broker", f"kafka://{kafka_bootstrap}", "--topic-prefix", prefix]
        watch = await command("watch", "--kubeconfig", kube_config, "--cluster", "t", *broker)
        apply: Cli | None = None
        try:
            watch_port = await port_of(watch)
            assert await asyncio.to_thread(get, watch_port, "/healthz") == (200, "ok\n")

            async def ready(port: int) -> bool:
                return (await asyncio.to_thread(get, port, "/readyz"))[0] == 200

            await eventually(lambda: ready(watch_port), "watch ready", 120)

            async def announced() -> bool:
                return watch.said("watching")

            await eventually(announced, "watch announcing its first list")

            apply = await command("apply", "--kubeconfig", kube_config, "--shadow", *broker)
            apply_port = await port_of(apply)
            await eventually(lambda: ready(apply_port), "apply ready", 120)

            async def caught_up() -> bool:
                s = await scrape(apply_port)
                return (
                    value(s, "kueuestream_pipeline_lag_records", topic=f"{prefix}kueue.watch", partition="0")
                    == 0
                )

            await eventually(caught_up, "apply caught up with kueue.watch")
            s = await scrape(apply_port)
            assert value(s, "kueuestream_shadow_differences", kind="admitted") == 0
            decisions = [
                k
                for k in s
                if k[0] == "kueuestream_pipeline_lag_records"
                and ("topic", f"{prefix}kueue.decisions") in k[1]
            ]
            assert decisions, sorted(k for k in s if k[0].startswith("kueuestream"))
        finally:
            await watch.stop()
            if apply is not None:
                await apply.stop()
        assert watch.process.returncode == 0, "\n".join(watch.lines)
        assert apply is not None and apply.process.returncode == 0, "\n".join(apply.lines)
