"""Crashing the Kafka runtime mid-run: workers SIGKILLed at seeded random times, the broker killed and
resumed, with the decisions checked against the embedded runtime's after every step."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kueuestream.agents.embedded.memory_log import MemoryLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.faust_worker.processes import WorkerProcesses
from kueuestream.agents.faust_worker.publish import send_watch
from kueuestream.agents.log_entries import decode_entry
from kueuestream.streams.kafka_log import KafkaLog
from kueuestream.streams.schemas import DecisionRecord
from tests.pipeline.checks import Limits, UsageTracker, assert_exactly_once, decode_all, per_workload
from tests.pipeline.embedded_run import raw_topic
from tests.pipeline.kafka_run import TIMEOUT, TopicReader, read_topic

REPO = Path(__file__).resolve().parents[2]
KAFKA_SH = REPO / "scripts" / "kafka.sh"
SEED_VARIABLE = "KUEUESTREAM_KILL_SEED"


def kill_seed() -> int:
    """``KUEUESTREAM_KILL_SEED`` if set, else a fresh one; printed, so a failing run can be repeated."""
    value = os.environ.get(SEED_VARIABLE, "").strip()
    seed = int(value) if value else random.SystemRandom().randrange(2**32)
    print(f"kill seed {seed} (run again with {SEED_VARIABLE}={seed})")
    return seed


@dataclass
class Reference:
    """The embedded run, step by step: after each step, each admission partition's length and
    every decision so far (per partition)."""

    admission: list[list[int]] = field(default_factory=list)
    decisions: list[list[list[DecisionRecord]]] = field(default_factory=list)

    @classmethod
    def of(cls, steps: list[list[bytes]]) -> Reference:
        log = MemoryLog()
        pipeline = EmbeddedPipeline(log)
        ref = cls()
        for step in steps:
            pipeline.submit_raw(step)
            pipeline.pump()
            ref.admission.append([len(p) for p in raw_topic(log, "kueue.admission")])
            ref.decisions.append([decode_all(p) for p in raw_topic(log, "kueue.decisions")])
        return ref


class WorkerKiller(threading.Thread):
    """SIGKILLs a worker chosen by ``rng`` at each of ``count`` times drawn by ``rng`` within
    ``window`` seconds, and starts it again at once, as its Deployment would."""

    def __init__(self, workers: WorkerProcesses, rng: random.Random, count: int, window: float) -> None:
        super().__init__(daemon=True)
        self.workers = workers
        self.lock = threading.Lock()
        self.plan = [
            (t, rng.randrange(workers.count)) for t in sorted(rng.uniform(0, window) for _ in range(count))
        ]
        self.kills = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        start = time.monotonic()
        try:
            for at, victim in self.plan:
                time.sleep(max(0.0, start + at - time.monotonic()))
                with self.lock:
                    self.workers.kill(victim)
                    self.workers.start(victim)
                self.kills += 1
        except BaseException as err:  # reported by the test thread
            self.error = err

    def restart_exited(self) -> list[int]:
        """Start again every worker that exited by itself (a broker outage can end one)."""
        restarted = []
        with self.lock:
            for i, proc in enumerate(self.workers.procs):
                if proc is not None and proc.poll() is not None:
                    self.workers.procs[i] = None
                    self.workers.start(i)
                    restarted.append(i)
        return restarted


# The broker the broker-kill test crashes: its own, so that its recovery reads only this
# test's topics, and the rest of the suite never sees a broker go down.
BROKER_INSTANCE = "kills"


def kafka_sh(command: str) -> str:
    """``KAFKA_INSTANCE=kills scripts/kafka.sh COMMAND``; its last output line (the bootstrap)."""
    done = subprocess.run(
        [str(KAFKA_SH), command],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "KAFKA_INSTANCE": BROKER_INSTANCE},
    )
    assert done.returncode == 0, (
        f"KAFKA_INSTANCE={BROKER_INSTANCE} scripts/kafka.sh {command} failed:\n{done.stderr[-3000:]}"
    )
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else ""


@dataclass
class Outcome:
    checked: int = 0  # decisions checked against the limits, one by one
    restarted: list[int] = field(default_factory=list)  # workers that exited by themselves


async def run_with_crashes(
    broker: str,
    w: WorkerProcesses,
    killer: WorkerKiller,
    steps: list[list[bytes]],
    limits: Limits,
    *,
    broker_kill_at: int | None = None,
    broker_down_s: float = 0.0,
) -> Outcome:
    """Send ``steps`` one at a time while ``killer`` runs; after each, wait until Kafka holds what
    the embedded runtime holds after it, and check every new decision; the last step waits for the
    killer to finish, so every kill falls inside the run. With ``broker_kill_at``, the broker is
    SIGKILLed after that step is sent and resumed ``broker_down_s`` later."""
    ref = Reference.of(steps)
    tracker = UsageTracker(limits)
    outcome = Outcome()
    parts = len(ref.decisions[-1])
    async with KafkaLog(broker) as kafka, TopicReader(broker, w.names.decisions, parts) as reader:
        seen = [0] * parts
        for i, step in enumerate(steps):
            if i == len(steps) - 1:
                await asyncio.to_thread(killer.join)
            await send_watch(kafka, w.names, step)
            if i == broker_kill_at:
                kafka_sh("kill")
                await asyncio.sleep(broker_down_s)
                kafka_sh("resume")
            deadline = time.monotonic() + 3 * TIMEOUT
            while True:
                outcome.restarted += killer.restart_exited()
                await reader.poll()
                decisions = reader.decisions()
                for p, part in enumerate(decisions):
                    for d in part[seen[p] :]:
                        tracker.apply(d)
                    seen[p] = len(part)
                got = sum(seen)
                want = sum(len(p) for p in ref.decisions[i])
                assert got <= want, f"step {i}: {got} decisions committed, the embedded runtime made {want}"
                if got == want and await admission_caught_up(kafka, w, ref.admission[i]):
                    break
                assert time.monotonic() < deadline, (
                    f"step {i}: {got} of {want} decisions after {3 * TIMEOUT:g}s"
                )
                await asyncio.sleep(0.1)
            assert_exactly_once(decisions)
            assert per_workload(decisions) == per_workload(ref.decisions[i]), (
                f"step {i}: not the embedded decisions"
            )
    outcome.checked = tracker.checked
    if killer.error is not None:
        raise killer.error
    return outcome


async def admission_caught_up(kafka: KafkaLog, w: WorkerProcesses, lengths: list[int]) -> bool:
    """Whether each admission partition holds as many distinct entries as the embedded log (a
    record sent again after a crash carries the origin of its first copy, and counts once)."""
    for p, part in enumerate(await read_topic(kafka, w.names.admission)):
        origins = {decode_entry(r.value).origin for r in part}
        if len(origins) != lengths[p]:
            return False
    return True
