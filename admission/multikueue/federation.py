"""The federation as the dispatcher knows it: settings, checks, configs, clusters and their connections.

It answers upstream's questions about the MultiKueue objects: which check of a
Workload is MultiKueue's (``GetMultiKueueAdmissionCheck``), which clusters a
check dispatches to (``ConfigForAdmissionCheck``), which of them are connected,
and the ``Active`` conditions of a MultiKueueCluster (``clustersReconciler``)
and of a MultiKueue AdmissionCheck (``admissionCheckReconciler``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kueuestream.admission.api.kueue import AdmissionCheck
from kueuestream.admission.api.multikueue import MultiKueueCluster, MultiKueueConfig, MultiKueueSettings
from kueuestream.admission.multikueue import names


@dataclass(frozen=True, slots=True)
class Connection:
    """The last ClusterConnection event of a worker."""

    connected: bool
    reason: str
    message: str
    since_ms: int  # when it last changed between connected and not


@dataclass(frozen=True, slots=True)
class ActiveCondition:
    active: bool
    reason: str
    message: str


@dataclass(slots=True)
class Federation:
    settings: MultiKueueSettings = field(default_factory=MultiKueueSettings)
    # AdmissionCheck name -> its object, for the checks whose controller is MultiKueue's.
    checks: dict[str, AdmissionCheck] = field(default_factory=dict)
    configs: dict[str, MultiKueueConfig] = field(default_factory=dict)
    clusters: dict[str, MultiKueueCluster] = field(default_factory=dict)
    connections: dict[str, Connection] = field(default_factory=dict)

    def connected(self, cluster: str) -> bool:
        """A worker is usable once its client connected and while it stays so."""
        conn = self.connections.get(cluster)
        return cluster in self.clusters and conn is not None and conn.connected

    def set_connection(self, cluster: str, connected: bool, reason: str, message: str, now: int) -> bool:
        """Record a ClusterConnection event; True when the worker went from connected to not or back."""
        old = self.connections.get(cluster)
        flipped = old is None or old.connected != connected
        since = now if flipped or old is None else old.since_ms
        self.connections[cluster] = Connection(connected, reason, message, since)
        return flipped

    def config_name(self, check: AdmissionCheck) -> str | None:
        params = check.spec.parameters
        if (
            params is None
            or params.api_group != names.PARAMETERS_API_GROUP
            or params.kind != names.PARAMETERS_KIND
            or not params.name
        ):
            return None
        return params.name

    def clusters_for(self, check_name: str) -> list[str] | None:
        """The ordered clusters of the check's MultiKueueConfig; None when it cannot be loaded."""
        check = self.checks.get(check_name)
        if check is None:
            return None
        config_name = self.config_name(check)
        config = self.configs.get(config_name) if config_name else None
        return list(config.spec.clusters) if config is not None else None

    def cluster_condition(self, cluster: str) -> ActiveCondition | None:
        """The MultiKueueCluster's Active condition, from its last ClusterConnection event."""
        conn = self.connections.get(cluster)
        if cluster not in self.clusters or conn is None:
            return None
        if conn.connected:
            return ActiveCondition(True, names.REASON_ACTIVE, "Connected")
        return ActiveCondition(False, conn.reason or names.REASON_CONNECTION_FAILED, conn.message)

    def check_condition(self, check_name: str) -> ActiveCondition | None:
        """The MultiKueue AdmissionCheck's Active condition (upstream's admissionCheckReconciler)."""
        check = self.checks.get(check_name)
        if check is None:
            return None
        config_name = self.config_name(check)
        if config_name is None:
            return ActiveCondition(
                False,
                names.REASON_BAD_CONFIG,
                "Cannot load the AdmissionChecks parameters: spec.parameters must name a "
                f"{names.PARAMETERS_KIND} of apiGroup {names.PARAMETERS_API_GROUP}",
            )
        config = self.configs.get(config_name)
        if config is None:
            return ActiveCondition(
                False,
                names.REASON_BAD_CONFIG,
                "Cannot load the AdmissionChecks parameters: "
                f"{names.PARAMETERS_KIND} {config_name!r} not found",
            )
        missing = [c for c in config.spec.clusters if c not in self.clusters]
        inactive = [c for c in config.spec.clusters if c in self.clusters and not self.connected(c)]
        if not missing and not inactive:
            return ActiveCondition(True, names.REASON_ACTIVE, "The admission check is active")
        parts = []
        if missing:
            parts.append(f"Missing clusters: [{' '.join(missing)}]")
        if inactive:
            parts.append(f"Inactive clusters: [{' '.join(inactive)}]")
        some_usable = len(missing) + len(inactive) < len(config.spec.clusters)
        reason = names.REASON_SOME_ACTIVE if some_usable else names.REASON_NO_USABLE
        return ActiveCondition(some_usable, reason, ", ".join(parts))
