"""Faust's Kafka producer, except that a fenced transaction no longer stops the worker.

With ``processing_guarantee="exactly_once"`` Faust keeps one transactional
producer per input partition (transactional id ``{app}-{group}-{partition}``)
and commits the partition's input offsets and table changelog writes through
it. A worker that stalls past its session timeout (a long pause, a starved
CPU) is dropped from the group, and the worker that takes over its partitions
starts producers with the same ids, which fences the stalled worker's. When
the stalled worker wakes up, its next commit through such a producer fails
with ``ProducerFenced`` and faust-streaming 0.15.3 crashes the whole app
(faust-streaming/faust#323), although its consumer is rejoining the group at
that moment and will give those partitions up.

Here a fenced transactional id is set aside instead: nothing more is sent or
committed through it (the new owner commits those offsets, and the writes of
the fenced transaction are aborted with it), and when the rebalance that
follows gives the partition back to this worker, a new producer replaces the
fenced one; when it does not, Faust stops the producer as for any revoked
partition. No decision depends on this: decisions have their own fenced
writer (``decision_writer``), and every other record is recognised by its
origin when sent twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping
from typing import Any, ClassVar

from aiokafka.errors import IllegalOperation, ProducerFenced
from faust.transport.drivers.aiokafka import Producer, Transport
from faust.types import TP

log = logging.getLogger(__name__)

# A transactional producer fails with the first once it is fenced, and with the
# second (its transaction is over) on every use after that.
_FENCED = (ProducerFenced, IllegalOperation)


class FenceTolerantProducer(Producer):
    """:class:`faust.transport.drivers.aiokafka.Producer` that sets a fenced transactional id aside."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.fenced: set[str] = set()

    async def on_start(self) -> None:
        await super().on_start()
        loop = asyncio.get_running_loop()
        previous = loop.get_exception_handler()

        def quiet_fenced(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            # Faust logs each send a fence failed ("_on_published error") and leaves its
            # future unread, which asyncio would report again as an error.
            if isinstance(context.get("exception"), _FENCED) and "never retrieved" in str(
                context.get("message", "")
            ):
                return
            if previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(quiet_fenced)

    def _set_aside(self, transactional_id: str, error: BaseException) -> None:
        if transactional_id not in self.fenced:
            self.fenced.add(transactional_id)
            log.warning(
                "transactional producer %s was fenced (%s): another worker started one for its "
                "partition, as happens when a worker stalls past its session timeout and the "
                "group moves partitions; its offsets are left to that worker, and a new producer "
                "starts if the rebalance gives the partition back",
                transactional_id,
                type(error).__name__,
            )

    async def commit_transactions(
        self,
        tid_to_offset_map: Mapping[str, Mapping[TP, int]],
        group_id: str,
        start_new_transaction: bool = True,
    ) -> None:
        # One id at a time, so that a fenced one does not keep the others from committing.
        for transactional_id, offsets in tid_to_offset_map.items():
            if transactional_id in self.fenced:
                continue
            try:
                await super().commit_transactions(
                    {transactional_id: offsets}, group_id, start_new_transaction=start_new_transaction
                )
            except _FENCED as exc:
                self._set_aside(transactional_id, exc)

    async def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp: float | None,
        headers: Any,
        *,
        transactional_id: str | None = None,
    ) -> Awaitable[Any]:
        if transactional_id is None:
            result: Awaitable[Any] = await super().send(topic, key, value, partition, timestamp, headers)
            return result
        if transactional_id in self.fenced:
            return _failed(ProducerFenced())
        try:
            sent: Awaitable[Any] = await super().send(
                topic, key, value, partition, timestamp, headers, transactional_id=transactional_id
            )
        except _FENCED as exc:
            self._set_aside(transactional_id, exc)
            return _failed(exc)
        return sent

    async def begin_transaction(self, transactional_id: str) -> None:
        # Faust begins the transactions of the partitions a rebalance assigned: one of
        # them fenced before (seen here, or only by a send in flight) gets a new producer,
        # with a new epoch, where Faust would keep the fenced one and fail every use.
        current = self._transaction_producers.get(transactional_id)
        if transactional_id in self.fenced or (current is not None and _ended(current)):
            self.fenced.discard(transactional_id)
            self._transaction_producers.pop(transactional_id, None)
            if current is not None:
                await current.stop()
        await super().begin_transaction(transactional_id)

    async def stop_transaction(self, transactional_id: str) -> None:
        self.fenced.discard(transactional_id)
        await super().stop_transaction(transactional_id)


def _failed(error: BaseException) -> asyncio.Future[Any]:
    """A send's outcome, failed as a send in flight fails: Faust logs it and goes on."""
    failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    failed.set_exception(error)
    return failed


def _ended(producer: Any) -> bool:
    """Whether aiokafka has ended this transactional producer: fenced, or another fatal error."""
    manager = getattr(producer, "_txn_manager", None)
    return manager is not None and bool(manager.is_fatal_error())


class FenceTolerantTransport(Transport):
    """Faust's aiokafka transport, making :class:`FenceTolerantProducer` its producers."""

    Producer: ClassVar[type[Producer]] = FenceTolerantProducer
