"""Admission checks: AdmissionCheck objects, the checks a ClusterQueue requires, Workload check states.

Scenarios worked out from upstream Kueue (kubernetes-sigs/kueue main, v0.19):
pkg/util/admissioncheck ``NewAdmissionChecks``, pkg/workload ``AdmissionChecksForWorkload``,
``SyncAdmittedCondition`` and pkg/workload/evict ``resetChecksOnEviction``,
pkg/controller/core workload_controller ``syncAdmissionCheckConditions`` and
``reconcileCheckBasedEviction``, pkg/cache/scheduler clusterqueue ``updateWithAdmissionChecks``.
"""

from __future__ import annotations

from typing import Any

from kueuestream.admission.api.config import Configuration
from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action, Decision, Event, EventType, ObjectRef
from kueuestream.admission.timefmt import rfc3339
from tests.helpers import (
    T0,
    Manifest,
    Run,
    cluster_queue_manifest,
    flavor_manifest,
    local_queue_manifest,
    workload_manifest,
)

PROVISIONING = "kueue.x-k8s.io/provisioning-request"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def check(name: str, controller: str = "example.com/capacity", active: bool | None = True) -> Manifest:
    """An AdmissionCheck; ``active`` is its controller's Active condition (None: no condition)."""
    out: Manifest = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": controller},
    }
    if active is not None:
        status = "True" if active else "False"
        out["status"] = {
            "conditions": [{"type": "Active", "status": status, "reason": "Ready", "message": ""}]
        }
    return out


def queue(
    strategy: list[dict[str, Any]] | None = None, v1beta1_checks: list[str] | None = None
) -> list[Manifest]:
    """Flavors on-demand then spot, 4 cpu each, in ClusterQueue ``cq`` behind LocalQueue ``lq``."""
    spec: dict[str, Any] = {}
    if strategy is not None:
        spec["admissionChecksStrategy"] = {"admissionChecks": strategy}
    if v1beta1_checks is not None:
        spec["admissionChecks"] = v1beta1_checks
    cq = cluster_queue_manifest(
        "cq",
        [(("cpu",), [("on-demand", {"cpu": 4}), ("spot", {"cpu": 4})])],
        spec=spec,
        version="v1beta1" if v1beta1_checks is not None else "v1beta2",
    )
    return [flavor_manifest("on-demand"), flavor_manifest("spot"), cq, local_queue_manifest("lq", "cq")]


def wl(name: str, cpu: int = 3) -> Manifest:
    return workload_manifest(name, "lq", {"cpu": str(cpu)})


def reported(manifest: Manifest, time_ms: int, *states: tuple[str, str, str, int | None]) -> Manifest:
    """The Workload as the watch brings it once check controllers wrote (name, state, message, delay)."""
    entries = []
    for name, state, message, requeue in states:
        entry: dict[str, Any] = {
            "name": name,
            "state": state,
            "message": message,
            "lastTransitionTime": rfc3339(time_ms),
        }
        if requeue is not None:
            entry["requeueAfterSeconds"] = requeue
        entries.append(entry)
    return {**manifest, "status": {"admissionChecks": entries}}


def loaded(docs: list[Manifest], config: Configuration | None = None) -> Run:
    r = Run(Engine(config))
    r.load_manifests(docs)
    assert not r.rejected(), r.rejected()
    return r


def cond(r: Run, name: str, type_: str) -> tuple[str, str, str]:
    c = r.condition(name, type_)
    assert c is not None, (name, type_, r.status(name))
    return c["status"], c["reason"], c["message"]


def checks(r: Run, name: str) -> list[tuple[str, str]]:
    return [(c["name"], c["state"]) for c in r.status(name).get("admissionChecks", [])]


# ------------------------------------------------------------ admitted only once every check is Ready


def test_quota_is_reserved_and_admission_waits_for_the_checks() -> None:
    """Scheduler.prepareWorkload and SyncAdmittedCondition: QuotaReserved now, Admitted once all Ready."""
    r = loaded([check("prov"), *queue([{"name": "prov"}]), wl("a")])
    assert cond(r, "a", "QuotaReserved")[0] == "True"
    assert cond(r, "a", "Admitted") == (
        "False",
        "UnsatisfiedAdmissionChecks",
        "The workload has not all checks ready",
    )
    assert checks(r, "a") == [("prov", "Pending")]
    assert [d.action for d in r.decisions if d.ref.name == "a"] == [Action.QUOTA_RESERVED]

    r.tick()
    out = r.apply(
        Event(
            EventType.UPSERT, r.time_ms, manifest=reported(wl("a"), r.time_ms, ("prov", "Ready", "ok", None))
        )
    )
    assert cond(r, "a", "Admitted") == ("True", "Admitted", "The workload is admitted")
    assert [(d.ref.name, d.action) for d in out] == [("a", Action.ADMITTED)]
    assert r.status("a")["admissionChecks"][0]["message"] == "ok"


def test_every_required_check_must_be_ready() -> None:
    """HasAllChecksReady: one Ready of two is not enough; the states are listed by name."""
    r = loaded([check("zeta"), check("alpha"), *queue([{"name": "zeta"}, {"name": "alpha"}]), wl("a")])
    assert checks(r, "a") == [("alpha", "Pending"), ("zeta", "Pending")]
    r.tick()
    r.apply(
        Event(EventType.UPSERT, r.time_ms, manifest=reported(wl("a"), r.time_ms, ("zeta", "Ready", "", None)))
    )
    assert cond(r, "a", "Admitted")[0] == "False"
    r.apply(
        Event(
            EventType.UPSERT,
            r.time_ms,
            manifest=reported(wl("a"), r.time_ms, ("zeta", "Ready", "", None), ("alpha", "Ready", "", None)),
        )
    )
    assert cond(r, "a", "Admitted")[0] == "True"


def test_without_the_observability_gate_a_workload_never_admitted_has_no_admitted_condition() -> None:
    """SyncAdmittedCondition with UnadmittedWorkloadsObservability off changes nothing while
    ``IsAdmitted`` equals reservation-and-checks-Ready: quota reserved with a check Pending
    leaves Admitted absent; with the checks Ready it is admitted."""
    config = Configuration.model_validate(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "featureGates": {"UnadmittedWorkloadsObservability": False},
        }
    )
    r = loaded([check("prov"), *queue([{"name": "prov"}]), wl("a")], config)
    assert cond(r, "a", "QuotaReserved")[0] == "True"
    assert r.condition("a", "Admitted") is None
    ready = reported(wl("a"), r.time_ms, ("prov", "Ready", "", None))
    r.apply(Event(EventType.UPSERT, r.time_ms, manifest=ready))
    assert cond(r, "a", "Admitted")[0] == "True"


def test_a_workload_arriving_with_ready_checks_is_admitted_at_reservation() -> None:
    """Check states stay while pending, so the scheduler's SyncAdmittedCondition admits at once."""
    r = loaded(
        [check("prov"), *queue([{"name": "prov"}]), reported(wl("a"), T0, ("prov", "Ready", "", None))]
    )
    assert cond(r, "a", "Admitted")[0] == "True"


def test_once_admitted_a_check_going_back_to_pending_changes_nothing() -> None:
    """The workload controller syncs Admitted only while not admitted (``!IsAdmitted``)."""
    r = loaded(
        [check("prov"), *queue([{"name": "prov"}]), reported(wl("a"), T0, ("prov", "Ready", "", None))]
    )
    r.tick()
    r.apply(
        Event(
            EventType.UPSERT, r.time_ms, manifest=reported(wl("a"), r.time_ms, ("prov", "Pending", "", None))
        )
    )
    assert cond(r, "a", "Admitted")[0] == "True"
    assert checks(r, "a") == [("prov", "Pending")]


# ------------------------------------------------------------ which checks a Workload needs


def test_a_check_on_some_flavors_is_needed_only_when_the_admission_uses_one() -> None:
    """NewAdmissionChecks and AdmissionChecksForWorkload: onFlavors narrows a check to its flavors.

    Before its admission a Workload lists only the checks on every flavor; once
    assigned, the checks on one of its flavors.
    """
    docs = [check("spot-capacity"), *queue([{"name": "spot-capacity", "onFlavors": ["spot"]}])]
    # on-demand has room for the first; the second spills to spot.
    r = loaded([*docs, wl("first"), wl("second")])
    assert r.flavors("first") == {"cpu": "on-demand"}
    assert checks(r, "first") == []
    assert cond(r, "first", "Admitted")[0] == "True"
    assert r.flavors("second") == {"cpu": "spot"}
    assert checks(r, "second") == [("spot-capacity", "Pending")]
    assert cond(r, "second", "Admitted")[0] == "False"


def test_a_pending_workload_lists_the_checks_on_every_flavor() -> None:
    """syncAdmissionCheckConditions runs for a queued workload too, with the all-flavor checks only."""
    strategy = [{"name": "everywhere"}, {"name": "spot-only", "onFlavors": ["spot"]}]
    r = loaded([check("everywhere"), check("spot-only"), *queue(strategy), wl("big", cpu=9)])
    assert cond(r, "big", "QuotaReserved")[0] == "False"
    assert checks(r, "big") == [("everywhere", "Pending")]


def test_v1beta1_admission_checks_apply_to_every_flavor() -> None:
    """v1beta1 ``spec.admissionChecks`` converts to strategy rules without onFlavors."""
    r = loaded([check("prov"), *queue(v1beta1_checks=["prov"]), wl("a")])
    assert checks(r, "a") == [("prov", "Pending")]
    assert cond(r, "a", "Admitted")[0] == "False"


# ------------------------------------------------------------ Retry and Rejected


def _engine_with(docs: list[Manifest]) -> tuple[Engine, list[Decision]]:
    engine = Engine()
    out: list[Decision] = []
    for i, doc in enumerate(docs):
        out += engine.apply(Event(EventType.UPSERT, T0, manifest=doc, batch=i < len(docs) - 1))
    return engine, out


def _status(engine: Engine, name: str) -> dict[str, Any]:
    return engine.status_of(engine.workloads[("default", name)])


def _cond(status: dict[str, Any], type_: str) -> tuple[str, str, str]:
    c = next(c for c in status["conditions"] if c["type"] == type_)
    return c["status"], c["reason"], c["message"]


def test_retry_releases_the_quota_and_requeues_after_the_checks_delay() -> None:
    """reconcileCheckBasedEviction, resetChecksOnEviction, GetMaxRetryTime, backoffWaitingTimeExpired.

    A Retry evicts the workload with the check's message; once its job stopped
    the quota is free, its checks are Pending again (the Retry counted), and it
    stays out of the queue until the reported transition time plus
    requeueAfterSeconds, when it is requeued (BackoffFinished) and reserves again.
    """
    # a and b fill both flavors.
    engine, _ = _engine_with([check("prov"), *queue([{"name": "prov"}]), wl("a", cpu=4), wl("b", cpu=4)])
    assert _cond(_status(engine, "a"), "QuotaReserved")[0] == "True"
    t1 = T0 + 5_000
    out = engine.apply(
        Event(
            EventType.UPSERT,
            t1,
            manifest=reported(wl("a", cpu=4), t1, ("prov", "Retry", "capacity gone", 60)),
        )
    )
    assert [d.action for d in out] == [Action.EVICTED]
    status = _status(engine, "a")
    assert _cond(status, "Evicted") == (
        "True",
        "AdmissionCheck",
        'Evicted due to AdmissionCheck in Retry state: "prov" (capacity gone)',
    )
    assert status["admissionChecks"] == [
        {
            "name": "prov",
            "state": "Pending",
            "lastTransitionTime": rfc3339(t1),
            "message": "Reset to Pending after eviction. Previously: Retry",
            "requeueAfterSeconds": 60,
            "retryCount": 1,
        }
    ]
    # The job stops: the quota is free for another workload while the backoff runs.
    engine.apply(Event(EventType.STOPPED, t1, ref=ObjectRef("Workload", "default", "a")))
    status = _status(engine, "a")
    assert status["requeueState"] == {"requeueAt": rfc3339(t1 + 60_000)}
    assert _cond(status, "Requeued")[:2] == ("False", "AdmissionCheck")
    assert _cond(status, "QuotaReserved")[0] == "False"
    engine.apply(Event(EventType.UPSERT, t1 + 1_000, manifest=wl("c", cpu=4)))
    assert _cond(_status(engine, "c"), "QuotaReserved")[0] == "True"
    assert engine.next_wakeup_ms() == t1 + 60_000
    # Before the time nothing moves; at it the workload queues again.
    engine.apply(Event(EventType.TICK, t1 + 59_000))
    assert _cond(_status(engine, "a"), "Requeued")[0] == "False"
    engine.apply(Event(EventType.DELETE, t1 + 59_500, ref=ObjectRef("Workload", "default", "c")))
    engine.apply(Event(EventType.TICK, t1 + 60_000))
    status = _status(engine, "a")
    assert _cond(status, "Requeued") == ("True", "BackoffFinished", "The workload backoff was finished")
    assert "requeueState" not in status
    assert _cond(status, "QuotaReserved")[0] == "True"
    assert _cond(status, "Admitted")[0] == "False"


def test_retry_without_a_delay_requeues_at_once() -> None:
    """No requeueAfterSeconds: no requeueAt, so the backoff is finished as soon as the job stopped."""
    r = loaded([check("prov"), *queue([{"name": "prov"}]), wl("a")])
    r.tick()
    r.apply(
        Event(EventType.UPSERT, r.time_ms, manifest=reported(wl("a"), r.time_ms, ("prov", "Retry", "", None)))
    )
    assert cond(r, "a", "Requeued")[:2] == ("True", "BackoffFinished")
    assert cond(r, "a", "QuotaReserved")[0] == "True"
    assert r.status("a")["admissionChecks"][0]["retryCount"] == 1
    assert [d.action for d in r.decisions if d.ref.name == "a"] == [
        Action.QUOTA_RESERVED,
        Action.EVICTED,
        Action.REQUEUED,  # the job stopped; the next TICK reserves again
        Action.QUOTA_RESERVED,
    ]


def test_a_workload_its_checks_evicted_queues_from_the_eviction_not_its_creation() -> None:
    """``Ordering.GetQueueOrderTimestamp``: a Workload evicted by its admission checks is
    ordered by the Evicted condition's time while it is marked so. Behind a StrictFIFO head
    created after it but before the eviction, which never fits, it waits."""
    docs = queue([{"name": "prov"}])
    docs[2]["spec"]["queueingStrategy"] = "StrictFIFO"
    older = workload_manifest("a", "lq", {"cpu": "4"}, created=rfc3339(T0))
    blocker = workload_manifest("b", "lq", {"cpu": "5"}, created=rfc3339(T0 + 500))
    r = loaded([check("prov"), *docs, older, blocker])
    assert cond(r, "a", "QuotaReserved")[0] == "True"
    r.tick()
    retry = reported(older, r.time_ms, ("prov", "Retry", "", None))
    r.apply(Event(EventType.UPSERT, r.time_ms, manifest=retry))
    r.tick()
    assert cond(r, "a", "Requeued")[:2] == ("True", "BackoffFinished")
    assert cond(r, "a", "QuotaReserved") == (
        "False",
        "PendingEvaluation",
        'Evicted due to AdmissionCheck in Retry state: "prov"',
    )
    assert cond(r, "b", "QuotaReserved")[1] == "ExceedsMaxQuota"


def test_rejected_deactivates_the_workload_and_frees_its_quota() -> None:
    """reconcileCheckBasedEviction with a Rejected check: SetDeactivationTarget, then the eviction
    of a deactivated workload with reason ``Deactivated`` + ``DueTo`` + ``AdmissionCheck``."""
    r = loaded([check("prov"), *queue([{"name": "prov"}]), wl("a", cpu=4), wl("b", cpu=4), wl("c", cpu=4)])
    assert r.admitted() == ["a", "b"]
    r.tick()
    r.apply(
        Event(
            EventType.UPSERT,
            r.time_ms,
            manifest=reported(wl("a", cpu=4), r.time_ms, ("prov", "Rejected", "no capacity", None)),
        )
    )
    assert cond(r, "a", "Evicted") == (
        "True",
        "DeactivatedDueToAdmissionCheck",
        'The workload is deactivated due to AdmissionCheck in Rejected state: "prov" (no capacity)',
    )
    assert cond(r, "a", "QuotaReserved")[0] == "False"
    assert r.workloads()["a"]["spec"]["active"] is False
    # Its quota went to the next workload, and it never comes back.
    assert r.admitted() == ["b", "c"]
    r.delete("Workload", "default", "b")
    r.tick(120_000)
    r.apply(Event(EventType.TICK, r.time_ms))
    assert r.admitted() == ["c"]


def test_a_stale_report_does_not_undo_a_reset() -> None:
    """The echo of a status written before an eviction reset the checks is older, and ignored."""
    r = loaded([check("prov"), *queue([{"name": "prov"}]), wl("a")])
    before = r.time_ms
    r.tick(2_000)
    r.apply(
        Event(EventType.UPSERT, r.time_ms, manifest=reported(wl("a"), r.time_ms, ("prov", "Retry", "", None)))
    )
    r.tick()
    r.apply(
        Event(EventType.UPSERT, r.time_ms, manifest=reported(wl("a"), before, ("prov", "Ready", "", None)))
    )
    assert checks(r, "a") == [("prov", "Pending")]
    assert cond(r, "a", "Admitted")[0] == "False"


# ------------------------------------------------ the ClusterQueue's checks decide if it is active


def test_a_missing_or_inactive_check_makes_the_cluster_queue_inactive() -> None:
    """updateWithAdmissionChecks: missing and inactive checks keep the ClusterQueue from admitting."""
    for docs in ([], [check("prov", active=False)], [check("prov", active=None)]):
        r = loaded([*docs, *queue([{"name": "prov"}]), wl("a")])
        assert r.admitted() == []
        assert r.pending_message("a") == "ClusterQueue cq is inactive"
        # The check's controller reports Active: the queue admits.
        r.tick()
        r.apply(Event(EventType.UPSERT, r.time_ms, manifest=check("prov")))
        assert r.admitted() == ["a"]
        # The check is deleted: nothing new is admitted.
        r.delete("AdmissionCheck", "", "prov")
        r.apply(Event(EventType.UPSERT, r.time_ms, manifest=wl("b", cpu=1)))
        assert r.pending_message("b") == "ClusterQueue cq is inactive"


def test_multikueue_checks_follow_kueues_rules() -> None:
    """updateWithAdmissionChecks: one MultiKueue check, on every flavor, never beside a provisioning one."""
    bad = [
        ([check("mk1", MULTIKUEUE), check("mk2", MULTIKUEUE)], [{"name": "mk1"}, {"name": "mk2"}]),
        ([check("mk", MULTIKUEUE)], [{"name": "mk", "onFlavors": ["spot"]}]),
        ([check("mk", MULTIKUEUE), check("prov", PROVISIONING)], [{"name": "mk"}, {"name": "prov"}]),
    ]
    for checks_, strategy in bad:
        r = loaded([*checks_, *queue(strategy), wl("a")])
        assert r.pending_message("a") == "ClusterQueue cq is inactive", strategy
    r = loaded(
        [check("mk", MULTIKUEUE), *queue([{"name": "mk", "onFlavors": ["on-demand", "spot"]}]), wl("a")]
    )
    assert r.admitted() == ["a"]


# ------------------------------------------------------------ what is refused


def test_invalid_checks_are_refused_with_the_field_and_the_rule() -> None:
    """The API's rules: controllerName required, parameters complete, one field for a queue's checks."""
    both = queue([{"name": "prov"}])[2]
    both = {
        **both,
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "spec": {**both["spec"], "admissionChecks": ["x"]},
    }
    twice = queue([{"name": "prov"}, {"name": "prov"}])[2]
    no_controller = {**check("a"), "spec": {"controllerName": ""}}
    no_kind = {**check("b"), "spec": {"controllerName": "c", "parameters": {"apiGroup": "g", "name": "n"}}}
    listed_twice = reported(wl("w"), T0, ("p", "Ready", "", None), ("p", "Pending", "", None))
    r = Run(Engine())
    for doc in (both, twice, no_controller, no_kind, listed_twice):
        r.apply(Event(EventType.UPSERT, T0, manifest=doc))
    messages = {d.ref.name: d.message for d in r.rejected()}
    rejected_cq = [d.message for d in r.rejected() if d.ref.name == "cq"]
    assert rejected_cq[0] == (
        "spec.admissionChecks: cannot be used along with spec.admissionChecksStrategy; "
        "list the checks in one of them"
    )
    assert rejected_cq[1] == (
        "spec.admissionChecksStrategy.admissionChecks[1].name: AdmissionCheck 'prov' is listed more than once"
    )
    assert messages["a"] == "spec.controllerName: must not be empty"
    assert messages["b"] == "spec.parameters.kind: required field is missing"
    assert messages["w"] == "status.admissionChecks[1].name: AdmissionCheck 'p' is listed more than once"


def test_a_restart_keeps_a_rejected_workload_deactivated_and_a_backoff_running() -> None:
    """What the status says survives a restart or a shard handover: the eviction by a Rejected
    check (Kueue leaves spec.active false) and status.requeueState.requeueAt (backoffWaitingTimeExpired)."""

    def with_status(name: str, status: dict[str, Any]) -> Manifest:
        return {**wl(name, cpu=1), "status": status}

    def condition(type_: str, status: str, reason: str) -> dict[str, Any]:
        return {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": "",
            "lastTransitionTime": rfc3339(T0),
        }

    rejected = with_status(
        "rejected",
        {"conditions": [condition("Evicted", "True", "DeactivatedDueToAdmissionCheck")]},
    )
    backing_off = with_status(
        "backing-off",
        {
            "conditions": [condition("Requeued", "False", "AdmissionCheck")],
            "requeueState": {"requeueAt": rfc3339(T0 + 30_000)},
        },
    )
    engine, _ = _engine_with([check("prov"), *queue([{"name": "prov"}]), rejected, backing_off])
    assert _cond(_status(engine, "rejected"), "QuotaReserved")[:2] == ("False", "Deactivated")
    assert [c["type"] for c in _status(engine, "backing-off")["conditions"]] == ["Requeued"]
    assert engine.next_wakeup_ms() == T0 + 30_000
    engine.apply(Event(EventType.TICK, T0 + 30_000))
    assert _cond(_status(engine, "backing-off"), "QuotaReserved")[0] == "True"
    assert _cond(_status(engine, "rejected"), "QuotaReserved")[0] == "False"


def test_a_check_taken_off_the_cluster_queue_no_longer_holds_back_its_workloads() -> None:
    """The workload controller syncs a reserved workload's checks with its ClusterQueue's
    (syncAdmissionCheckConditions); with the one Pending check gone, SyncAdmittedCondition admits."""
    r = loaded([check("prov"), check("quota-ok"), *queue([{"name": "prov"}, {"name": "quota-ok"}]), wl("a")])
    r.tick()
    r.apply(
        Event(
            EventType.UPSERT,
            r.time_ms,
            manifest=reported(wl("a"), r.time_ms, ("quota-ok", "Ready", "", None)),
        )
    )
    assert cond(r, "a", "Admitted")[0] == "False"
    r.tick()
    r.apply(Event(EventType.UPSERT, r.time_ms, manifest=queue([{"name": "quota-ok"}])[2]))
    assert checks(r, "a") == [("quota-ok", "Ready")]
    assert cond(r, "a", "Admitted")[0] == "True"


def test_pod_set_updates_are_kept_as_reported_and_dropped_on_eviction() -> None:
    """SetAdmissionCheckState takes the controller's podSetUpdates; resetChecksOnEviction drops them."""
    r = loaded([check("prov"), *queue([{"name": "prov"}]), wl("a")])
    r.tick()
    report = reported(wl("a"), r.time_ms, ("prov", "Ready", "", None))
    update = {
        "name": "main",
        "nodeSelector": {"pool": "reserved"},
        "tolerations": [{"key": "r", "tolerationSeconds": 5}],
    }
    report["status"]["admissionChecks"][0]["podSetUpdates"] = [update]
    r.apply(Event(EventType.UPSERT, r.time_ms, manifest=report))
    assert r.status("a")["admissionChecks"][0]["podSetUpdates"] == [update]
    r.tick()
    r.apply(
        Event(EventType.UPSERT, r.time_ms, manifest=reported(wl("a"), r.time_ms, ("prov", "Retry", "", None)))
    )
    assert "podSetUpdates" not in r.status("a")["admissionChecks"][0]


def test_a_rejected_workload_set_active_again_starts_afresh() -> None:
    """The workload controller's reactivation: spec.active back to true after the deactivation
    (Requeued=True, reason Reactivated), and the workload queues again."""
    r = loaded([check("prov"), *queue([{"name": "prov"}]), wl("a")])
    r.tick()
    r.apply(
        Event(
            EventType.UPSERT, r.time_ms, manifest=reported(wl("a"), r.time_ms, ("prov", "Rejected", "", None))
        )
    )
    inactive = {**wl("a"), "spec": {**wl("a")["spec"], "active": False}}
    r.tick()
    r.apply(Event(EventType.UPSERT, r.time_ms, manifest=inactive))
    assert r.admitted() == []
    r.tick()
    r.apply(Event(EventType.UPSERT, r.time_ms, manifest=wl("a")))
    assert cond(r, "a", "Requeued") == ("True", "Reactivated", "The workload was reactivated")
    assert cond(r, "a", "QuotaReserved")[0] == "True"
    assert checks(r, "a") == [("prov", "Pending")]
    # A restart reads the same from the status: reactivated, so not held back.
    restarted = loaded(
        [
            check("prov"),
            *queue([{"name": "prov"}]),
            {
                **wl("b"),
                "status": {
                    "conditions": [
                        {
                            "type": "Evicted",
                            "status": "True",
                            "reason": "DeactivatedDueToAdmissionCheck",
                            "message": "",
                        },
                        {"type": "Requeued", "status": "True", "reason": "Reactivated", "message": ""},
                    ]
                },
            },
        ]
    )
    assert cond(restarted, "b", "QuotaReserved")[0] == "True"


def test_the_echo_of_a_retry_in_the_second_of_its_reset_does_not_evict_again() -> None:
    """resetChecksOnEviction (pkg/workload/evict): after a Retry the Workload starts its next
    reservation with the check Pending, so the check's controller (MultiKueue's reconcileGroup)
    dispatches again. Transition times are kept to the second, so the watch events that still
    carry the Retry (written before the reset, in the same second) must not bring it back; a state
    the controller sets afterwards still counts."""
    r = loaded([check("prov"), *queue([{"name": "prov"}]), wl("a")])
    r.tick(2_000)
    retry = reported(wl("a"), r.time_ms, ("prov", "Retry", "Admitting remote lost", None))
    r.apply(Event(EventType.UPSERT, r.time_ms, manifest=retry))
    assert cond(r, "a", "QuotaReserved")[0] == "True"
    for _ in range(3):
        r.tick(100)
        r.apply(Event(EventType.UPSERT, r.time_ms, manifest=retry))
    assert [d.action for d in r.decisions if d.ref.name == "a"] == [
        Action.QUOTA_RESERVED,
        Action.EVICTED,
        Action.REQUEUED,  # the job stopped; the next TICK reserves again
        Action.QUOTA_RESERVED,
    ]
    assert checks(r, "a") == [("prov", "Pending")]
    # The controller's next states are taken, a new Retry included.
    r.tick(100)
    ready = reported(wl("a"), r.time_ms, ("prov", "Ready", "admitted on worker1", None))
    r.apply(Event(EventType.UPSERT, r.time_ms, manifest=ready))
    assert cond(r, "a", "Admitted")[0] == "True"
    r.tick(100)
    lost = reported(wl("a"), r.time_ms, ("prov", "Retry", "Admitting remote lost", None))
    r.apply(Event(EventType.UPSERT, r.time_ms, manifest=lost))
    actions = [d.action for d in r.decisions if d.ref.name == "a"]
    assert actions[-3:] == [Action.EVICTED, Action.REQUEUED, Action.QUOTA_RESERVED]
