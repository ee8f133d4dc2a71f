"""What ``admit`` prints: Workloads as their author or Kueue's job framework wrote them, and tables."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kueuestream.admission.jobs import workload_name
from kueuestream.agents.cli.main import main
from kueuestream.agents.cli.tables import human_duration, render

QUEUES = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team}
spec: {clusterQueue: cq}
"""

JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: sample
  namespace: team
  uid: 0b6f1a52-2b4e-4d6a-9d0c-2f3f6f1b1c11
  creationTimestamp: "2026-01-01T00:00:00Z"
  labels: {kueue.x-k8s.io/queue-name: lq}
spec:
  parallelism: 2
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources: {requests: {cpu: "1"}}
"""


def _admit(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, *args: str) -> str:
    (tmp_path / "in.yaml").write_text(text)
    assert main(["admit", str(tmp_path / "in.yaml"), *args]) == 0
    return capsys.readouterr().out


def test_a_jobs_workload_is_printed_as_kueues_job_framework_creates_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``jobframework.ConstructWorkload`` and ``PrepareWorkloadPriority``: owner reference,
    finalizer, job-uid label, the Job's pod template as written, the resolved priority;
    no field the Job did not set is printed empty."""
    items = yaml.safe_load(_admit(tmp_path, capsys, QUEUES + "---" + JOB))["items"]
    assert len(items) == 1
    workload = items[0]
    status = workload.pop("status")
    assert workload == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": workload_name("Job", "sample", "0b6f1a52-2b4e-4d6a-9d0c-2f3f6f1b1c11"),
            "namespace": "team",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"kueue.x-k8s.io/job-uid": "0b6f1a52-2b4e-4d6a-9d0c-2f3f6f1b1c11"},
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "sample",
                    "uid": "0b6f1a52-2b4e-4d6a-9d0c-2f3f6f1b1c11",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 2,
                    "template": {
                        "metadata": {},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                            ],
                        },
                    },
                }
            ],
            "priority": 0,
        },
    }
    assert status["admission"]["podSetAssignments"] == [
        {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "2"}, "count": 2}
    ]


def test_a_workload_is_printed_as_its_author_wrote_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    written = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "team"},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                    },
                }
            ],
        },
    }
    items = yaml.safe_load(_admit(tmp_path, capsys, QUEUES + "---\n" + yaml.safe_dump(written)))["items"]
    shown = dict(items[0])
    shown.pop("status")
    assert shown == written


# ---------------------------------------------------------------- tables

PENDING = """
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: big, namespace: team, creationTimestamp: "2026-01-02T00:00:00Z"}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "3"}}}]}}
"""


def test_human_duration_as_kubectl_writes_ages() -> None:
    """apimachinery's ``duration.HumanDuration``, boundary by boundary."""
    cases = {
        -2: "<invalid>",
        -1: "0s",
        0: "0s",
        119: "119s",
        120: "2m",
        125: "2m5s",
        599: "9m59s",
        600: "10m",
        3 * 3600 - 1: "179m",
        3 * 3600: "3h",
        3 * 3600 + 60: "3h1m",
        8 * 3600: "8h",
        47 * 3600: "47h",
        48 * 3600: "2d",
        50 * 3600: "2d2h",
        8 * 86400: "8d",
        2 * 365 * 86400: "2y",
        (2 * 365 + 3) * 86400: "2y3d",
        8 * 365 * 86400: "8y",
    }
    assert {s: human_duration(s) for s in cases} == cases


def test_the_table_is_laid_out_as_kubectls_tab_writer_does() -> None:
    """Cells padded by 3 to at least 10 characters, the last column not padded."""
    assert render(["name", "x"], [["a", "1"], ["a-long-name", ""]]) == (
        "NAME          X\na             1\na-long-name   \n"
    )
    assert render(["a", "b"], [["x", "y"]]) == "A         B\nx         y\n"


def test_admit_prints_kueues_workload_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Kueue's Workload printer columns, as ``kubectl get workloads -A`` shows them."""
    out = _admit(tmp_path, capsys, QUEUES + "---" + JOB + PENDING, "-o", "wide")
    lines = out.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "QUEUE", "RESERVED", "IN", "ADMITTED", "FINISHED", "AGE"]
    rows = {line.split()[1]: line for line in lines[1:]}
    job_workload = workload_name("Job", "sample", "0b6f1a52-2b4e-4d6a-9d0c-2f3f6f1b1c11")
    assert rows[job_workload].split()[:5] == ["team", job_workload, "lq", "cq", "True"]
    # Pending: nothing reserved, so RESERVED IN is blank; Admitted is False (NoReservation).
    assert rows["big"].split()[:4] == ["team", "big", "lq", "False"]
    assert len(rows["big"].split()) == 5
    header = lines[0]
    assert rows["big"][header.index("RESERVED IN") : header.index("ADMITTED")].strip() == ""
    assert rows["big"][header.index("ADMITTED") : header.index("FINISHED")].strip() == "False"


def _get(capsys: pytest.CaptureFixture[str], path: Path, *args: str) -> str:
    assert main(["get", *args, str(path)]) == 0
    return capsys.readouterr().out


def test_get_clusterqueues_shows_pending_admitted_and_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kueue's ClusterQueue printer columns, and ``status`` counts and flavor usage as its
    ClusterQueue controller writes them (``pendingWorkloads``, ``reservingWorkloads``,
    ``admittedWorkloads``, ``flavorsReservation``, ``flavorsUsage``)."""
    path = tmp_path / "in.yaml"
    path.write_text(QUEUES + "---" + JOB + PENDING)
    assert _get(capsys, path, "clusterqueues").splitlines() == [
        "NAME      COHORT    PENDING WORKLOADS",
        "cq                  1",
    ]
    wide = _get(capsys, path, "cq", "-o", "wide").splitlines()
    assert wide[0].split() == [
        "NAME",
        "COHORT",
        "STRATEGY",
        "PENDING",
        "WORKLOADS",
        "ADMITTED",
        "WORKLOADS",
        "USAGE",
    ]
    assert wide[1].split() == ["cq", "BestEffortFIFO", "1", "1", "default:", "cpu=2/4"]
    (cq,) = yaml.safe_load(_get(capsys, path, "cq", "-o", "yaml"))["items"]
    usage = [{"name": "default", "resources": [{"name": "cpu", "total": "2", "borrowed": "0"}]}]
    assert cq["status"] == {
        "pendingWorkloads": 1,
        "reservingWorkloads": 1,
        "admittedWorkloads": 1,
        "flavorsReservation": usage,
        "flavorsUsage": usage,
    }
    assert cq["spec"] == yaml.safe_load(QUEUES.split("---")[1])["spec"]


def test_get_workloads_defaults_to_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(QUEUES + PENDING)
    lines = _get(capsys, path, "wl").splitlines()
    assert lines[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert lines[1].split()[:3] == ["team", "big", "lq"]


def test_get_with_invalid_input_prints_the_problems_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(
        QUEUES + "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: Bad_Name}\n"
    )
    assert main(["get", "cq", str(path)]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert "Bad_Name" in out.err
