"""The scaled-out shape on a real API server and a real broker: watch, a worker and apply over Kafka.

The same Jobs go through ``kueuestream run --kubeconfig`` and through
``kueuestream watch`` + ``kueuestream worker --cluster`` + ``kueuestream
apply``, each on a quota of its own; the Workloads end with the same statuses
(names of the quota objects aside).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

from kueuestream.agents.faust_worker.publish import ensure_topics
from kueuestream.agents.kube.apply_service import KafkaApplier
from kueuestream.agents.kube.watch_service import WatchOptions, start_watcher
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams.kafka_log import KafkaLog
from tests.cluster.kube_rig import Quota, Rig, cluster, condition, eventually, is_true, start_runtime
from tests.helpers import queued_job

pytestmark = [pytest.mark.kube, pytest.mark.kafka]

REPO = Path(__file__).resolve().parents[2]


async def scenario(rig: Rig, q: Quota, timeout_s: float = 60) -> dict[str, Any]:
    """Three one-cpu Jobs on two cpus; the first completes; the statuses once all is settled.

    The third Job is created once the first two run: Jobs created within the
    same second tie on their Workloads' creation time, and which of their
    Workloads the scheduler sees first is a race, as it is in Kueue.
    """
    jobs = [await rig.job(queued_job(q.namespace, f"j{i}", q.local_queue)) for i in range(2)]

    async def running(j: dict[str, Any]) -> bool:
        return (await rig.read_job(j))["spec"].get("suspend") is False

    async def first_two() -> bool:
        return await running(jobs[0]) and await running(jobs[1])

    await eventually(first_two, "j0 and j1 started", timeout_s)
    jobs.append(await rig.job(queued_job(q.namespace, "j2", q.local_queue)))

    async def third_waits() -> bool:
        return condition(await rig.workload_of(jobs[2]), "QuotaReserved") is not None

    await eventually(third_waits, "j2's Workload got its pending reason", timeout_s)
    assert not await running(jobs[2])
    await rig.complete(jobs[0])

    async def third() -> bool:
        return await running(jobs[2]) and is_true(await rig.workload_of(jobs[0]), "Finished")

    await eventually(third, "j0 finished and j2 started", timeout_s)
    out: dict[str, Any] = {}
    for j in jobs:
        wl = await rig.workload_of(j)
        assert wl is not None
        status = wl.get("status") or {}
        admission = status.get("admission")
        out[j["metadata"]["name"]] = {
            "conditions": sorted(
                (
                    c["type"],
                    c["status"],
                    c["reason"],
                    c["message"].replace(q.cluster_queue, "CQ").replace(q.flavor, "FLAVOR"),
                )
                for c in status.get("conditions") or []
            ),
            "admission": None
            if admission is None
            else {
                "clusterQueue": admission["clusterQueue"].replace(q.cluster_queue, "CQ"),
                "podSetAssignments": [
                    {**psa, "flavors": {r: f.replace(q.flavor, "FLAVOR") for r, f in psa["flavors"].items()}}
                    for psa in admission["podSetAssignments"]
                ],
            },
            "suspend": (await rig.read_job(j))["spec"]["suspend"],
        }
    return out


async def test_watch_workers_and_apply_over_kafka_give_the_embedded_statuses(
    kube_config: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    async with cluster(kube_config) as rig:
        embedded_quota = await rig.quota("embedded", "2")
        running = await start_runtime(rig.conn, tmp_path / "embedded-log")
        try:
            embedded = await scenario(rig, embedded_quota)
        finally:
            await running.stop()

        ident = uuid.uuid4().hex[:8]
        prefix = f"t{ident}."
        names = TopicNames(prefix)
        broker = f"kafka://{kafka_bootstrap}"
        worker_log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 (owned by the child)
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kueuestream",
                "worker",
                "--broker",
                broker,
                "--app-id",
                f"ks-{ident}",
                "--topic-prefix",
                prefix,
                "--datadir",
                str(tmp_path / "faust"),
                "--cluster",
            ],
            cwd=REPO,
            stdout=worker_log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        worker_log.close()
        tasks: list[asyncio.Task[Any]] = []
        try:
            async with KafkaLog(broker) as kafka:
                await ensure_topics(kafka, names)
                watcher = await start_watcher(
                    rig.conn, kafka, names, WatchOptions(kubeconfig="", cluster="test")
                )
                tasks.append(asyncio.create_task(watcher.run()))
                await asyncio.wait_for(watcher.synced.wait(), 120)
                applier = KafkaApplier(rig.conn, kafka, broker, names)
                await applier.start()
                tasks += [
                    asyncio.create_task(applier.follow()),
                    asyncio.create_task(applier.side.jobs.run()),
                    asyncio.create_task(applier.flusher()),
                ]
                scaled_quota = await rig.quota("scaled", "2")
                # A Faust worker takes its partitions only after a rebalance, slow on a busy machine.
                try:
                    scaled = await scenario(rig, scaled_quota, timeout_s=240)
                except AssertionError as exc:
                    ended = [t for t in tasks if t.done() and not t.cancelled()]
                    died = [f"{t.get_name()}: {t.exception()!r}" for t in ended]
                    log = (tmp_path / "worker.log").read_text(errors="replace")
                    quiet = [line for line in log.splitlines() if "buffer full" not in line]
                    raise AssertionError(
                        f"{exc}\ntasks ended: {died}\nworker log (last lines):\n" + "\n".join(quiet[-40:])
                    ) from exc
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with suppress(asyncio.CancelledError):
                        await task
                await applier.flush()
        finally:
            for task in tasks:
                task.cancel()
            worker.terminate()
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
        assert scaled == embedded, (tmp_path / "worker.log").read_text()[-3000:]
