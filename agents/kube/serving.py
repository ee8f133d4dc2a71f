"""What the long-running cluster commands (``run --kubeconfig``, ``watch``, ``apply``) share.

Each runs until SIGINT or SIGTERM; each turns the same failures into the same
exit statuses: 2 for what the user must fix before starting (kubeconfig,
Configuration, a cluster without Kueue's kinds), 1 for a failure on the way
(the API server or the log refused), always as one ``error:`` line.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any, TextIO

from kubernetes_asyncio.client.exceptions import ApiException

from kueuestream.agents.kafka_commands import EXIT_FAILED, EXIT_INVALID
from kueuestream.agents.kube.api_calls import explain
from kueuestream.agents.kube.client import KubeConfigError, KubeConnection, connect
from kueuestream.agents.kube.config_file import ConfigFileError
from kueuestream.agents.kube.lease import LeaseElector, LeaseLost, LeaseSettings, leadership
from kueuestream.agents.kube.watcher import MissingKinds
from kueuestream.streams import codec
from kueuestream.streams.kafka_log import KafkaLog
from kueuestream.streams.kafka_settings import KafkaSettings
from kueuestream.streams.log import LogError
from kueuestream.streams.schemas import AppliedRecord
from kueuestream.streams.topics import decision_key, partition_for_key

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def run_service(main: Coroutine[Any, Any, int], redact: Callable[[str], str] = str) -> int:
    """Run ``main`` to its end or a stop signal; its exit status, or the failure's as one line."""
    try:
        with contextlib.suppress(asyncio.CancelledError):
            return asyncio.run(main)
        return 0
    except (KubeConfigError, ConfigFileError, MissingKinds) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except ApiException as exc:
        print(f"error: {explain(exc)}", file=sys.stderr)
        return EXIT_FAILED
    except LeaseLost as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except LogError as exc:
        print(f"error: {redact(str(exc))}", file=sys.stderr)
        return EXIT_FAILED


def cancel_on_signals(*cancels: Callable[[], object]) -> Callable[[], None]:
    """Call every one of ``cancels`` on SIGINT or SIGTERM; returns what removes the handlers."""
    loop = asyncio.get_running_loop()

    def stop() -> None:
        for cancel in cancels:
            cancel()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop)

    def remove() -> None:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)

    return remove


def applied_batches(
    records: Sequence[AppliedRecord], partitions: int
) -> list[tuple[int, list[tuple[bytes, bytes]]]]:
    """Outcomes as ``kueue.applied`` holds them: keyed by Workload, in partition order."""
    by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
    for record in records:
        key = decision_key(record.ref.namespace, record.ref.name)
        by_partition.setdefault(partition_for_key(key, partitions), []).append((key, codec.encode(record)))
    return sorted(by_partition.items())


@contextlib.asynccontextmanager
async def connected_with_kafka(
    kubeconfig: str | None,
    context: str | None,
    broker: KafkaSettings,
    lease: LeaseSettings | None,
    out: TextIO,
) -> AsyncIterator[tuple[KubeConnection, LeaseElector | None, KafkaLog]]:
    """The cluster, the Lease once held (without ``lease``, None at once), and Kafka.

    A stop signal while waiting for the Lease ends the wait; after, the
    caller installs its own handlers.
    """
    main = asyncio.current_task()
    assert main is not None
    stop_waiting = cancel_on_signals(main.cancel)
    async with (
        await connect(kubeconfig, context) as conn,
        leadership(conn.api, lease, lambda line: print(line, file=out, flush=True)) as elector,
        KafkaLog(broker) as kafka,
    ):
        stop_waiting()
        yield conn, elector, kafka
