"""A watcher writing into a log's ``kueue.watch``: what ``kueuestream watch`` runs against Kafka.

Everything it needs to resume is read back from the log first (the
:class:`~kueuestream.agents.kube.watch_ledger.WatchLedger`), so a restarted
``watch`` picks up where the last one stopped. One watcher per cluster may run
at a time: two would both write every change.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kueuestream.admission.multikueue.names import DEFAULT_SECRETS_NAMESPACE
from kueuestream.agents.faust_worker.publish import ensure_topics
from kueuestream.agents.kafka_commands import run_with_kafka
from kueuestream.agents.kube.client import KubeConnection
from kueuestream.agents.kube.config_file import config_file_event
from kueuestream.agents.kube.lease import LeaseSettings
from kueuestream.agents.kube.log_sink import LogSink
from kueuestream.agents.kube.resources import kinds_to_watch
from kueuestream.agents.kube.serving import cancel_on_signals, connected_with_kafka, run_service
from kueuestream.agents.kube.watch_ledger import ledger_from_log
from kueuestream.agents.kube.watcher import Watcher, wall_clock_ms
from kueuestream.agents.metrics.serving import Served, serve_metrics
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams.kafka_settings import KafkaSettings, KafkaTarget
from kueuestream.streams.log import Log


@dataclass(frozen=True, slots=True)
class WatchOptions:
    kubeconfig: str | None  # None: in a pod, its service account
    context: str | None = None
    cluster: str | None = None  # default: the kubeconfig's name for the context's cluster
    config_file: Path | None = None
    config_map: tuple[str, str] | None = None  # namespace, name
    # run --kubeconfig on a MultiKueue manager: where the Secrets of its workers' kubeconfigs are.
    multikueue_namespace: str = DEFAULT_SECRETS_NAMESPACE


def parse_config_map(value: str) -> tuple[str, str]:
    namespace, sep, name = value.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise ValueError(
            f"--config-map {value!r}: expected NAMESPACE/NAME, such as kueue-system/kueue-manager-config"
        )
    return namespace, name


async def start_watcher(
    conn: KubeConnection,
    log: Log,
    names: TopicNames,
    options: WatchOptions,
    guard: Callable[[], None] | None = None,
) -> Watcher:
    """A watcher for ``conn``'s cluster resuming from ``log``, with the Configuration file already sent.

    ``guard`` is called before every append (a replica's Lease check).
    """
    cluster = options.cluster or conn.cluster
    ledger = await ledger_from_log(log, names.watch, cluster)
    sink = LogSink(log, names.watch)
    sink.guard = guard
    if options.config_file is not None:
        event = config_file_event(options.config_file, ledger, wall_clock_ms())
        if event is not None:
            await sink.emit([event])
            ledger.record(event)
    return Watcher(conn, sink, ledger, kinds_to_watch(options.config_map))


async def _serve(
    options: WatchOptions,
    broker: KafkaSettings,
    prefix: str,
    out: TextIO,
    lease: LeaseSettings | None,
    served: Served | None = None,
) -> int:
    names = TopicNames(prefix)
    connection = connected_with_kafka(options.kubeconfig, options.context, broker, lease, out)
    async with connection as (conn, elector, kafka):
        await ensure_topics(kafka, names)
        watcher = await start_watcher(conn, kafka, names, options, elector.check if elector else None)
        task = asyncio.create_task(watcher.run())
        if served is not None:
            served.ready = watcher.synced.is_set
        stop = cancel_on_signals(task.cancel)
        synced = asyncio.create_task(watcher.synced.wait())
        await asyncio.wait({task, synced}, return_when=asyncio.FIRST_COMPLETED)
        if synced.done() and not task.done():
            s = watcher.stats
            print(
                f"watching {len(watcher.discovery.served if watcher.discovery else [])} kinds of cluster "
                f"{watcher.cluster} ({conn.server}) into {names.watch}: listed {s.listed_objects} objects "
                f"in {s.list_seconds:.2f}s",
                file=out,
                flush=True,
            )
        try:
            await task
        except asyncio.CancelledError:
            pass
        finally:
            synced.cancel()
            stop()
        s = watcher.stats
        print(
            f"{s.events} events, {s.relists} relists, {s.bookmarks} bookmarks, {s.reconnects} reconnects, "
            f"{s.not_news} already in the log",
            file=out,
            flush=True,
        )
    return 0


def run_watch(
    options: WatchOptions,
    broker: KafkaTarget,
    *,
    prefix: str = "",
    out: TextIO | None = None,
    lease: LeaseSettings | None = None,
    metrics_port: int | None = None,
) -> int:
    """``kueuestream watch``: until SIGINT/SIGTERM; 0 on a clean stop, 2 for a usage error.

    With ``metrics_port``, ``/readyz`` is ready once the first full list is in the log.
    """
    stream = out or sys.stdout

    async def observed(settings: KafkaSettings) -> int:
        served, usable = serve_metrics(
            metrics_port, lambda line: print(line, file=stream, flush=True), Served
        )
        if not usable:
            return 2
        try:
            return await _serve(options, settings, prefix, stream, lease, served)
        finally:
            if served is not None:
                served.endpoint.stop()

    return run_with_kafka(broker, lambda s: run_service(observed(s), s.redact), failures=())
