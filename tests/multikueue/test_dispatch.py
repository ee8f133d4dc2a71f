"""The MultiKueue dispatcher's rules, from synthetic watch events of a manager and two workers."""

from __future__ import annotations

from kueuestream.admission.multikueue import names
from kueuestream.streams.schemas import MultiKueueAction as A
from tests.multikueue.world import CHECK, NS, World, is_true

MINUTE = 60_000


def test_all_at_once_copies_the_workload_to_every_worker_and_the_job_to_the_winner() -> None:
    """nominateAndSynchronizeWorkers (all-at-once): every connected worker of the config is nominated,
    sorted, and gets a copy of the Workload (origin label, cloneForCreate) once the Workload holds quota;
    the Job is copied (suspended, prebuilt-workload and origin labels, no selector, no controller
    labels) only to the worker whose copy is admitted (reconcileGroup step 6b, the job adapter's SyncJob)."""
    world = World(clusters=("w2", "w1")).setup()
    key = world.submit("job1")
    assert world.of(A.CREATE_REMOTE) == []  # no quota yet
    world.reserve(key)
    assert [d.clusters for d in world.of(A.SET_NOMINATED)] == [["w1", "w2"]]
    creates = world.of(A.CREATE_REMOTE)
    assert [d.cluster for d in creates] == ["w2", "w1"]  # the config's order
    assert all([o["kind"] for o in d.objects] == ["Workload"] for d in creates)
    (wl_copy,) = creates[0].objects
    assert wl_copy["kind"] == "Workload" and wl_copy["metadata"]["labels"][names.ORIGIN_LABEL] == "multikueue"
    assert wl_copy["spec"]["queueName"] == "lq" and "status" not in wl_copy
    assert world.holding(key) == ["w1", "w2"]
    assert world.check_state(key) == "Pending"

    world.now += 1000
    world.admit("w1", key)
    job_creates = [d for d in world.of(A.CREATE_REMOTE) if d.objects[0]["kind"] == "Job"]
    assert [d.cluster for d in job_creates] == ["w1"]
    (job_copy,) = job_creates[0].objects
    assert job_copy["spec"]["suspend"] is True
    assert job_copy["metadata"]["labels"][names.PREBUILT_WORKLOAD_LABEL] == "job1"
    assert job_copy["metadata"]["labels"][names.ORIGIN_LABEL] == "multikueue"
    assert "selector" not in job_copy["spec"]
    assert job_copy["spec"]["template"]["metadata"]["labels"] == {"app": "x"}


def test_first_worker_to_admit_wins_and_the_other_copies_are_deleted() -> None:
    """reconcileGroup step 6b and syncAdmittingRemoteState: the copy admitted first wins; the others are
    removed (only a Workload copy: no Job was copied there), the winner gets the Job copy, the check
    becomes Ready naming the cluster, and status.clusterName is set."""
    world = World().setup()
    key = world.submit("job1")
    world.reserve(key)
    world.now += 1000
    world.admit("w2", key)
    assert world.check_state(key) == "Ready"
    assert world.check_message(key) == 'The workload was admitted on "w2"'
    assert world.workloads[key]["status"]["clusterName"] == "w2"
    assert world.holding(key) == ["w2"]
    deletes = world.of(A.DELETE_REMOTE)
    assert [(d.cluster, [o["kind"] for o in d.objects]) for d in deletes] == [("w1", ["Workload"])]
    creates = [(d.cluster, [o["kind"] for o in d.objects]) for d in world.of(A.CREATE_REMOTE)]
    assert creates == [("w1", ["Workload"]), ("w2", ["Workload"]), ("w2", ["Job"])]
    assert world.workloads[key]["status"]["nominatedClusterNames"] == []
    # Nothing is decided twice: one Ready, one delete.
    assert len(world.of(A.SET_CHECK_STATE)) == 1


def test_a_job_copy_deleted_in_the_winner_is_made_again() -> None:
    """The job adapter's SyncJob, run on every reconcile of the admitting remote, creates the remote Job
    when it is missing: once, not again while the new copy is on its way."""
    world = World().setup()
    key = world.submit("job1")
    world.reserve(key)
    world.now += 1000
    world.admit("w2", key)

    def job_creates() -> list[str]:
        return [d.cluster for d in world.of(A.CREATE_REMOTE) if d.objects[0]["kind"] == "Job"]

    assert job_creates() == ["w2"]
    world.remote_delete_job("w2", key)
    assert job_creates() == ["w2", "w2"]
    assert key in world.workers["w2"].jobs
    assert world.check_state(key) == "Ready" and world.holding(key) == ["w2"]


def test_worker_job_status_is_mirrored_and_its_completion_finishes_the_manager_workload() -> None:
    """reconcileGroup step 3 and the job adapter's SyncJob: the worker Job's status is copied onto the
    manager's Job; a finished copy finishes the manager's Workload with its reason and message
    (workloadfinish.Finish), and then every copy is removed (step 2)."""
    world = World().setup()
    key = world.submit("job1")
    world.reserve(key)
    world.admit("w1", key)
    running = {"active": 1, "startTime": "2026-01-01T00:00:00Z"}
    world.remote_job_status("w1", key, running)
    assert world.jobs[key]["status"] == running
    assert world.jobs[key]["spec"]["suspend"] is True  # the manager's Job never runs
    done = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
    world.remote_job_status("w1", key, done)
    world.remote_finish("w1", key, "Succeeded", "Job finished successfully")
    assert world.jobs[key]["status"] == done
    assert is_true(world.workloads[key], "Finished")
    finish = world.of(A.FINISH)
    assert [(d.reason, d.message) for d in finish] == [("Succeeded", "Job finished successfully")]
    assert world.holding(key) == []


def test_a_lost_worker_keeps_the_check_ready_until_worker_lost_timeout_then_the_workload_moves() -> None:
    """reconcileGroup step 6a: while the admitting worker is unreachable the check stays Ready; after
    workerLostTimeout (from the Configuration) it becomes Retry ("Admitting remote lost"), Kueue evicts
    and requeues, and the next reservation dispatches to the worker that is left."""
    config = {"multiKueue": {"workerLostTimeout": "2m"}}
    world = World(configuration=config).setup()
    key = world.submit("job1")
    world.reserve(key)
    world.admit("w1", key)
    world.connect("w1", connected=False, reason="ClientConnectionFailed", message="connection refused")
    world.advance(2 * MINUTE - 1)
    assert world.check_state(key) == "Ready"
    world.advance(1)
    retry = [d for d in world.of(A.SET_CHECK_STATE) if d.state == "Retry"]
    assert [d.message for d in retry] == ['Admitting remote lost, Previously: "Ready"']
    assert world.check_state(key) == "Pending"  # evicted and requeued
    world.reserve(key)
    assert world.workloads[key]["status"]["nominatedClusterNames"] == ["w2"]
    world.admit("w2", key)
    assert world.check_message(key) == 'The workload was admitted on "w2"'


def test_a_worker_back_within_the_timeout_keeps_the_workload() -> None:
    """reconcileGroup step 6a: the loss is measured from when it was first seen; a worker that comes
    back in time, its copy still admitted, keeps the Workload."""
    world = World().setup()
    key = world.submit("job1")
    world.reserve(key)
    world.admit("w1", key)
    world.connect("w1", connected=False)
    world.advance(10 * MINUTE)
    world.connect("w1")
    world.advance(10 * MINUTE)
    assert world.check_state(key) == "Ready"
    assert not [d for d in world.of(A.SET_CHECK_STATE) if d.state == "Retry"]


def test_a_worker_that_comes_back_loses_its_stale_copy() -> None:
    """After a worker-lost Retry the Workload runs elsewhere; the copy left on the lost worker is
    deleted once the worker is reachable again and lists it."""
    world = World(configuration={"multiKueue": {"workerLostTimeout": "1m"}}).setup()
    key = world.submit("job1")
    world.reserve(key)
    world.admit("w1", key)
    world.connect("w1", connected=False)
    world.advance(MINUTE)
    world.reserve(key)
    world.admit("w2", key)
    assert world.workers["w1"].workloads  # unreachable: still there
    world.connect("w1")
    assert world.holding(key) == ["w2"]
    assert world.check_message(key) == 'The workload was admitted on "w2"'


def test_eviction_on_the_worker_resets_the_check_for_re_admission() -> None:
    """reconcileGroup step 4: a copy evicted on its worker turns a Ready check into Retry."""
    world = World().setup()
    key = world.submit("job1")
    world.reserve(key)
    world.admit("w1", key)
    world.remote_evict("w1", key)
    retry = [d for d in world.of(A.SET_CHECK_STATE) if d.state == "Retry"]
    assert [d.message for d in retry] == [
        'Workload evicted on worker cluster: "w1", resetting for re-admission. Previously: "Ready"'
    ]
    assert world.holding(key) == []  # evicted in the manager: no copy stays (step 2)


def test_deleting_the_managers_workload_or_job_removes_every_copy() -> None:
    """Reconcile of a deleted Workload (isDeleted) removes the remote objects in every worker."""
    world = World().setup()
    first, second = world.submit("job1"), world.submit("job2")
    world.reserve(first)
    world.reserve(second)
    assert world.holding(first) == world.holding(second) == ["w1", "w2"]
    world.delete_workload(first)
    assert world.holding(first) == []
    world.delete_job(second)
    assert world.holding(second) == []
    assert world.workers["w1"].jobs == {} and world.workers["w2"].jobs == {}


def test_garbage_collector_removes_copies_whose_manager_workload_is_gone() -> None:
    """The MultiKueue GC (every gcInterval): remote Workloads with our origin and no manager Workload
    are deleted; another manager's (another origin) are left alone."""
    world = World(configuration={"multiKueue": {"gcInterval": "30s"}}).setup()
    orphan, foreign = (NS, "orphan"), (NS, "foreign")
    world.plant("w1", orphan)
    world.plant("w1", foreign, origin="other-manager")
    world.advance(29_000)
    assert world.holding(orphan) == ["w1"]
    world.advance(1_000)
    assert world.holding(orphan) == []
    assert world.holding(foreign) == ["w1"]


def test_incremental_dispatcher_nominates_in_the_configs_order_round_by_round() -> None:
    """workloaddispatcher incremental: stepSize workers per round in the MultiKueueConfig's order,
    a new round after 5 minutes without an admission, nominations adding up."""
    config = {
        "multiKueue": {
            "dispatcherName": names.DISPATCHER_INCREMENTAL,
            "incrementalDispatcherConfig": {"stepSize": 1},
        }
    }
    world = World(clusters=("w3", "w1", "w2"), configuration=config).setup()
    key = world.submit("job1")
    world.reserve(key)
    assert [d.clusters for d in world.of(A.SET_NOMINATED)] == [["w3"]]
    assert world.holding(key) == ["w3"]
    world.advance(5 * MINUTE)
    assert world.holding(key) == ["w3"]
    world.advance(1)
    assert [d.clusters for d in world.of(A.SET_NOMINATED)] == [["w3"], ["w3", "w1"]]
    assert world.holding(key) == ["w1", "w3"]
    world.admit("w1", key)
    assert world.holding(key) == ["w1"]
    world.advance(30 * MINUTE)
    assert [d.clusters for d in world.of(A.SET_NOMINATED)][-1] == []


def test_incremental_dispatcher_default_step_is_three() -> None:
    """workloaddispatcher getNextNominatedWorkers: DefaultStepSize 3 when the config names none."""
    config = {"multiKueue": {"dispatcherName": names.DISPATCHER_INCREMENTAL}}
    world = World(clusters=("a", "b", "c", "d"), configuration=config).setup()
    key = world.submit("job1")
    world.reserve(key)
    assert world.holding(key) == ["a", "b", "c"]


def test_cluster_active_condition_follows_its_connection() -> None:
    """clustersReconciler: Active=True reason Active "Connected"; Active=False with the reason the
    cluster side gives (BadKubeConfig when the kubeconfig cannot be loaded)."""
    world = World().setup(connect=False)
    world.connect(
        "w1",
        connected=False,
        reason="BadKubeConfig",
        message='load client config failed: Secret kueue-system/w1-kubeconfig has no key "kubeconfig"',
    )
    world.connect("w2")
    assert world.cluster_status["w1"] == (
        False,
        "BadKubeConfig",
        'load client config failed: Secret kueue-system/w1-kubeconfig has no key "kubeconfig"',
    )
    assert world.cluster_status["w2"] == (True, "Active", "Connected")


def test_admission_check_active_condition() -> None:
    """admissionCheckReconciler: Active while every cluster is connected; SomeActiveClusters (still
    Active) with some; NoUsableClusters (inactive) with none; BadConfig without its MultiKueueConfig."""
    world = World().setup(connect=False)
    assert world.check_active[CHECK] == (False, "NoUsableClusters", "Inactive clusters: [w1 w2]")
    world.connect("w1")
    assert world.check_active[CHECK] == (True, "SomeActiveClusters", "Inactive clusters: [w2]")
    world.connect("w2")
    assert world.check_active[CHECK] == (True, "Active", "The admission check is active")
    world.manager_event("MultiKueueConfig", "", "fleet", None, deleted=True)
    assert world.check_active[CHECK] == (
        False,
        "BadConfig",
        "Cannot load the AdmissionChecks parameters: MultiKueueConfig 'fleet' not found",
    )


def test_a_workload_owned_by_an_unsupported_kind_is_rejected() -> None:
    """Reconcile: no MultiKueue adapter for the owner's kind rejects the check."""
    world = World().setup()
    key = world.submit("wl", job=False)
    world.workloads[key]["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "u", "controller": True}
    ]
    world.reserve(key)
    assert world.check_state(key) == "Rejected"
    assert world.check_message(key) == (
        'No multikueue adapter found for owner kind "apps/v1, Kind=Deployment", Previously: "Pending"'
    )
    assert world.holding(key) == []


def test_a_workload_without_an_owner_is_dispatched_alone() -> None:
    """Kueuestream's own rule: upstream's Reconcile rejects a Workload without an owner (no MultiKueue
    adapter); here it is dispatched as a Workload copy alone."""
    world = World().setup()
    key = world.submit("plain", job=False)
    world.reserve(key)
    assert [len(d.objects) for d in world.of(A.CREATE_REMOTE)] == [1, 1]


def test_other_admission_checks_must_be_ready_before_nomination() -> None:
    """nominateAndSynchronizeWorkers waits for every other check (allNonMKAdmissionChecksReady)."""
    world = World().setup()
    key = world.submit("job1")
    world.workloads[key]["status"]["admissionChecks"].append({"name": "prov", "state": "Pending"})
    world.reserve(key)
    assert world.holding(key) == []
    world.workloads[key]["status"]["admissionChecks"][1]["state"] = "Ready"
    world.reserve(key)
    assert world.holding(key) == ["w1", "w2"]


def test_a_worker_that_connects_later_gets_its_copy() -> None:
    """nominateAndSynchronizeWorkers (all-at-once): the nomination is the connected workers; one that
    connects while the Workload waits is nominated and gets its copy."""
    world = World().setup(connect=False)
    world.connect("w1")
    key = world.submit("job1")
    world.reserve(key)
    assert world.holding(key) == ["w1"]
    world.connect("w2")
    assert world.holding(key) == ["w1", "w2"]


def test_a_copy_deleted_on_its_worker_is_made_again() -> None:
    """nominateAndSynchronizeWorkers: a nominated worker without the copy gets it again."""
    world = World().setup()
    key = world.submit("job1")
    world.reserve(key)
    gone = world.workers["w1"].workloads.pop(key)
    world._worker_object("w1", gone, deleted=True)
    assert world.holding(key) == ["w1", "w2"]


def test_the_garbage_collector_wakes_only_for_what_it_can_collect() -> None:
    """No clock ticks for nothing: with no orphan on a reachable worker there is no wakeup, so a runtime
    that advances its clock to the last wakeup comes to an end."""
    world = World(configuration={"multiKueue": {"gcInterval": "30s"}}).setup()
    assert world.handler.next_wakeup_ms() is None
    world.plant("w1", (NS, "orphan"))
    start = world.now
    assert world.handler.next_wakeup_ms() == start + 30_000
    world.connect("w1", connected=False)
    assert world.handler.next_wakeup_ms() is None  # unreachable: nothing to collect there
    world.connect("w1")
    world.advance(30_000)
    assert world.holding((NS, "orphan")) == []
    assert world.handler.next_wakeup_ms() is None


def test_settings_come_from_the_configmap_carrying_the_configuration() -> None:
    """Kueue reads its Configuration from a ConfigMap; deleting another ConfigMap changes nothing."""
    world = World().setup()
    config_text = (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "multiKueue:\n  workerLostTimeout: 1m\n"
    )
    world.manager_event(
        "ConfigMap", "kueue-system", "kueue-manager-config", {"data": {"config": config_text}}, "v1"
    )
    world.manager_event("ConfigMap", "kueue-system", "other", {"data": {"x": "y"}}, "v1")
    world.manager_event("ConfigMap", "kueue-system", "other", None, "v1", deleted=True)
    key = world.submit("job1")
    world.reserve(key)
    world.admit("w1", key)
    world.connect("w1", connected=False)
    world.advance(MINUTE)
    assert [d.message for d in world.of(A.SET_CHECK_STATE) if d.state == "Retry"] == [
        'Admitting remote lost, Previously: "Ready"'
    ]


def test_a_copy_of_an_earlier_reservation_never_wins() -> None:
    """A copy made for a reservation the Workload has since lost, admitted on its worker while that
    worker was away, is deleted when the worker is back and a fresh copy is made there: the check
    never becomes Ready on the old copy's word."""
    world = World().setup()
    key = world.submit("job1")
    world.reserve(key)
    world.connect("w1", connected=False)
    world.release(key)  # the manager's Kueue evicts it: its copies go (w1's when it is back)
    world.reserve(key)
    assert world.holding(key) == ["w1", "w2"]  # w1's is the old one
    stale = world.workers["w1"].workloads[key]
    stale["status"] = {"conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted"}]}
    world.connect("w1")
    assert world.check_state(key) == "Pending"
    fresh = world.workers["w1"].workloads[key]
    assert fresh["metadata"]["uid"] != stale["metadata"]["uid"] and "status" not in fresh
    world.admit("w1", key)
    assert world.check_message(key) == 'The workload was admitted on "w1"'
    assert world.holding(key) == ["w1"]


def test_a_copy_whose_deletion_is_decided_never_wins_while_the_deletion_waits() -> None:
    """Between deciding to delete an old copy (and to make a new one) and the worker showing it, the
    old copy, admitted there, must not count: the check stays Pending until the new copy is admitted."""
    world = World().setup()
    key = world.submit("job1")
    world.reserve(key)
    world.connect("w1", connected=False)
    world.release(key)
    world.reserve(key)
    stale = world.workers["w1"].workloads[key]
    stale["status"] = {"conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted"}]}
    world.paused.add("w1")  # its writes wait; its watch lists the old copy, admitted
    world.connect("w1")
    world.reserve(key)  # any change of the manager's Workload makes the dispatcher look again
    assert world.check_state(key) == "Pending"
    world.resume("w1")
    assert world.check_state(key) == "Pending"
    world.admit("w1", key)
    assert world.check_message(key) == 'The workload was admitted on "w1"'


def test_a_copy_the_dispatcher_did_not_make_is_deleted() -> None:
    """A copy with our origin that no decision made (left by an earlier manager with the same origin),
    here on a worker outside the MultiKueueConfig, is deleted while the Workload waits for a worker."""
    world = World().setup()
    source = {"kubeConfig": {"location": "w3-kubeconfig"}}
    world.manager_event("MultiKueueCluster", "", "w3", {"spec": {"clusterSource": source}})
    world.connect("w3")
    key = world.submit("job1")
    world.reserve(key)
    world.plant("w3", key)
    assert world.holding(key) == ["w1", "w2"]
    assert [(d.cluster, d.name) for d in world.of(A.DELETE_REMOTE)] == [("w3", "job1")]


def test_the_job_status_of_the_next_worker_is_mirrored_after_a_move() -> None:
    """SyncJob after a re-dispatch: the new worker's Job status is mirrored even when it reads the same
    as what the lost worker's last said."""
    world = World(configuration={"multiKueue": {"workerLostTimeout": "1m"}}).setup()
    key = world.submit("job1")
    world.reserve(key)
    world.admit("w1", key)
    world.remote_job_status("w1", key, {"active": 1})
    world.connect("w1", connected=False)
    world.advance(MINUTE)
    world.jobs[key]["status"] = {}  # the manager's job integration resets it on the eviction
    world.reserve(key)
    world.admit("w2", key)
    world.remote_job_status("w2", key, {"active": 1})
    assert [(d.cluster, d.object) for d in world.of(A.SYNC_JOB_STATUS)] == [
        ("w1", {"active": 1}),
        ("w2", {"active": 1}),
    ]
