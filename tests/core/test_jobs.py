"""batch/v1 Jobs with a queue-name label become Workloads, as Kueue's job integration does."""

from __future__ import annotations

from tests.helpers import cluster_queue, flavor, run


def _job(name: str, parallelism: int, cpu: str, labels: str = "") -> str:
    return f"""
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: default
  creationTimestamp: "2024-01-01T00:00:00Z"
  labels:
    kueue.x-k8s.io/queue-name: q-lq
{labels}
spec:
  parallelism: {parallelism}
  template:
    spec:
      containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
---"""


def test_a_queued_job_becomes_a_workload_with_one_pod_set_per_parallelism() -> None:
    r = run(
        flavor("default") + cluster_queue("q", "default: [{name: cpu, nominalQuota: 4}]") + _job("a", 3, "1")
    )
    [name] = r.workloads()
    assert name.startswith("job-a-") and len(name) == len("job-a-") + 5
    psa = r.status(name)["admission"]["podSetAssignments"][0]
    assert (psa["name"], psa["count"], psa["resourceUsage"]) == ("main", 3, {"cpu": "3"})


def test_a_job_without_queue_name_is_left_alone() -> None:
    job = _job("plain", 1, "1").replace("    kueue.x-k8s.io/queue-name: q-lq\n", "    app: x\n")
    r = run(flavor("default") + cluster_queue("q", "default: [{name: cpu, nominalQuota: 4}]") + job)
    assert r.workloads() == {}


def test_priority_class_label_sets_the_priority() -> None:
    text = (
        flavor("default")
        + cluster_queue("q", "default: [{name: cpu, nominalQuota: 4}]")
        + "\napiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\n"
        + "metadata: {name: vip}\nvalue: 9\n---"
        + _job("low", 1, "3")
        + _job("vip", 1, "3", labels="    kueue.x-k8s.io/priority-class: vip")
    )
    r = run(text)
    assert [n for n in r.admitted()] == [n for n in r.workloads() if n.startswith("job-vip-")]


def test_deleting_a_job_deletes_only_its_own_workload() -> None:
    r = run(
        flavor("default")
        + cluster_queue("q", "default: [{name: cpu, nominalQuota: 4}]")
        + _job("a", 1, "1")
        + _job("a-b", 1, "1")
    )
    r.tick()
    r.delete("Job", "default", "a")
    [left] = r.workloads()
    assert left.startswith("job-a-b-")
