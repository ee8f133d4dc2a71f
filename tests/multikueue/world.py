"""A federation on paper: a manager and workers as watch events, the dispatch decisions carried out.

The MultiKueue agent reads every event; each decision it makes is carried out
the way the cluster side does (a remote create or delete shows up as the
worker's watch event, a status change as the manager's), and the manager's
admission engine is stood in for where MultiKueue meets it: a check set to
Retry evicts the Workload and puts the check back to Pending, as Kueue does.
"""

from __future__ import annotations

import copy
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kueuestream.admission.multikueue import names
from kueuestream.admission.timefmt import rfc3339
from kueuestream.agents.log_entries import CLOCK_TICK, batch_marker
from kueuestream.agents.multikueue import MultiKueueHandler
from kueuestream.streams import codec
from kueuestream.streams.schemas import MultiKueueAction, MultiKueueDecision, WatchEvent, WatchEventType

MANAGER = "manager"
CHECK = "mk"
NS = "team"

Key = tuple[str, str]


def condition(kind: str, status: str, reason: str, time_ms: int, message: str = "") -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": rfc3339(time_ms),
    }


def set_condition(obj: dict[str, Any], cond: dict[str, Any]) -> None:
    conds = obj.setdefault("status", {}).setdefault("conditions", [])
    conds[:] = [c for c in conds if c["type"] != cond["type"]] + [cond]


def is_true(obj: dict[str, Any], kind: str) -> bool:
    conds = obj.get("status", {}).get("conditions", [])
    return any(c["type"] == kind and c["status"] == "True" for c in conds)


@dataclass
class Worker:
    connected: bool = False
    workloads: dict[Key, dict[str, Any]] = field(default_factory=dict)
    jobs: dict[Key, dict[str, Any]] = field(default_factory=dict)


@dataclass
class World:
    clusters: tuple[str, ...] = ("w1", "w2")
    configuration: dict[str, Any] | None = None
    now: int = 1_700_000_000_000
    handler: MultiKueueHandler = field(default_factory=MultiKueueHandler)
    workers: dict[str, Worker] = field(default_factory=dict)
    workloads: dict[Key, dict[str, Any]] = field(default_factory=dict)
    jobs: dict[Key, dict[str, Any]] = field(default_factory=dict)
    events: list[WatchEvent] = field(default_factory=list)
    decisions: list[MultiKueueDecision] = field(default_factory=list)
    cluster_status: dict[str, tuple[bool | None, str, str]] = field(default_factory=dict)
    check_active: dict[str, tuple[bool | None, str, str]] = field(default_factory=dict)
    # Decisions for a worker while it is away: the executor's lane applies them when it is back.
    waiting: list[MultiKueueDecision] = field(default_factory=list)
    _queue: deque[WatchEvent] = field(default_factory=deque)
    _uids: int = 0
    # Workers whose executor lane is held up (its writes wait) while their watch goes on.
    paused: set[str] = field(default_factory=set)
    # What each worker's watch last said about each of its objects, as a relisting watcher knows it.
    _watched: dict[str, dict[tuple[str, str, str], dict[str, Any]]] = field(default_factory=dict)

    # --- set-up -----------------------------------------------------------------------

    def setup(self, connect: bool = True) -> World:
        if self.configuration is not None:
            config_version = "config.kueue.x-k8s.io/v1beta2"
            self.manager_event("Configuration", "", "config", self.configuration, config_version)
        self.manager_event(
            "AdmissionCheck",
            "",
            CHECK,
            {
                "spec": {
                    "controllerName": names.CONTROLLER_NAME,
                    "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "fleet"},
                }
            },
        )
        self.manager_event("MultiKueueConfig", "", "fleet", {"spec": {"clusters": list(self.clusters)}})
        for name in self.clusters:
            self.workers[name] = Worker()
            self.manager_event(
                "MultiKueueCluster",
                "",
                name,
                {"spec": {"clusterSource": {"kubeConfig": {"location": f"{name}-kubeconfig"}}}},
            )
            if connect:
                self.connect(name)
        return self

    def manager_event(
        self,
        kind: str,
        namespace: str,
        name: str,
        body: dict[str, Any] | None,
        api_version: str = "kueue.x-k8s.io/v1beta2",
        deleted: bool = False,
    ) -> None:
        obj = None
        if body is not None:
            meta: dict[str, Any] = {"name": name}
            if namespace:
                meta["namespace"] = namespace
            obj = {"apiVersion": api_version, "kind": kind, "metadata": meta, **body}
        self.send(
            WatchEvent(
                cluster=MANAGER,
                kind=kind,
                apiVersion=api_version,
                namespace=namespace,
                name=name,
                type=WatchEventType.DELETED if deleted else WatchEventType.ADDED,
                object=obj,
                timestamp=self.now,
            )
        )

    # --- the manager ------------------------------------------------------------------

    def submit(self, name: str, job: bool = True) -> Key:
        """A Job and its Workload, waiting in the manager with the MultiKueue check Pending."""
        key = (NS, name)
        wl: dict[str, Any] = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {
                "queueName": "lq",
                "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
            },
            "status": {"admissionChecks": [{"name": CHECK, "state": "Pending", "message": ""}]},
        }
        if job:
            job_manifest = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
                "spec": {
                    "suspend": True,
                    "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}},
                    "template": {
                        "metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u1", "app": "x"}},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"},
                    },
                },
            }
            self.jobs[key] = job_manifest
            self._manager_object(job_manifest)
            wl["metadata"]["ownerReferences"] = [
                {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": "u1", "controller": True}
            ]
        self.workloads[key] = wl
        self._manager_object(wl)
        return key

    def reserve(self, key: Key) -> None:
        """The manager's engine reserves quota; the MultiKueue check stays Pending."""
        wl = self.workloads[key]
        set_condition(wl, condition("QuotaReserved", "True", "QuotaReserved", self.now))
        self._manager_object(wl)

    def _check(self, key: Key) -> dict[str, Any]:
        checks: list[dict[str, Any]] = self.workloads[key]["status"]["admissionChecks"]
        return next(c for c in checks if c["name"] == CHECK)

    def release(self, key: Key) -> None:
        """The manager's Kueue evicts the Workload (say, preempted) and releases its quota."""
        wl = self.workloads[key]
        held = ("QuotaReserved", "Admitted")
        wl["status"]["conditions"] = [c for c in wl["status"].get("conditions", []) if c["type"] not in held]
        set_condition(wl, condition("Evicted", "True", "Preempted", self.now))
        for check in wl["status"]["admissionChecks"]:
            check["state"] = "Pending"
        self._manager_object(wl)

    def check_state(self, key: Key) -> str:
        return str(self._check(key)["state"])

    def check_message(self, key: Key) -> str:
        return str(self._check(key).get("message", ""))

    def delete_workload(self, key: Key) -> None:
        wl = self.workloads.pop(key)
        self._manager_object(wl, deleted=True)

    def delete_job(self, key: Key) -> None:
        job = self.jobs.pop(key)
        self._manager_object(job, deleted=True)

    # --- the workers ------------------------------------------------------------------

    def connect(self, name: str, connected: bool = True, reason: str = "", message: str = "") -> None:
        if name not in self.workers:
            self.workers[name] = Worker()
        self.workers[name].connected = connected
        if connected and name not in self.paused:
            # The executor's lane for the worker goes on with what waited, before the watch lists.
            waited = [d for d in self.waiting if d.cluster == name]
            self.waiting = [d for d in self.waiting if d.cluster != name]
            for decision in waited:
                self._carry_out(decision, listed=False)
        self.send(
            WatchEvent(
                cluster=names.worker_cluster(name),
                kind=names.CLUSTER_CONNECTION_KIND,
                apiVersion=names.CLUSTER_CONNECTION_API_VERSION,
                name=name,
                type=WatchEventType.MODIFIED,
                object={"connected": connected, "reason": reason, "message": message},
                timestamp=self.now,
            )
        )
        if connected:
            # A watch that starts again lists what the worker holds, and what vanished as deleted.
            worker = self.workers[name]
            held = [*worker.workloads.values(), *worker.jobs.values()]
            now_there = {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in held}
            for ident, last in sorted(self._watched.get(name, {}).items()):
                if ident not in now_there:
                    self._worker_object(name, last, deleted=True)
            for obj in held:
                self._worker_object(name, obj)

    def admit(self, worker: str, key: Key) -> None:
        """The worker's Kueue reserves quota for its copy and admits it."""
        wl = self.workers[worker].workloads[key]
        set_condition(wl, condition("QuotaReserved", "True", "QuotaReserved", self.now))
        set_condition(wl, condition("Admitted", "True", "Admitted", self.now))
        self._worker_object(worker, wl)

    def remote_evict(self, worker: str, key: Key) -> None:
        wl = self.workers[worker].workloads[key]
        set_condition(wl, condition("Evicted", "True", "Preempted", self.now))
        set_condition(wl, condition("Admitted", "False", "NoReservation", self.now))
        set_condition(wl, condition("QuotaReserved", "False", "Pending", self.now))
        self._worker_object(worker, wl)

    def remote_finish(self, worker: str, key: Key, reason: str = "Succeeded", message: str = "done") -> None:
        wl = self.workers[worker].workloads[key]
        set_condition(wl, condition("Finished", "True", reason, self.now, message))
        self._worker_object(worker, wl)

    def remote_job_status(self, worker: str, key: Key, status: dict[str, Any]) -> None:
        job = self.workers[worker].jobs[key]
        job["status"] = status
        self._worker_object(worker, job)

    def remote_delete_job(self, worker: str, key: Key) -> None:
        """Someone deletes the worker's Job copy."""
        self._worker_object(worker, self.workers[worker].jobs.pop(key), deleted=True)

    def plant(self, worker: str, key: Key, origin: str = "multikueue") -> None:
        """A copy nobody here made (a previous manager's): only the garbage collector removes it."""
        wl = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": key[1], "namespace": key[0], "labels": {names.ORIGIN_LABEL: origin}},
            "spec": {"podSets": []},
        }
        self.workers[worker].workloads[key] = wl
        self._worker_object(worker, wl)

    # --- time -------------------------------------------------------------------------

    def advance(self, ms: int) -> None:
        """Time passes; the dispatcher's wakeups come as clock ticks, as the runtime writes them."""
        until = self.now + ms
        while (due := self.handler.next_wakeup_ms()) is not None and due <= until:
            self.now = max(self.now, due)
            self.send(batch_marker(CLOCK_TICK, MANAGER, self.now))
        self.now = until

    # --- plumbing ---------------------------------------------------------------------

    def _manager_object(self, obj: dict[str, Any], deleted: bool = False) -> None:
        meta = obj["metadata"]
        self.send(
            WatchEvent(
                cluster=MANAGER,
                kind=obj["kind"],
                apiVersion=obj["apiVersion"],
                namespace=meta.get("namespace", ""),
                name=meta["name"],
                type=WatchEventType.DELETED if deleted else WatchEventType.MODIFIED,
                object=copy.deepcopy(obj),
                timestamp=self.now,
            )
        )

    def _worker_object(self, worker: str, obj: dict[str, Any], deleted: bool = False) -> None:
        if not self.workers[worker].connected:
            return  # nobody watches a lost worker
        meta = obj["metadata"]
        ident = (obj["kind"], meta.get("namespace", ""), meta["name"])
        if deleted:
            self._watched.get(worker, {}).pop(ident, None)
        else:
            self._watched.setdefault(worker, {})[ident] = copy.deepcopy(obj)
        self.send(
            WatchEvent(
                cluster=names.worker_cluster(worker),
                kind=obj["kind"],
                apiVersion=obj["apiVersion"],
                namespace=meta.get("namespace", ""),
                name=meta["name"],
                type=WatchEventType.DELETED if deleted else WatchEventType.MODIFIED,
                object=copy.deepcopy(obj),
                timestamp=self.now,
            )
        )

    def send(self, event: WatchEvent) -> None:
        self._queue.append(event)
        if len(self._queue) > 1:
            return  # being drained further up
        while self._queue:
            current = self._queue[0]
            offset = len(self.events)
            self.events.append(current)
            for decision in self.handler.handle(offset, codec.encode(current), current):
                self.decisions.append(decision)
                self._carry_out(decision)
            self._queue.popleft()

    def _must_wait(self, worker: str) -> bool:
        away = not self.workers[worker].connected or worker in self.paused
        return away or any(w.cluster == worker for w in self.waiting)

    def resume(self, worker: str) -> None:
        """The worker's lane goes on: what waited is carried out, and its watch reports it."""
        self.paused.discard(worker)
        waited = [d for d in self.waiting if d.cluster == worker]
        self.waiting = [d for d in self.waiting if d.cluster != worker]
        for decision in waited:
            self._carry_out(decision)

    def _carry_out(self, d: MultiKueueDecision, listed: bool = True) -> None:
        key = (d.namespace, d.name)
        action = d.action
        if action is MultiKueueAction.CREATE_REMOTE:
            worker = self.workers[d.cluster]
            if self._must_wait(d.cluster):
                self.waiting.append(d)
                return
            for obj in d.objects:
                meta = obj["metadata"]
                held = worker.workloads if obj["kind"] == "Workload" else worker.jobs
                obj_key = (meta["namespace"], meta["name"])
                if obj_key not in held:
                    held[obj_key] = copy.deepcopy(obj)
                    self._uids += 1
                    held[obj_key]["metadata"]["uid"] = f"uid-{self._uids}"
                    if listed:
                        self._worker_object(d.cluster, held[obj_key])
        elif action is MultiKueueAction.DELETE_REMOTE:
            worker = self.workers[d.cluster]
            if self._must_wait(d.cluster):
                self.waiting.append(d)
                return
            for ref in d.objects:
                held = worker.workloads if ref["kind"] == "Workload" else worker.jobs
                gone = held.pop((ref["namespace"], ref["name"]), None)
                if gone is not None and listed:
                    self._worker_object(d.cluster, gone, deleted=True)
        elif action is MultiKueueAction.SET_CHECK_STATE:
            wl = self.workloads.get(key)
            if wl is None:
                return
            for check in wl["status"]["admissionChecks"]:
                if check["name"] == d.check:
                    check["state"], check["message"] = d.state, d.message
            if d.clusterName:
                wl["status"]["clusterName"] = d.clusterName
            self._manager_object(wl)
            if d.state == "Retry":
                # Kueue evicts on a Retry, releases the quota and sets the checks back to Pending.
                held = ("QuotaReserved", "Admitted")
                kept = [c for c in wl["status"].get("conditions", []) if c["type"] not in held]
                wl["status"]["conditions"] = kept
                set_condition(wl, condition("Evicted", "True", "AdmissionCheck", self.now))
                for check in wl["status"]["admissionChecks"]:
                    check["state"] = "Pending"
                wl["status"].pop("clusterName", None)
                wl["status"].pop("nominatedClusterNames", None)
                self._manager_object(wl)
        elif action is MultiKueueAction.SET_NOMINATED:
            wl = self.workloads.get(key)
            if wl is not None:
                wl["status"]["nominatedClusterNames"] = list(d.clusters)
                self._manager_object(wl)
        elif action is MultiKueueAction.SYNC_JOB_STATUS:
            job = self.jobs.get(key)
            if job is not None:
                job["status"] = dict(d.object or {})
                self._manager_object(job)
        elif action is MultiKueueAction.FINISH:
            wl = self.workloads.get(key)
            if wl is not None:
                set_condition(wl, condition("Finished", "True", d.reason, self.now, d.message))
                self._manager_object(wl)
        elif action is MultiKueueAction.SET_CLUSTER_STATUS:
            self.cluster_status[d.name] = (d.active, d.reason, d.message)
        elif action is MultiKueueAction.SET_CHECK_ACTIVE:
            self.check_active[d.name] = (d.active, d.reason, d.message)

    # --- what the tests look at ---------------------------------------------------------

    def holding(self, key: Key) -> list[str]:
        """The workers holding a copy of the Workload."""
        return sorted(w for w, worker in self.workers.items() if key in worker.workloads)

    def reserving(self, key: Key) -> list[str]:
        """The connected workers whose copy of the Workload holds quota, once the deletions decided
        (some maybe waiting in a worker's lane) are done."""
        doomed = {
            d.cluster
            for d in self.waiting
            if d.action is MultiKueueAction.DELETE_REMOTE and (d.namespace, d.name) == key
        }
        return sorted(
            w
            for w, worker in self.workers.items()
            if worker.connected
            and w not in doomed
            and key in worker.workloads
            and is_true(worker.workloads[key], "QuotaReserved")
        )

    def of(self, action: MultiKueueAction) -> list[MultiKueueDecision]:
        return [d for d in self.decisions if d.action is action]

    def encoded(self) -> list[bytes]:
        return [codec.encode(d) for d in self.decisions]
