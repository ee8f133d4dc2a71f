"""What ``admit`` prints: Workloads as their author or Kueue's job framework wrote them, and tables."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kueuestream.admission.jobs import workload_name
from kueuestream.agents.cli.main import main

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
