"""The names MultiKueue shares with upstream Kueue and between the pipeline's two sides.

Labels, the controller and dispatcher names and the condition reasons are
upstream Kueue's (``apis/kueue/v1beta2/multikueue_types.go``,
``apis/config/v1beta2``); the cluster-name prefix and the ``ClusterConnection``
control event are Kueuestream's own.
"""

from __future__ import annotations

# A worker cluster's watch events carry this prefix before its MultiKueueCluster's name,
# so they can never be taken for the manager's own objects.
WORKER_CLUSTER_PREFIX = "multikueue:"

# The AdmissionCheck controller that dispatches to workers.
CONTROLLER_NAME = "kueue.x-k8s.io/multikueue"
# The MultiKueueConfig an AdmissionCheck names through spec.parameters.
PARAMETERS_API_GROUP = "kueue.x-k8s.io"
PARAMETERS_KIND = "MultiKueueConfig"

# On every remote object: which manager created it (the Configuration's multiKueue.origin).
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
# On a worker's Job copy: the Workload copy it must use instead of creating one.
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
# A Secret holding a worker's kubeconfig keeps it under this key.
KUBECONFIG_SECRET_KEY = "kubeconfig"

LOCATION_SECRET = "Secret"
LOCATION_PATH = "Path"

DISPATCHER_ALL_AT_ONCE = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
DISPATCHER_INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
DISPATCHERS = (DISPATCHER_ALL_AT_ONCE, DISPATCHER_INCREMENTAL)

# Upstream's defaults (apis/config/v1beta2/defaults.go).
DEFAULT_GC_INTERVAL_MS = 60_000
DEFAULT_ORIGIN = "multikueue"
DEFAULT_WORKER_LOST_TIMEOUT_MS = 15 * 60_000
DEFAULT_INCREMENTAL_STEP = 3
# The namespace whose Secrets hold the workers' kubeconfigs (upstream: the config namespace).
DEFAULT_SECRETS_NAMESPACE = "kueue-system"

# The incremental dispatcher widens the nominated set after this long without a reservation
# (upstream's workloaddispatcher incrementalDispatcherRoundTimeout).
INCREMENTAL_ROUND_TIMEOUT_MS = 5 * 60_000

# The watch event the cluster side writes when a worker's client connects or loses it.
CLUSTER_CONNECTION_KIND = "ClusterConnection"
CLUSTER_CONNECTION_API_VERSION = "kueuestream.io/v1"

MULTIKUEUE_KINDS = frozenset({"MultiKueueConfig", "MultiKueueCluster"})

# The MultiKueueCluster's and the AdmissionCheck's condition (type Active) and upstream's reasons.
ACTIVE_CONDITION = "Active"
REASON_ACTIVE = "Active"
REASON_BAD_KUBECONFIG = "BadKubeConfig"
REASON_CONNECTION_FAILED = "ClientConnectionFailed"
REASON_BAD_CONFIG = "BadConfig"
REASON_SOME_ACTIVE = "SomeActiveClusters"
REASON_NO_USABLE = "NoUsableClusters"


def worker_cluster(name: str) -> str:
    """The cluster name a worker's watch events carry: the prefix and its MultiKueueCluster's name."""
    return WORKER_CLUSTER_PREFIX + name


def worker_name(cluster: str) -> str | None:
    """The MultiKueueCluster name behind a worker's cluster name; None for any other cluster."""
    if cluster.startswith(WORKER_CLUSTER_PREFIX) and len(cluster) > len(WORKER_CLUSTER_PREFIX):
        return cluster[len(WORKER_CLUSTER_PREFIX) :]
    return None
