"""What the MultiKueue dispatcher reads (one watch event) and what it decides."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class MultiKueueAction(StrEnum):
    """What the dispatcher decided; the cluster side carries it out."""

    CREATE_REMOTE = "CreateRemote"  # cluster; objects: a Workload copy, or the winner's Job copy
    DELETE_REMOTE = "DeleteRemote"  # cluster; objects: [{"kind", "apiVersion", "namespace", "name"}, ...]
    SET_CHECK_STATE = "SetCheckState"  # the manager Workload's check: state, message, clusterName
    SET_NOMINATED = "SetNominatedClusters"  # the manager Workload's status.nominatedClusterNames: clusters
    SYNC_JOB_STATUS = "SyncJobStatus"  # the manager Job namespace/name; object: the worker Job's status
    FINISH = "FinishWorkload"  # the manager Workload gets Finished=True with reason and message
    SET_CLUSTER_STATUS = "SetClusterStatus"  # a MultiKueueCluster's Active condition: active, reason, message
    SET_CHECK_ACTIVE = "SetAdmissionCheckActive"  # an AdmissionCheck's Active condition


@dataclass(frozen=True, slots=True)
class Observation:
    """One watch event as the dispatcher reads it: from the manager or from a worker."""

    cluster: str
    kind: str
    api_version: str
    namespace: str
    name: str
    deleted: bool
    object: Mapping[str, Any] | None
    time_ms: int


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision; the fields mean what :class:`kueuestream.streams.schemas.MultiKueueDecision`'s do."""

    time_ms: int
    cause: int
    action: MultiKueueAction
    cluster: str = ""
    namespace: str = ""
    name: str = ""
    check: str = ""
    state: str = ""
    active: bool | None = None
    reason: str = ""
    message: str = ""
    clusterName: str = ""
    clusters: list[str] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)
    object: dict[str, Any] | None = None
