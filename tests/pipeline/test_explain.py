"""``explain``: a Workload's timeline and what would admit it, read from an embedded log.

Each scenario runs the embedded runtime (``run --source DIR --once``) over a
folder, step by step, and asks ``explain`` about one Workload. The reasons
and numbers are Kueue 0.19's: the flavor assigner's (``fitsResourceQuota``,
``checkFlavorForPodSets``, ``Assignment.resolveNoFitReason``), the
scheduler's (``Scheduler.nominate``, ``processEntry``), the workload
controller's (``getQueueBlocker``) and the preemptor's policies
(``preemption.GetTargets``: InClusterQueue, InCohortReclamation,
InCohortFairSharing).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueuestream.agents.audit.explain import DamagedLog, UnknownWorkload, explain_json
from kueuestream.agents.audit.replay import replay
from kueuestream.agents.cli.main import main
from kueuestream.agents.embedded.runtime import run_source
from tests.helpers import cluster_queue, flavor, workload

CQ4 = "default: [{name: cpu, nominalQuota: 4}]"
FAIR = "\napiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nfairSharing: {enable: true}\n---"


class Scenario:
    """A source folder run step by step into one embedded log."""

    def __init__(self, root: Path) -> None:
        self.src, self.log, self.status = root / "src", root / "log", root / "status"
        self.src.mkdir()

    def step(self, **files: str) -> Scenario:
        for name, text in files.items():
            path = self.src / f"{name}.yaml"
            if text:
                path.write_text(text)
            else:
                path.unlink()
        assert run_source(str(self.src), str(self.status), str(self.log), once=True, out=io.StringIO()) == 0
        return self

    def explain(self, name: str) -> dict[str, Any]:
        return explain_json(str(self.log), "default", name)


def waiting(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in answer["timeline"] if e["event"] == "Waiting"]


def events(answer: dict[str, Any]) -> list[str]:
    return [e["event"] for e in answer["timeline"]]


def short(entry: dict[str, Any]) -> list[tuple[str, str, str, str, str, str, str]]:
    return [
        (s["flavor"], s["resource"], s["requested"], s["available"], s["short"], s["level"], s["levelName"])
        for s in entry["short"]
    ]


@pytest.fixture
def sc(tmp_path: Path) -> Scenario:
    return Scenario(tmp_path)


def test_waiting_for_quota_names_the_resource_short_and_the_clusterqueue(sc: Scenario) -> None:
    """``fitsResourceQuota``: within the maximum, not free now; the ClusterQueue's own quota binds."""
    sc.step(
        q=flavor("default") + cluster_queue("q", CQ4),
        w=workload("first", "q", cpu="3") + workload("second", "q", cpu="3", created="2024-01-01T00:00:01Z"),
    )
    answer = sc.explain("second")
    assert answer["workload"] == {"namespace": "default", "name": "second"}
    assert events(answer) == ["Created", "Queued", "Waiting"]
    queued = answer["timeline"][1]
    assert (queued["localQueue"], queued["clusterQueue"]) == ("q-lq", "q")
    [entry] = waiting(answer)
    assert entry["reason"] == "WaitingForQuota"
    assert entry["message"].endswith("insufficient unused quota for cpu in flavor default, 2 more needed")
    assert short(entry) == [("default", "cpu", "3", "1", "2", "ClusterQueue", "q")]
    preemption = entry["trace"]["preemption"]
    assert preemption["possible"] is False
    assert preemption["policies"] == {
        "withinClusterQueue": "Never",
        "reclaimWithinCohort": "Never",
        "borrowWithinCohort": "Never",
    }
    assert preemption["running"] == [{"workload": "default/first", "priority": 0}]
    assert answer["wouldAdmit"]["quotaIncrease"] == [
        {
            "clusterQueue": "q",
            "flavor": "default",
            "resources": {"cpu": "2"},
            "level": "ClusterQueue",
            "levelName": "q",
        }
    ]
    assert answer["wouldAdmit"]["finishing"] == ["default/first"]
    assert sc.explain("first")["wouldAdmit"] is None


def test_quota_short_in_the_cohort_names_the_cohort(sc: Scenario) -> None:
    """``available``: a ClusterQueue past its nominal quota waits for what its Cohort has left."""
    sc.step(
        q=flavor("default")
        + cluster_queue("qa", "default: [{name: cpu, nominalQuota: 2}]", cohort="team")
        + cluster_queue("qb", "default: [{name: cpu, nominalQuota: 2}]", cohort="team"),
        b=workload("borrower", "qa", cpu="3"),
    )
    sc.step(w=workload("w", "qb", cpu="2", created="2024-01-01T00:00:01Z"))
    [entry] = waiting(sc.explain("w"))
    assert entry["reason"] == "WaitingForQuota"
    assert short(entry) == [("default", "cpu", "2", "1", "1", "Cohort", "team")]
    assert sc.explain("w")["wouldAdmit"]["finishing"] == ["default/borrower"]


def test_a_borrowing_limit_that_binds_exceeds_max_quota_at_that_limit(sc: Scenario) -> None:
    """``potentialAvailable``: the borrowing limit caps what the Cohort could ever lend."""
    sc.step(
        q=flavor("default")
        + cluster_queue("qa", "default: [{name: cpu, nominalQuota: 2, borrowingLimit: 1}]", cohort="team")
        + cluster_queue("qb", "default: [{name: cpu, nominalQuota: 4}]", cohort="team"),
        w=workload("w", "qa", cpu="4"),
    )
    [entry] = waiting(sc.explain("w"))
    assert entry["reason"] == "ExceedsMaxQuota"
    assert short(entry) == [("default", "cpu", "4", "3", "1", "BorrowingLimit", "qa")]


def test_exceeds_max_quota_gives_the_increase_the_clusterqueue_needs(sc: Scenario) -> None:
    sc.step(q=flavor("default") + cluster_queue("q", CQ4), w=workload("big", "q", cpu="9"))
    answer = sc.explain("big")
    [entry] = waiting(answer)
    assert entry["reason"] == "ExceedsMaxQuota"
    assert short(entry) == [("default", "cpu", "9", "4", "5", "ClusterQueue", "q")]
    assert answer["wouldAdmit"]["quotaIncrease"][0]["resources"] == {"cpu": "5"}
    assert answer["wouldAdmit"]["finishing"] == []


def test_no_matching_flavor_names_each_flavor_and_its_problem(sc: Scenario) -> None:
    """``checkFlavorForPodSets``: node affinity and an untolerated taint rule flavors out."""
    sc.step(
        q=flavor("gpu", "{kind: gpu}")
        + flavor("tainted", extra="  nodeTaints: [{key: spot, value: 'true', effect: NoSchedule}]")
        + cluster_queue("q", "gpu: [{name: cpu, nominalQuota: 4}]\ntainted: [{name: cpu, nominalQuota: 4}]"),
        w=workload("w", "q", pod_extra="        nodeSelector: {kind: cpu}\n"),
    )
    answer = sc.explain("w")
    [entry] = waiting(answer)
    assert entry["reason"] == "NoMatchingFlavor"
    [group] = entry["trace"]["podSets"][0]["resourceGroups"]
    assert [(f["flavor"], f["problem"], f.get("taint")) for f in group["flavors"]] == [
        ("gpu", "NodeAffinity", None),
        ("tainted", "UntoleratedTaint", "{spot true NoSchedule <nil>}"),
    ]
    assert answer["wouldAdmit"]["quotaIncrease"] == []
    assert answer["wouldAdmit"]["note"].startswith("not a matter of quota")


def test_a_resource_no_group_covers_is_no_matching_flavor(sc: Scenario) -> None:
    sc.step(
        q=flavor("default") + cluster_queue("q", CQ4),
        w=workload("w", "q", extra_requests=', memory: "1Gi"'),
    )
    answer = sc.explain("w")
    [entry] = waiting(answer)
    assert entry["reason"] == "NoMatchingFlavor"
    assert entry["trace"]["podSets"][0]["notCovered"] == ["memory"]
    assert "covers in no resource group" in answer["wouldAdmit"]["note"]


def test_namespace_not_selected_is_misconfigured(sc: Scenario) -> None:
    """``nominate``: ``ErrNamespaceMismatch``."""
    cq = cluster_queue("q", CQ4).replace(
        "namespaceSelector: {}", "namespaceSelector: {matchLabels: {team: a}}"
    )
    sc.step(q=flavor("default") + cq, w=workload("w", "q"))
    [entry] = waiting(sc.explain("w"))
    assert (entry["reason"], entry["message"]) == (
        "Misconfigured",
        "workload namespace doesn't match ClusterQueue selector",
    )


def test_a_missing_local_queue_then_pending_evaluation(sc: Scenario) -> None:
    """``getQueueBlocker``: Misconfigured while the LocalQueue is missing, then PendingEvaluation."""
    strict = cluster_queue("q", CQ4, spec_extra="  queueingStrategy: StrictFIFO")
    sc.step(
        q=flavor("default") + strict,
        w=workload("head", "q", cpu="5") + workload("late", "other", created="2024-01-01T00:00:01Z"),
    )
    sc.step(
        lq="apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
        "metadata: {name: other-lq, namespace: default}\nspec: {clusterQueue: q}\n"
    )
    answer = sc.explain("late")
    assert [(e["reason"], e["message"]) for e in waiting(answer)] == [
        ("Misconfigured", "LocalQueue other-lq doesn't exist"),
        ("PendingEvaluation", "Workload is pending evaluation in the scheduling queue"),
    ]
    first, second = waiting(answer)
    assert first["until"] == second["time"]
    assert second["until"] is None


@pytest.mark.parametrize(
    ("spec_extra", "active", "expected"),
    [
        ("  stopPolicy: Hold", True, ("Suspended", "ClusterQueue q is inactive")),
        ("", False, ("Deactivated", "The workload is deactivated")),
    ],
    ids=["suspended", "deactivated"],
)
def test_queue_blockers(sc: Scenario, spec_extra: str, active: bool, expected: tuple[str, str]) -> None:
    """``getQueueBlocker``: a stopped ClusterQueue, a deactivated Workload."""
    wl = workload("w", "q")
    if not active:
        wl = wl.replace("spec:\n  queueName", "spec:\n  active: false\n  queueName")
    sc.step(q=flavor("default") + cluster_queue("q", CQ4, spec_extra=spec_extra), w=wl)
    [entry] = waiting(sc.explain("w"))
    assert (entry["reason"], entry["message"]) == expected


def test_preemption_within_the_clusterqueue_names_preemptor_and_victims(sc: Scenario) -> None:
    """``processEntry`` then ``issuePreemptions``: WaitingForPreemptedWorkloads, policy InClusterQueue."""
    cq = cluster_queue("q", CQ4, spec_extra="  preemption: {withinClusterQueue: LowerPriority}")
    sc.step(q=flavor("default") + cq, low=workload("low", "q", cpu="4", priority=1))
    sc.step(high=workload("high", "q", cpu="4", priority=10, created="2024-01-01T01:00:00Z"))
    high = sc.explain("high")
    assert events(high) == ["Created", "Queued", "Waiting", "Admitted"]
    preempting = waiting(high)[0]
    assert preempting["reason"] == "WaitingForPreemptedWorkloads"
    assert preempting["victims"] == [
        {"workload": "default/low", "clusterQueue": "q", "policy": "InClusterQueue"}
    ]
    low = sc.explain("low")
    preempted = next(e for e in low["timeline"] if e["event"] == "Preempted")
    assert (preempted["preemptor"], preempted["policy"], preempted["reason"]) == (
        "default/high",
        "InClusterQueue",
        "Preempted",
    )
    # One cycle preempted: the preemptor's wait and the victim's eviction start in it.
    assert preempted["cycles"]["from"] == preempting["cycles"]["from"]
    assert preempting["cycles"]["to"] < high["timeline"][-1]["cycles"]["from"]
    assert events(low)[-1] == "Waiting"
    assert low["wouldAdmit"]["finishing"] == ["default/high"]


def test_reclaim_within_the_cohort_is_named(sc: Scenario) -> None:
    """``preemption.GetTargets``: a borrower's Workload reclaimed, policy InCohortReclamation."""
    sc.step(
        q=flavor("default")
        + cluster_queue("qa", CQ4, cohort="team", spec_extra="  preemption: {reclaimWithinCohort: Any}")
        + cluster_queue("qb", "default: [{name: cpu, nominalQuota: 0}]", cohort="team"),
        b=workload("borrower", "qb", cpu="4"),
    )
    sc.step(a=workload("owner", "qa", cpu="4", created="2024-01-01T01:00:00Z"))
    owner = sc.explain("owner")
    assert waiting(owner)[0]["victims"] == [
        {"workload": "default/borrower", "clusterQueue": "qb", "policy": "InCohortReclamation"}
    ]
    borrower = sc.explain("borrower")
    preempted = next(e for e in borrower["timeline"] if e["event"] == "Preempted")
    assert (preempted["preemptor"], preempted["policy"]) == ("default/owner", "InCohortReclamation")


def test_fair_sharing_preemption_is_named(sc: Scenario) -> None:
    """Fair sharing's ``fairPreemptions`` (gate FairSharingPreemptWithinNominal off, so the
    strategies decide): the borrower's Workload goes, policy InCohortFairSharing."""
    config = FAIR.replace(
        "fairSharing: {enable: true}",
        "fairSharing: {enable: true}\nfeatureGates: {FairSharingPreemptWithinNominal: false}",
    )
    fair = "  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}"
    sc.step(
        c=config,
        q=flavor("default")
        + cluster_queue("qa", CQ4, cohort="team", spec_extra=fair)
        + cluster_queue("qb", CQ4, cohort="team", spec_extra=fair),
        b=workload("b0", "qb", cpu="4") + workload("b1", "qb", cpu="4", created="2024-01-01T00:00:01Z"),
    )
    sc.step(o=workload("owner", "qa", cpu="4", created="2024-01-01T01:00:00Z"))
    victims = waiting(sc.explain("owner"))[0]["victims"]
    assert [v["policy"] for v in victims] == ["InCohortFairSharing"]
    victim = victims[0]["workload"].split("/")[1]
    preempted = next(e for e in sc.explain(victim)["timeline"] if e["event"] == "Preempted")
    assert (preempted["preemptor"], preempted["policy"]) == ("default/owner", "InCohortFairSharing")


def test_admission_shows_flavors_and_borrowing(sc: Scenario) -> None:
    sc.step(
        q=flavor("default")
        + cluster_queue("qa", "default: [{name: cpu, nominalQuota: 2}]", cohort="team")
        + cluster_queue("qb", CQ4, cohort="team"),
        w=workload("w", "qa", cpu="3"),
    )
    answer = sc.explain("w")
    admitted = answer["timeline"][-1]
    assert admitted["event"] == "Admitted"
    assert admitted["clusterQueue"] == "qa"
    assert admitted["podSets"] == [
        {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "3"}}
    ]
    assert admitted["borrowing"] == 1
    assert answer["wouldAdmit"] is None


def test_finish_ends_the_timeline(sc: Scenario) -> None:
    sc.step(q=flavor("default") + cluster_queue("q", CQ4), w=workload("w", "q"))
    done = next(d for d in yaml.safe_load_all(workload("w", "q")) if d)
    done["status"] = {
        "conditions": [
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "done",
                "lastTransitionTime": "2024-01-01T02:00:00Z",
            }
        ]
    }
    sc.step(w=yaml.safe_dump(done))
    assert events(sc.explain("w"))[-2:] == ["Admitted", "Finished"]


def test_a_waiting_workload_costs_one_entry_however_many_cycles(sc: Scenario) -> None:
    """Bounded: cycles that leave the Workload's status as it was add nothing to the log."""
    no_lending = "default: [{name: cpu, nominalQuota: 4, lendingLimit: 0}]"
    strict = "  queueingStrategy: StrictFIFO"  # the head that does not fit is tried every cycle
    sc.step(
        q=flavor("default")
        + cluster_queue("q", no_lending, cohort="team", spec_extra=strict)
        + cluster_queue("other", no_lending, cohort="team"),
        w=workload("hog", "q", cpu="2") + workload("waits", "q", cpu="3", created="2024-01-01T00:00:01Z"),
    )
    for i in range(6):
        sc.step(**{f"o{i}": workload(f"o{i}", "other", cpu="4", created=f"2024-01-01T00:01:0{i}Z")})
        sc.step(**{f"o{i}": ""})
    [entry] = waiting(sc.explain("waits"))
    assert entry["cycles"]["to"] - entry["cycles"]["from"] >= 12
    code, out = replayed(sc.log)
    assert code == 0, out


def replayed(log: Path) -> tuple[int, str]:
    out = io.StringIO()
    return replay(str(log), out=out), out.getvalue()


def test_the_trace_is_replayed_byte_for_byte(sc: Scenario) -> None:
    cq = cluster_queue("q", CQ4, spec_extra="  preemption: {withinClusterQueue: LowerPriority}")
    sc.step(q=flavor("default") + cq, low=workload("low", "q", cpu="4", priority=1))
    sc.step(high=workload("high", "q", cpu="4", priority=10, created="2024-01-01T01:00:00Z"))
    code, out = replayed(sc.log)
    assert code == 0, out
    decisions = sc.log / "kueue.decisions"
    segment = sorted(decisions.rglob("*.log"))[0]
    assert b'"trace":{' in segment.read_bytes()


def test_an_unknown_name_names_the_closest(sc: Scenario) -> None:
    sc.step(q=flavor("default") + cluster_queue("q", CQ4), w=workload("training-a", "q"))
    with pytest.raises(UnknownWorkload) as caught:
        sc.explain("training-b")
    assert caught.value.closest[0] == "default/training-a"
    assert "default/training-a" in str(caught.value)


@pytest.mark.parametrize("topic", ["kueue.decisions", "kueue.admission"])
def test_a_damaged_log_is_an_error(sc: Scenario, topic: str) -> None:
    sc.step(q=flavor("default") + cluster_queue("q", CQ4), w=workload("w", "q"))
    segment = sorted((sc.log / topic).rglob("*.log"), key=lambda p: p.stat().st_size)[-1]
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF
    segment.write_bytes(bytes(data))
    with pytest.raises(DamagedLog, match="lost records"):
        sc.explain("w")


def test_a_workload_behind_a_strict_fifo_head_was_never_tried(sc: Scenario) -> None:
    """``StrictFIFO``: the head that does not fit blocks its queue, so the one behind it gets no condition."""
    strict = cluster_queue("q", CQ4, spec_extra="  queueingStrategy: StrictFIFO")
    sc.step(
        q=flavor("default") + strict,
        w=workload("head", "q", cpu="5") + workload("behind", "q", created="2024-01-01T00:00:01Z"),
    )
    answer = sc.explain("behind")
    assert events(answer) == ["Created", "Queued"]
    assert answer["wouldAdmit"] == {
        "reason": "",
        "quotaIncrease": [],
        "finishing": [],
        "note": "the scheduler has not tried it yet",
    }


TWO_POD_SETS = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: w, namespace: default, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  queueName: q-lq
  podSets:
  - name: a
    count: 1
    template:
      spec:
        containers: [{name: c, resources: {requests: {cpu: "2"}}}]
  - name: b
    count: 1
    template:
      spec:
        nodeSelector: {pool: one}
        containers: [{name: c, resources: {requests: {cpu: "3"}}}]
---"""


def test_an_admission_after_a_resumed_flavor_search_says_where_it_resumed(
    sc: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kueue's LastAssignment: cycle 1 puts pod set a on f1, where b (f1's nodes only) then
    no longer fits; cycle 2 searches a from f2 on (NextFlavorToTryForPodSetResource), and
    the admission says so."""
    sc.step(
        q=flavor("f1", "{pool: one}")
        + flavor("f2", "{pool: two}")
        + cluster_queue("q", "f1: [{name: cpu, nominalQuota: 4}]\nf2: [{name: cpu, nominalQuota: 4}]"),
        w=TWO_POD_SETS,
    )
    answer = sc.explain("w")
    admitted = answer["timeline"][-1]
    assert admitted["event"] == "Admitted"
    assert [ps["flavors"] for ps in admitted["podSets"]] == [{"cpu": "f2"}, {"cpu": "f1"}]
    assert admitted["resumedAfter"] == {"a": ["f1"]}
    assert main(["explain", "default/w", str(sc.log)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert "      pod set a: flavor search resumed after f1, where the previous cycle's stopped" in text
