"""The MultiKueue dispatcher: every cluster's watch events in, dispatch decisions out.

A pure state machine in the engine's manner: :meth:`Dispatcher.apply` takes one
watch event (of the manager or of a worker, see
:func:`kueuestream.admission.multikueue.names.worker_name`) and returns the
decisions it makes; time is the events' timestamps, and :meth:`next_wakeup_ms`
says when time alone would make a decision (a lost worker's timeout, the
incremental dispatcher's round, the garbage collector).

Per manager Workload it follows upstream's ``wlReconciler.reconcileGroup``
(pkg/controller/admissionchecks/multikueue/workload.go), with the nomination
of ``nominateAndSynchronizeWorkers`` and the incremental dispatcher of
pkg/controller/workloaddispatcher. Decisions are carried out later by the
cluster side, so the dispatcher remembers what it decided (the remote copies
it created or deleted, the check state it set, the clusters it nominated, the
Job status it mirrored) and does not decide it again unless the watch shows it
undone (a copy deleted by someone else is made again; a worker back from a
loss has deletions decided again for what it still lists). A Workload without
admission checks is not kept.

What differs from upstream, on purpose:

- A Workload without a controlling owner is dispatched alone (no Job copy);
  an owner other than a batch/v1 Job is refused like upstream's missing adapter.
- A remote copy counts for its Workload only if it was created for the
  Workload's current reservation; any other copy (left on a worker that was
  lost, from before an eviction) is deleted when seen.
- Ties between copies admitted in the same second go to the one whose
  admission reached the log first.
- A manager Workload evicted while its copy runs is not deactivated on the
  worker (the copies go once its quota is released), and a copy whose spec
  drifted from the manager's is not updated in place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kueuestream.admission.api.config import Configuration
from kueuestream.admission.api.kueue import AdmissionCheck
from kueuestream.admission.api.multikueue import MultiKueueCluster, MultiKueueConfig
from kueuestream.admission.decode import decode
from kueuestream.admission.multikueue import names
from kueuestream.admission.multikueue import objects as o
from kueuestream.admission.multikueue.decisions import Decision, MultiKueueAction, Observation
from kueuestream.admission.multikueue.federation import ActiveCondition, Federation

Key = tuple[str, str]  # namespace, name

PENDING, READY, RETRY, REJECTED = "Pending", "Ready", "Retry", "Rejected"


@dataclass(slots=True)
class Copy:
    """What the dispatcher decided about one worker's copy of one Workload."""

    created: bool  # False: its deletion was decided
    generation: int  # the Workload's reservation it was created for
    job_created: bool = False  # the Job copy's creation was decided (in the winner only)


@dataclass(slots=True)
class RemoteWorkload:
    manifest: Mapping[str, Any]
    conditions: dict[str, o.Condition] = field(default_factory=dict)
    # Its deletion is decided: it no longer counts, whatever a copy made since is called.
    doomed: bool = False
    # Per condition type, the watch offset at which it was first seen True: ties go to the earliest.
    true_since_offset: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class Group:
    """One manager Workload and what the dispatcher decided about it."""

    manifest: Mapping[str, Any] | None = None
    job: str = ""  # the controlling Job's name ("" for none)
    owner_gone: bool = False  # its Job was deleted
    # Counts the Workload's quota reservations; a copy belongs to the one it was created for.
    generation: int = 0
    reserved: bool = False
    # The check state set here and not yet seen on the Workload.
    check_sent: str = ""
    cluster_name: str = ""
    nominated: list[str] = field(default_factory=list)
    round_start: int | None = None
    finish_sent: bool = False
    job_status_sent: dict[str, Any] | None = None


class Dispatcher:
    def __init__(self) -> None:
        self.now = 0
        self.fed = Federation()
        self.groups: dict[Key, Group] = {}
        self.jobs: dict[Key, Mapping[str, Any]] = {}
        # worker -> Workload key -> its copy there, as the worker's watch shows it
        self.remote_workloads: dict[str, dict[Key, RemoteWorkload]] = {}
        # worker -> Workload key -> (the Job copy's name, the Job), found by its prebuilt-workload label
        self.remote_jobs: dict[str, dict[Key, tuple[str, Mapping[str, Any]]]] = {}
        # worker -> Job key -> the Workload key its label named
        self._remote_job_owner: dict[str, dict[Key, Key]] = {}
        # Workload key -> worker -> what was decided about its copy there
        self.copies: dict[Key, dict[str, Copy]] = {}
        # manager Job key -> the Workloads it controls
        self._job_workloads: dict[Key, set[Key]] = {}
        self.deadlines: dict[Key, int] = {}
        self.last_gc: int | None = None
        # The object the Configuration came from (a Configuration, or a ConfigMap carrying it).
        self._config_source: tuple[str, str, str] | None = None
        # (worker, Workload key): remote objects the garbage collector would delete.
        self._orphans: set[tuple[str, Key]] = set()
        self.cluster_status_sent: dict[str, tuple[bool, str, str]] = {}
        self.check_active_sent: dict[str, tuple[bool, str, str]] = {}
        self._in_batch = False
        self._conditions_dirty = False
        self._out: list[Decision] = []
        self._cause = 0

    # --- the entry points -------------------------------------------------------------

    def next_wakeup_ms(self) -> int | None:
        """The earliest time at which time alone makes a decision, if any."""
        times = list(self.deadlines.values())
        gc = self._next_gc()
        if gc is not None:
            times.append(gc)
        return min(times) if times else None

    def tick(self, time_ms: int, offset: int) -> list[Decision]:
        """Time passes (a clock tick or a progress note in the watch log)."""
        self._begin(time_ms, offset)
        for key in sorted(self._timers()):
            self._reconcile(key)
        return self._end()

    def batch_edge(self, begin: bool, time_ms: int, offset: int) -> list[Decision]:
        """A batch of the watch log (a listing) begins or ends.

        Within a batch the Active conditions wait for its end, so that a listing's
        order (an AdmissionCheck before its MultiKueueConfig) shows no passing state.
        A begin inside a batch means its end was lost: the batch closes there.
        """
        self._begin(time_ms, offset)
        if self._in_batch and self._conditions_dirty:
            self._active_conditions()
        self._in_batch = begin
        self._conditions_dirty = False
        for key in sorted(self._timers()):
            self._reconcile(key)
        return self._end()

    def apply(self, event: Observation, offset: int) -> list[Decision]:
        self._begin(event.time_ms, offset)
        affected = self._timers()
        worker = names.worker_name(event.cluster)
        if event.kind == names.CLUSTER_CONNECTION_KIND:
            affected |= self._connection_event(event)
        elif worker is not None:
            affected |= self._remote_event(worker, event)
        else:
            affected |= self._manager_event(event)
        for key in sorted(affected):
            self._reconcile(key)
        return self._end()

    # --- bookkeeping ------------------------------------------------------------------

    def _begin(self, time_ms: int, offset: int) -> None:
        # Workers' clocks differ from the manager's: time never goes back.
        self.now = max(self.now, time_ms)
        self._cause = offset
        if self.last_gc is None:
            self.last_gc = self.now
        self._out = []

    def _end(self) -> list[Decision]:
        out, self._out = self._out, []
        return out

    def _emit(self, action: MultiKueueAction, **fields: Any) -> None:
        self._out.append(Decision(time_ms=self.now, cause=self._cause, action=action, **fields))

    def _next_gc(self) -> int | None:
        """The next run of the garbage collector, while it has something to collect.

        It runs at most once per gcInterval, and only while a connected worker holds
        remote objects whose manager Workload is gone and whose deletion is not
        decided yet; so the clock is not ticked for nothing, and a runtime that
        advances its clock to the last wakeup comes to an end.
        """
        interval = self.fed.settings.gc_interval
        if interval <= 0 or self.last_gc is None:
            return None
        if not any(self.fed.connected(worker) for worker, _ in self._orphans):
            return None
        return self.last_gc + interval

    def _orphan_check(self, worker: str, key: Key) -> None:
        """Keep :attr:`_orphans` up to date for one worker's objects of one Workload."""
        held = key in self.remote_workloads.get(worker, {}) or key in self.remote_jobs.get(worker, {})
        group = self.groups.get(key)
        copy = self._copy(worker, key)
        if held and (group is None or group.manifest is None) and (copy is None or copy.created):
            self._orphans.add((worker, key))
        else:
            self._orphans.discard((worker, key))

    def _orphan_check_all(self, key: Key) -> None:
        for worker in sorted(set(self.remote_workloads) | set(self.remote_jobs)):
            self._orphan_check(worker, key)

    def _timers(self) -> set[Key]:
        due = {key for key, at in self.deadlines.items() if at <= self.now}
        for key in due:
            del self.deadlines[key]
        gc = self._next_gc()
        if gc is not None and gc <= self.now:
            self.last_gc = self.now
            self._collect_garbage()
        return due

    def _all_groups(self) -> set[Key]:
        return set(self.groups)

    # --- events -----------------------------------------------------------------------

    def _manager_event(self, event: Observation) -> set[Key]:
        kind, key = event.kind, (event.namespace, event.name)
        if kind == "Workload":
            return self._manager_workload(key, event)
        if kind == "Job":
            return self._manager_job(key, event)
        if kind in ("Configuration", "ConfigMap"):
            return self._configuration(event)
        if kind in ("AdmissionCheck", "MultiKueueConfig", "MultiKueueCluster"):
            self._federation_object(event)
            self._conditions_changed()
            return self._all_groups()
        return set()

    def _decoded(self, event: Observation) -> Any:
        if event.deleted or event.object is None:
            return None
        decoded = decode(event.object)
        return decoded.obj if not decoded.errors else None

    def _configuration(self, event: Observation) -> set[Key]:
        obj = self._decoded(event)
        source = (event.kind, event.namespace, event.name)
        if event.kind == "ConfigMap" and not isinstance(obj, Configuration) and source != self._config_source:
            return set()  # a ConfigMap that never carried the Configuration
        self._config_source = source if isinstance(obj, Configuration) else None
        settings = obj.multikueue if isinstance(obj, Configuration) else Configuration().multikueue
        if settings == self.fed.settings:
            return set()
        self.fed.settings = settings
        return self._all_groups()

    def _federation_object(self, event: Observation) -> None:
        obj = self._decoded(event)
        name = event.name
        if event.kind == "AdmissionCheck":
            if isinstance(obj, AdmissionCheck) and obj.spec.controller_name == names.CONTROLLER_NAME:
                self.fed.checks[name] = obj
            else:
                self.fed.checks.pop(name, None)
        elif event.kind == "MultiKueueConfig":
            if isinstance(obj, MultiKueueConfig):
                self.fed.configs[name] = obj
            else:
                self.fed.configs.pop(name, None)
        elif isinstance(obj, MultiKueueCluster):
            self.fed.clusters[name] = obj
            self._cluster_status(name)
        else:
            self.fed.clusters.pop(name, None)
            self.cluster_status_sent.pop(name, None)

    def _connection_event(self, event: Observation) -> set[Key]:
        worker = names.worker_name(event.cluster) or event.name
        body = event.object or {}
        connected = body.get("connected") is True
        reason = body.get("reason") if isinstance(body.get("reason"), str) else ""
        message = body.get("message") if isinstance(body.get("message"), str) else ""
        flipped = self.fed.set_connection(worker, connected, str(reason), str(message), self.now)
        if flipped and connected:
            # Back from a loss: what it holds is listed again, so deletions decided meanwhile
            # are decided again for whatever is still there.
            for key in sorted(self.copies):
                copy = self.copies[key].get(worker)
                if copy is not None and not copy.created:
                    self._drop_copy(worker, key)
        self._cluster_status(worker)
        self._conditions_changed()
        return self._all_groups() if flipped else set()

    def _cluster_status(self, cluster: str) -> None:
        cond = self.fed.cluster_condition(cluster)
        if cond is None:
            return
        self._emit_condition(MultiKueueAction.SET_CLUSTER_STATUS, self.cluster_status_sent, cluster, cond)

    def _emit_condition(
        self,
        action: MultiKueueAction,
        sent: dict[str, tuple[bool, str, str]],
        name: str,
        cond: ActiveCondition,
    ) -> None:
        """Decide an Active condition unless it is the one last decided for ``name``."""
        state = (cond.active, cond.reason, cond.message)
        if sent.get(name) == state:
            return
        sent[name] = state
        self._emit(action, name=name, active=cond.active, reason=cond.reason, message=cond.message)

    def _conditions_changed(self) -> None:
        if self._in_batch:
            self._conditions_dirty = True
        else:
            self._active_conditions()

    def _active_conditions(self) -> None:
        for name in sorted(set(self.fed.checks) | set(self.check_active_sent)):
            cond = self.fed.check_condition(name)
            if cond is None:
                self.check_active_sent.pop(name, None)
                continue
            self._emit_condition(MultiKueueAction.SET_CHECK_ACTIVE, self.check_active_sent, name, cond)

    def _manager_workload(self, key: Key, event: Observation) -> set[Key]:
        if key not in self.groups and (event.deleted or not o.check_states(event.object)):
            # No admission check, no dispatch: a pipeline without MultiKueue keeps nothing here.
            return set()
        group = self.groups.setdefault(key, Group())
        had = group.manifest is not None
        group.manifest = None if event.deleted else event.object
        if had != (group.manifest is not None):
            self._orphan_check_all(key)
        manifest = group.manifest
        if manifest is None:
            # A Workload made again under this name starts afresh (its copies stay counted).
            self._forget_reservation(key, group)
            group.reserved = False
            group.finish_sent = False
            return {key}
        owner = o.controller_owner(manifest)
        job = owner.name if owner is not None and owner.is_job else ""
        if job != group.job:
            if group.job:
                self._job_workloads.get((key[0], group.job), set()).discard(key)
            if job:
                self._job_workloads.setdefault((key[0], job), set()).add(key)
            group.job = job
        conds = o.conditions(manifest)
        reserved = o.is_true(conds, "QuotaReserved")
        if reserved and not group.reserved:
            group.generation += 1
        if not reserved:
            self._forget_reservation(key, group)
        group.reserved = reserved
        check = self._mk_check(manifest)
        if check is not None and group.check_sent and o.check_states(manifest).get(check) == group.check_sent:
            group.check_sent = ""  # the Workload shows what was set
        return {key}

    def _forget_reservation(self, key: Key, group: Group) -> None:
        """What held for the Workload's last reservation; an eviction clears the cluster and the
        nomination as upstream's evict.go does (the nomination through a decision, at reconcile)."""
        group.check_sent = ""
        group.cluster_name = ""
        group.round_start = None
        group.job_status_sent = None
        self.deadlines.pop(key, None)

    def _manager_job(self, key: Key, event: Observation) -> set[Key]:
        if event.deleted or event.object is None:
            self.jobs.pop(key, None)
        else:
            self.jobs[key] = event.object
        affected = set(self._job_workloads.get(key, ()))
        for wl_key in affected:
            self.groups[wl_key].owner_gone = event.deleted
        return affected

    def _remote_event(self, worker: str, event: Observation) -> set[Key]:
        touched = self._remote_object(worker, event)
        for key in sorted(touched | {(event.namespace, event.name)}):
            self._orphan_check(worker, key)
        return {key for key in touched if key in self.groups}

    def _remote_object(self, worker: str, event: Observation) -> set[Key]:
        """Take in a worker's object; the Workloads it concerns."""
        key = (event.namespace, event.name)
        ours = event.object is not None and (
            o.labels(event.object).get(names.ORIGIN_LABEL) == self.fed.settings.origin
        )
        if event.kind == "Workload":
            held = self.remote_workloads.setdefault(worker, {})
            if event.deleted or not ours or event.object is None:
                gone = held.pop(key, None)
                copy = self._copy(worker, key)
                replaced = gone is not None and gone.doomed and copy is not None and copy.created
                if event.deleted and not replaced:
                    # Gone from the worker: a deletion is done; a copy someone else deleted is made
                    # again. A doomed copy gone while a new one is on its way leaves the new one be.
                    self._drop_copy(worker, key)
                return {key}
            remote = held.get(key)
            uid = o.metadata(event.object).get("uid")
            if remote is None or (uid and uid != o.metadata(remote.manifest).get("uid")):
                remote = RemoteWorkload(event.object)  # a new object under that name
            remote.manifest = event.object
            remote.conditions = conds = o.conditions(event.object)
            for kind in ("Admitted", "QuotaReserved", "Evicted", "Finished"):
                if o.is_true(conds, kind):
                    remote.true_since_offset.setdefault(kind, self._cause)
                else:
                    remote.true_since_offset.pop(kind, None)
            held[key] = remote
            return {key}
        if event.kind == "Job":
            jobs = self.remote_jobs.setdefault(worker, {})
            owners = self._remote_job_owner.setdefault(worker, {})
            old = owners.pop(key, None)
            if old is not None:
                jobs.pop(old, None)
                copy = self._copy(worker, old)
                if event.deleted and copy is not None and copy.created:
                    copy.job_created = False  # deleted by someone else: made again (SyncJob creates it)
            workload = o.labels(event.object).get(names.PREBUILT_WORKLOAD_LABEL)
            wl_key = (event.namespace, workload) if isinstance(workload, str) and workload else None
            if wl_key is not None and ours and not event.deleted and event.object is not None:
                jobs[wl_key] = (event.name, event.object)
                owners[key] = wl_key
            return {k for k in (old, wl_key) if k is not None}
        return set()

    # --- the Workload group ------------------------------------------------------------

    def _mk_check(self, manifest: Mapping[str, Any]) -> str | None:
        """The Workload's MultiKueue check (upstream's GetMultiKueueAdmissionCheck)."""
        for name in o.check_states(manifest):
            if name in self.fed.checks:
                return name
        return None

    def _check_state(self, group: Group, check: str) -> str:
        if group.check_sent:
            return group.check_sent
        assert group.manifest is not None
        return o.check_states(group.manifest).get(check, "")

    def _set_check(
        self, key: Key, group: Group, check: str, state: str, message: str, cluster: str = ""
    ) -> None:
        group.check_sent = state
        self._emit(
            MultiKueueAction.SET_CHECK_STATE,
            namespace=key[0],
            name=key[1],
            check=check,
            state=state,
            message=message,
            clusterName=cluster,
        )

    def _update_acs(self, key: Key, group: Group, check: str, old: str, state: str, message: str) -> None:
        # Upstream's updateACS records the state it leaves.
        self._set_check(key, group, check, state, f'{message}, Previously: "{old}"')

    def _set_nominated(self, key: Key, group: Group, clusters: list[str]) -> None:
        if clusters == group.nominated:
            return
        group.nominated = list(clusters)
        self._emit(MultiKueueAction.SET_NOMINATED, namespace=key[0], name=key[1], clusters=list(clusters))

    def _workers_holding(self, key: Key) -> list[str]:
        """Every worker with a copy of the Workload, decided or seen."""
        held = {c for c, copy in self.copies.get(key, {}).items() if copy.created}
        held |= {c for c, wls in self.remote_workloads.items() if key in wls}
        held |= {c for c, jobs in self.remote_jobs.items() if key in jobs}
        return sorted(held)

    def _copy(self, worker: str, key: Key) -> Copy | None:
        return self.copies.get(key, {}).get(worker)

    def _set_copy(self, worker: str, key: Key, copy: Copy) -> None:
        self.copies.setdefault(key, {})[worker] = copy

    def _drop_copy(self, worker: str, key: Key) -> None:
        held = self.copies.get(key)
        if held is not None:
            held.pop(worker, None)
            if not held:
                del self.copies[key]
        self._orphan_check(worker, key)

    def _delete_copy(self, worker: str, key: Key, group: Group | None) -> None:
        """Delete the Job copy, then the Workload copy (upstream's RemoveRemoteObjects), once."""
        copy = self._copy(worker, key)
        if copy is not None and not copy.created:
            return  # already decided
        targets = []
        remote_job = self.remote_jobs.get(worker, {}).get(key)
        job_name = ""
        if remote_job is not None:
            job_name = remote_job[0]
        elif group is not None and copy is not None and copy.job_created:
            job_name = group.job  # decided, not seen yet
        if job_name:
            targets.append(o.ref("Job", key[0], job_name))
        targets.append(o.ref("Workload", key[0], key[1]))
        remote = self.remote_workloads.get(worker, {}).get(key)
        if remote is not None:
            remote.doomed = True
        self._set_copy(worker, key, Copy(created=False, generation=copy.generation if copy else 0))
        self._orphan_check(worker, key)
        self._emit(
            MultiKueueAction.DELETE_REMOTE, cluster=worker, namespace=key[0], name=key[1], objects=targets
        )

    def _delete_all(self, key: Key, group: Group | None, keep: str = "") -> None:
        for worker in self._workers_holding(key):
            if worker != keep:
                self._delete_copy(worker, key, group)

    def _live_copies(self, key: Key, group: Group, clusters: Iterable[str]) -> dict[str, RemoteWorkload]:
        """Copies of the Workload's current reservation on connected workers (upstream's group.remotes)."""
        out: dict[str, RemoteWorkload] = {}
        for worker in clusters:
            copy = self._copy(worker, key)
            remote = self.remote_workloads.get(worker, {}).get(key)
            if (
                remote is not None
                and not remote.doomed
                and copy is not None
                and copy.created
                and copy.generation == group.generation
                and self.fed.connected(worker)
            ):
                out[worker] = remote
        return out

    def _best_match(self, remotes: Mapping[str, RemoteWorkload], kind: str) -> tuple[str, o.Condition] | None:
        """The copy whose condition turned True first (upstream's bestMatchByCondition)."""
        best: tuple[int, int, str] | None = None
        found: tuple[str, o.Condition] | None = None
        for worker, remote in remotes.items():
            cond = remote.conditions.get(kind)
            if cond is None or cond.status != "True":
                continue
            rank = (cond.since_ms, remote.true_since_offset.get(kind, self._cause), worker)
            if best is None or rank < best:
                best, found = rank, (worker, cond)
        return found

    def _create_job_copy(self, key: Key, group: Group, worker: str) -> None:
        """The Job copy, in the worker whose copy was admitted only (upstream's SyncJob, step 6b)."""
        if not group.job or key in self.remote_jobs.get(worker, {}):
            return
        copy = self._copy(worker, key)
        job = self.jobs.get((key[0], group.job))
        if copy is None or not copy.created or copy.job_created or job is None:
            return
        copy.job_created = True
        self._emit(
            MultiKueueAction.CREATE_REMOTE,
            cluster=worker,
            namespace=key[0],
            name=key[1],
            objects=[o.job_copy(job, key[1], self.fed.settings.origin)],
        )

    def _sync_job_status(self, key: Key, group: Group, worker: str) -> None:
        """Mirror the worker Job's status onto the manager's Job (upstream's SyncJob)."""
        if not group.job:
            return
        remote_job = self.remote_jobs.get(worker, {}).get(key)
        if remote_job is None:
            return
        remote_status = dict(o.status(remote_job[1]))
        if remote_status == group.job_status_sent or (not remote_status and group.job_status_sent is None):
            return  # nothing new, or nothing yet
        group.job_status_sent = remote_status
        self._emit(
            MultiKueueAction.SYNC_JOB_STATUS,
            cluster=worker,
            namespace=key[0],
            name=group.job,
            object=remote_status,
        )

    def _reconcile(self, key: Key) -> None:
        group = self.groups.get(key)
        if group is None:
            return
        manifest = group.manifest
        if manifest is None or group.owner_gone:
            # The manager's Workload or Job is gone: every copy goes (upstream's Reconcile, isDeleted).
            self._delete_all(key, group)
            if manifest is None and key not in self.copies:
                del self.groups[key]
                self.deadlines.pop(key, None)
                if group.job:
                    self._job_workloads.get((key[0], group.job), set()).discard(key)
            return
        check = self._mk_check(manifest)
        if check is None:
            return
        state = self._check_state(group, check)
        if state == REJECTED:
            return
        # Copies not made for the current reservation are stale wherever they are.
        for worker in self._workers_holding(key):
            copy = self._copy(worker, key)
            if copy is None or (copy.created and copy.generation != group.generation):
                self._delete_copy(worker, key, group)
        owner = o.controller_owner(manifest)
        if owner is not None and not owner.is_job:
            self._update_acs(
                key,
                group,
                check,
                state,
                REJECTED,
                f'No multikueue adapter found for owner kind "{owner.group_version_kind()}"',
            )
            return
        conds = o.conditions(manifest)
        # 2. Finished or without quota: no copy may stay.
        if o.is_true(conds, "Finished") or not o.is_true(conds, "QuotaReserved"):
            self._delete_all(key, group)
            if not o.is_true(conds, "QuotaReserved"):
                self._set_nominated(key, group, [])
            return
        clusters = self.fed.clusters_for(check)
        if clusters is None:
            return  # the check's configuration cannot be loaded; its Active condition says why
        remotes = self._live_copies(key, group, clusters)
        # 3. A copy finished: so does the manager's Workload.
        finished = self._best_match(remotes, "Finished")
        if finished is not None:
            worker, cond = finished
            if cond.reason == "OutOfSync":
                if state == READY:
                    self._update_acs(
                        key,
                        group,
                        check,
                        state,
                        RETRY,
                        f'Remote workload on worker cluster "{worker}" is out of sync with its user job, '
                        "resetting for re-dispatch",
                    )
                return
            self._sync_job_status(key, group, worker)
            if not group.finish_sent:
                group.finish_sent = True
                self._emit(
                    MultiKueueAction.FINISH,
                    cluster=worker,
                    namespace=key[0],
                    name=key[1],
                    reason=cond.reason,
                    message=cond.message,
                )
            return
        # 4. A copy was evicted on its worker.
        evicted = self._best_match(remotes, "Evicted")
        if evicted is not None:
            if o.is_true(conds, "Evicted"):
                self._sync_job_status(key, group, evicted[0])
                return
            if state == READY:
                self._set_check(
                    key,
                    group,
                    check,
                    RETRY,
                    f'Workload evicted on worker cluster: "{group.cluster_name}", '
                    f'resetting for re-admission. Previously: "{state}"',
                )
                return
        # 6. The copy that won, if any.
        admitted = self._best_match(remotes, "Admitted")
        if group.cluster_name and group.cluster_name in remotes:
            held = remotes[group.cluster_name].conditions.get("Admitted")
            if held is not None and held.status == "True":
                admitted = (group.cluster_name, held)
        if admitted is None and state == READY:
            self._admitting_lost(key, group, check, state)
            return
        if admitted is not None:
            worker = admitted[0]
            self._delete_all(key, group, keep=worker)
            self._create_job_copy(key, group, worker)
            self._sync_job_status(key, group, worker)
            if state not in (RETRY, REJECTED) and (state != READY or group.cluster_name != worker):
                group.cluster_name = worker
                self._set_check(key, group, check, READY, f'The workload was admitted on "{worker}"', worker)
                self._set_nominated(key, group, [])
            self.deadlines.pop(key, None)
            return
        # 8. Nominate and dispatch while the check is Pending and no cluster holds it.
        if state != PENDING or group.cluster_name:
            return
        others = o.check_states(manifest)
        if any(s != READY for name, s in others.items() if name != check):
            return
        self._nominate(key, group, clusters)
        self._dispatch(key, group, clusters)

    def _admitting_lost(self, key: Key, group: Group, check: str, state: str) -> None:
        """Step 6a of reconcileGroup: a Ready check without an admitted copy in sight."""
        admitting = group.cluster_name
        if admitting and not self.fed.connected(admitting):
            conn = self.fed.connections.get(admitting)
            lost_since = conn.since_ms if conn is not None else self.now
            due = lost_since + self.fed.settings.worker_lost_timeout
            if self.now < due:
                self.deadlines[key] = due
                return
            self.deadlines.pop(key, None)
            self._update_acs(key, group, check, state, RETRY, "Admitting remote lost")
            return
        if not admitting:
            self._update_acs(
                key,
                group,
                check,
                state,
                RETRY,
                "Admission check is Ready but no admitting cluster is recorded; this is unexpected, "
                "please report it",
            )
            return
        self._update_acs(key, group, check, state, RETRY, "Admitting remote no longer exists")

    def _nominate(self, key: Key, group: Group, clusters: list[str]) -> None:
        settings = self.fed.settings
        if not settings.incremental:
            # All at once: every connected worker of the config, sorted as upstream stores them.
            self._set_nominated(key, group, sorted(c for c in clusters if self.fed.connected(c)))
            return
        # Incremental: step-size more workers in the config's order each round, rounds of 5 minutes.
        timeout = names.INCREMENTAL_ROUND_TIMEOUT_MS
        if group.round_start is not None and self.now - group.round_start <= timeout:
            self.deadlines[key] = group.round_start + timeout + 1
            return
        rest = [c for c in clusters if c not in group.nominated]
        if not rest:
            return
        self._set_nominated(key, group, group.nominated + rest[: settings.step_size])
        group.round_start = self.now
        self.deadlines[key] = self.now + timeout + 1

    def _dispatch(self, key: Key, group: Group, clusters: list[str]) -> None:
        """Copies in the nominated connected workers, none elsewhere (nominateAndSynchronizeWorkers)."""
        assert group.manifest is not None
        job = self.jobs.get((key[0], group.job)) if group.job else None
        if group.job and job is None:
            return  # its Job is not in sight yet; it comes with its watch event
        origin = self.fed.settings.origin
        for worker in clusters:
            copy = self._copy(worker, key)
            has_copy = copy is not None and copy.created and copy.generation == group.generation
            if worker in group.nominated:
                if has_copy or not self.fed.connected(worker):
                    continue
                self._set_copy(worker, key, Copy(created=True, generation=group.generation))
                self._emit(
                    MultiKueueAction.CREATE_REMOTE,
                    cluster=worker,
                    namespace=key[0],
                    name=key[1],
                    objects=[o.workload_copy(group.manifest, origin)],
                )
            elif has_copy:
                self._delete_copy(worker, key, group)

    # --- the garbage collector ----------------------------------------------------------

    def _collect_garbage(self) -> None:
        """Remote objects with our origin whose manager Workload is gone (upstream's MultiKueueGC)."""
        for worker in sorted(set(self.remote_workloads) | set(self.remote_jobs)):
            if not self.fed.connected(worker):
                continue
            keys = set(self.remote_workloads.get(worker, {})) | set(self.remote_jobs.get(worker, {}))
            for key in sorted(keys):
                group = self.groups.get(key)
                if group is None or group.manifest is None:
                    self._delete_copy(worker, key, group)
