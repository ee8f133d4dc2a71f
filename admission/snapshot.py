"""What one scheduling cycle works on: Kueue's ``Snapshot`` of the cache.

Kueue copies its cache into a ``Snapshot`` at the start of every cycle
(``Cache.Snapshot`` in pkg/cache/scheduler), lets the cycle change the copy's
usage, and throws the copy away when the cycle ends. Copying a thousand
ClusterQueues every cycle would cost more than the cycle itself, so this
snapshot shares the cache's quota tree and keeps a journal instead: usage the
cycle only reserves (a preemptor's quota while its victims stop) or counts as
released (the victims' quota, as ``SimulateWorkloadUsageRemoval`` does) is
journaled and rolled back, newest first, when the cycle ends. Admissions are
charged to the cache itself, outside the journal, so after :meth:`rollback`
the tree holds exactly the admissions the cycle made.
"""

from __future__ import annotations

from collections.abc import Mapping

from kueuestream.admission.api.config import Configuration
from kueuestream.admission.api.kueue import ResourceFlavor
from kueuestream.admission.cache import AdmittedView, Cache
from kueuestream.admission.queues import WorkloadKey
from kueuestream.admission.quota import FR, QuotaNode
from kueuestream.admission.state import ClusterQueueRecord


class Snapshot:
    """The cycle's view of the cache, and the usage it reserved or released so far."""

    __slots__ = ("_journal", "admitted", "cluster_queues", "config", "flavors", "nodes", "preempted")

    def __init__(self, cache: Cache) -> None:
        self.config: Configuration = cache.config
        self.flavors: Mapping[str, ResourceFlavor] = cache.flavors
        self.cluster_queues: Mapping[str, ClusterQueueRecord] = cache.cqs
        self.nodes: Mapping[str, QuotaNode] = cache.cq_nodes
        self.admitted = AdmittedView(cache)
        # Workloads this cycle already chose to preempt (Kueue's PreemptedWorkloads).
        self.preempted: set[WorkloadKey] = set()
        self._journal: list[tuple[QuotaNode, FR, int]] = []

    def mark(self) -> int:
        """A point :meth:`rollback` can return to."""
        return len(self._journal)

    def reserve(self, node: QuotaNode, usage: Mapping[FR, int]) -> None:
        """Add usage to ``node`` until the cycle ends."""
        for fr, amount in sorted(usage.items()):
            node.add_usage(fr, amount)
            self._journal.append((node, fr, amount))

    def release(self, node: QuotaNode, usage: Mapping[FR, int]) -> None:
        """Take usage off ``node`` until the cycle ends."""
        for fr, amount in sorted(usage.items()):
            node.remove_usage(fr, amount)
            self._journal.append((node, fr, -amount))

    def rollback(self, mark: int = 0) -> None:
        """Undo, newest first, every reservation and release made since ``mark``."""
        journal = self._journal
        while len(journal) > mark:
            node, fr, amount = journal.pop()
            if amount > 0:
                node.remove_usage(fr, amount)
            else:
                node.add_usage(fr, -amount)
