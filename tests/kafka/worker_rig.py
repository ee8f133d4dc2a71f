"""A ``kueuestream worker`` on the test broker, with its metrics endpoint: the start-up the worker
tests share (topics of their own, a port, readiness after the partitions are assigned, publishing)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from kueuestream.agents.faust_worker.publish import publish_dir
from tests.cluster.kube_rig import Cli, eventually, start_cli
from tests.cluster.test_metrics_endpoint import get
from tests.cluster.test_operating_cli import port_of


@dataclass(frozen=True, slots=True)
class Worker:
    cli: Cli
    port: int  # of its metrics endpoint
    broker: str  # kafka://HOST:PORT
    prefix: str  # of its topics, new for each worker


@contextlib.asynccontextmanager
async def metrics_worker(kafka_bootstrap: str, tmp_path: Path) -> AsyncIterator[Worker]:
    """A worker with topics and a consumer group of its own, stopped on leaving."""
    ident = uuid.uuid4().hex[:8]
    prefix = f"t{ident}."
    broker = f"kafka://{kafka_bootstrap}"
    cli = await start_cli(
        "worker",
        *("--broker", broker, "--topic-prefix", prefix, "--app-id", f"ks-{ident}"),
        *("--datadir", str(tmp_path / "faust"), "--no-clock", "--metrics-port", "0"),
    )
    try:
        yield Worker(cli, await port_of(cli), broker, prefix)
    finally:
        await cli.stop()


async def until_ready(worker: Worker) -> None:
    async def ready() -> bool:
        return (await asyncio.to_thread(get, worker.port, "/readyz"))[0] == 200

    # A Faust worker takes its partitions only after a rebalance, slow on a busy machine.
    await eventually(ready, "the worker assigned its partitions", 240)


async def publish(worker: Worker, tmp_path: Path, files: dict[str, str]) -> None:
    """Write ``files`` (name: YAML) into a folder and publish it to the worker's topics."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for name, text in files.items():
        (manifests / name).write_text(text)
    assert await asyncio.to_thread(publish_dir, str(manifests), worker.broker, prefix=worker.prefix) == 0
