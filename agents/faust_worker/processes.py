"""Faust workers as child processes: ``kueuestream worker`` started, watched and stopped.

The Kafka tests and the pipeline benchmark run real workers this way: ``count``
processes of one app (one consumer group) on one set of topics, each with its
own Faust data directory and one log file per start under a work directory;
``snapshot_every`` is passed as ``--snapshot-every`` (None: the worker's default);
``static`` gives worker ``i`` the ``--instance-id`` ``{app_id}-{i}``, kept across its restarts.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from kueuestream.agents.faust_worker.publish import ensure_topics
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams.kafka_log import KafkaLog

# What Faust logs (at level info) when a worker has its partitions, and when a rebalance takes them.
READY = "Worker ready"
REVOKING = "Revoking previously assigned partitions"
# How much of each log a failure shows.
TAIL_CHARS = 3000


class WorkerStartError(RuntimeError):
    """The workers did not come up: one exited, or the group did not settle in time."""


def group_settled(logs: Sequence[str]) -> bool:
    """Whether every worker's log shows it ready after the last rebalance it took part in.

    A worker that has not yet joined the group has no rebalance in its log, so it is not settled.
    """
    return all(log.rfind(READY) > log.rfind(REVOKING) >= 0 for log in logs)


class WorkerProcesses:
    """``count`` Faust workers of app ``app_id`` on the topics named with ``topic_prefix``.

    As a context manager: creates the topics, starts every worker and waits until the
    group has settled; on exit stops them all, and when the block raised, writes the
    tail of every worker's log to stderr.
    """

    def __init__(
        self,
        broker: str,
        count: int,
        workdir: Path,
        *,
        app_id: str,
        topic_prefix: str,
        clock: bool = True,
        loglevel: str = "info",
        snapshot_every: int | None = None,
        static: bool = False,
    ) -> None:
        self.broker = broker
        self.count = count
        self.workdir = workdir
        self.app_id = app_id
        self.prefix = topic_prefix
        self.names = TopicNames(topic_prefix)
        self.clock = clock
        self.loglevel = loglevel
        self.snapshot_every = snapshot_every
        self.static = static
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * count
        # How many times each worker was started: each start writes a log file of its own.
        self.starts = [0] * count

    @classmethod
    def isolated(
        cls,
        broker: str,
        count: int,
        workdir: Path,
        *,
        tag: str = "",
        clock: bool = True,
        snapshot_every: int | None = None,
        static: bool = False,
    ) -> WorkerProcesses:
        """Workers with an app id and topic prefix of their own, so that runs sharing a broker
        never meet; ``tag`` (letters and digits) makes the names easier to tell apart."""
        ident = uuid.uuid4().hex[:8]
        return cls(
            broker,
            count,
            workdir,
            app_id=f"ks-{ident}{tag}",
            topic_prefix=f"t{ident}{tag}.",
            clock=clock,
            snapshot_every=snapshot_every,
            static=static,
        )

    def command(self, i: int) -> list[str]:
        """The command line of worker ``i``."""
        cmd = [
            sys.executable,
            "-m",
            "kueuestream",
            "worker",
            "--broker",
            self.broker,
            "--app-id",
            self.app_id,
            "--topic-prefix",
            self.prefix,
            "--datadir",
            str(self.workdir / f"faust-{i}"),
            "--loglevel",
            self.loglevel,
        ]
        if self.snapshot_every is not None:
            cmd += ["--snapshot-every", str(self.snapshot_every)]
        if self.static:
            cmd += ["--instance-id", f"{self.app_id}-{i}"]
        return cmd if self.clock else [*cmd, "--no-clock"]

    def log_path(self, i: int) -> Path:
        """The log file of worker ``i``'s latest start."""
        return self.workdir / f"worker-{i}-{self.starts[i]}.log"

    def log_of(self, i: int) -> str:
        return self.log_path(i).read_text(errors="replace")

    def start(self, i: int) -> None:
        """Start worker ``i`` (again, after :meth:`kill`), logging to a new file."""
        if self.procs[i] is not None:
            raise ValueError(f"worker {i} is running: kill it before starting it again")
        self.starts[i] += 1
        self.workdir.mkdir(parents=True, exist_ok=True)
        with self.log_path(i).open("wb") as log:
            self.procs[i] = subprocess.Popen(
                self.command(i),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

    def kill(self, i: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to worker ``i`` and wait for it to exit."""
        proc = self.procs[i]
        if proc is None:
            raise ValueError(f"worker {i} is not running")
        proc.send_signal(sig)
        proc.wait(timeout=30)
        self.procs[i] = None

    def alive(self) -> list[int]:
        """The workers started and not yet exited."""
        return [i for i, p in enumerate(self.procs) if p is not None and p.poll() is None]

    def wait_settled(self, timeout: float = 90.0, quiet: float = 1.5) -> None:
        """Wait until every running worker is ready after the group's last rebalance, and no log
        has grown for ``quiet`` seconds (a rebalance can follow a worker that looks ready).

        Raises :class:`WorkerStartError` when a worker exits meanwhile or the time runs out.
        """
        deadline = time.monotonic() + timeout
        last: list[str] = []
        while True:
            self._raise_if_exited()
            logs = [self.log_of(i) for i in self.alive()]
            ready = bool(logs) and group_settled(logs)
            if ready and logs == last:
                return
            if time.monotonic() > deadline:
                message = f"the {self.count} workers of {self.app_id} did not settle in {timeout:g}s"
                raise WorkerStartError(f"{message}\n{self.tails()}")
            last = logs if ready else []
            time.sleep(quiet)

    def _raise_if_exited(self) -> None:
        for i, proc in enumerate(self.procs):
            if proc is not None and proc.poll() is not None:
                raise WorkerStartError(
                    f"worker {i} of {self.app_id} exited with code {proc.returncode}:\n"
                    f"{self.log_of(i)[-TAIL_CHARS:]}"
                )

    def stop(self) -> None:
        """Stop every running worker: SIGTERM, then SIGKILL for one that does not exit in 15 s."""
        running = [(i, p) for i, p in enumerate(self.procs) if p is not None]
        for _, proc in running:
            proc.terminate()
        for i, proc in running:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)
            self.procs[i] = None

    def tails(self) -> str:
        """The end of every log file the workers wrote, each under its name."""
        return "".join(
            f"--- {log.name} ---\n{log.read_text(errors='replace')[-TAIL_CHARS:]}\n"
            for log in sorted(self.workdir.glob("worker-*.log"))
        )

    def __enter__(self) -> Self:
        # Created once here rather than by every worker at once as it starts.
        asyncio.run(_create_topics(self.broker, self.names))
        try:
            for i in range(self.count):
                self.start(i)
            self.wait_settled()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
        if exc_type is not None:
            print(self.tails(), file=sys.stderr, end="")


async def _create_topics(broker: str, names: TopicNames) -> None:
    async with KafkaLog(broker) as kafka:
        await ensure_topics(kafka, names)
