"""What changed in the quota tree's objects since it was last built, and whose parked workloads that retries.

Kueue answers a change of a ClusterQueue, Cohort, ResourceFlavor, AdmissionCheck
or Namespace by asking its inadmissible-workload requeuer to retry the parked
workloads of the cohort trees concerned (``NotifyRetryInadmissible``,
``Manager.UpdateClusterQueue``, ``Manager.AddOrUpdateCohort``): they stay parked
until the requeuer's batch period ends, and a workload queued meanwhile is
tried first. The engine rebuilds the whole tree on any such change, so it
records here what changed, to keep the parked workloads parked and ask for the
same retries after the rebuild.

A new Configuration or a change of the DRA objects changes what workloads
request; Kueue reads those when its manager starts or a workload is created, so
the engine places every pending workload afresh then, as a restart would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kueuestream.admission.quota import QuotaNode
from kueuestream.admission.state import ClusterQueueRecord


@dataclass(slots=True)
class TreeChanges:
    """The names changed since the last build, by kind."""

    cluster_queues: set[str] = field(default_factory=set)
    cohorts: set[str] = field(default_factory=set)
    flavors: set[str] = field(default_factory=set)
    checks: set[str] = field(default_factory=set)
    # A Namespace's labels changed: any ClusterQueue's selector may now match it.
    every_tree: bool = False
    # What workloads request may have changed: every pending workload is placed afresh.
    fresh: bool = False

    def retried_roots(
        self, cqs: Mapping[str, ClusterQueueRecord], cohorts: Mapping[str, QuotaNode]
    ) -> list[str]:
        """The roots (root Cohorts, or ClusterQueues without one) of the rebuilt tree whose
        parked workloads get a retry, by name."""
        roots: set[str] = set()
        for name in sorted(cqs):
            cq = cqs[name]
            if (
                self.every_tree
                or name in self.cluster_queues
                or not self.flavors.isdisjoint(cq.flavors)
                or not self.checks.isdisjoint(cq.checks)
            ):
                roots.add(cq.node.root.name)
        roots.update(cohorts[name].root.name for name in sorted(self.cohorts) if name in cohorts)
        return sorted(roots)
