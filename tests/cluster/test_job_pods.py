"""What the job integration writes into a Job and its Workload, checked without a server."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kueuestream.admission import job_workload as jw
from kueuestream.admission.jobs import workload_name
from kueuestream.agents.kube import job_pods as jp


def _job(**spec: Any) -> dict[str, Any]:
    template = spec.pop(
        "template",
        {
            "metadata": {
                "labels": {
                    "app": "train",
                    "batch.kubernetes.io/job-name": "train",
                    "batch.kubernetes.io/controller-uid": "u-1",
                    "job-name": "train",
                    "controller-uid": "u-1",
                }
            },
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "env": [
                            {"name": "A", "value": "1"},
                            {"name": "B", "value": "2"},
                            {"name": "A", "value": "3"},
                        ],
                        "resources": {"requests": {"cpu": "1"}},
                    }
                ],
                "nodeSelector": {"disk": "ssd"},
            },
        },
    )
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": "u-1",
            "resourceVersion": "7",
            "labels": {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/priority-class": "high"},
            "annotations": {"provreq.kueue.x-k8s.io/maxRunDuration": "60", "other": "x"},
        },
        "spec": {"parallelism": 3, "completions": 2, "suspend": True, "template": template, **spec},
    }


def test_workload_names_hash_kind_group_name_and_uid_as_kueue_does() -> None:
    """jobframework.GetWorkloadNameForOwnerWithGVK: upstream's own example, and a cut prefix."""
    assert workload_name("Job", "name", "uid") == "job-name-ef3a1"
    long_name = "x" * 300
    name = workload_name("Job", long_name, "uid")
    assert len(name) == 253 and name.startswith("job-xxx") and name[-6] == "-"
    # Another group or another UID is another Workload.
    assert workload_name("Job", "name", "uid", group="example.com") != "job-name-ef3a1"
    assert workload_name("Job", "name", "uid-2") != "job-name-ef3a1"


def test_the_workload_of_a_job_is_kueues() -> None:
    """jobframework.ConstructWorkload and job.PodSets: owner, labels, pod set, priority."""
    wl = jw.workload_for_job(_job())
    meta = wl["metadata"]
    assert wl["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert meta["name"] == workload_name("Job", "train", "u-1")
    assert meta["namespace"] == "team-a"
    assert meta["labels"] == {"kueue.x-k8s.io/job-uid": "u-1"}
    assert meta["annotations"] == {"provreq.kueue.x-k8s.io/maxRunDuration": "60"}
    assert meta["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    [owner] = meta["ownerReferences"]
    assert owner == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "train",
        "uid": "u-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    spec = wl["spec"]
    assert spec["queueName"] == "lq"
    assert spec["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "high",
    }
    [pod_set] = spec["podSets"]
    assert (pod_set["name"], pod_set["count"]) == ("main", 2)  # min(parallelism, completions)
    template = pod_set["template"]
    # The Job controller's labels are dropped, except job-name.
    assert template["metadata"]["labels"] == {"app": "train", "batch.kubernetes.io/job-name": "train"}
    # Duplicate variables: one per name, in first-seen order, with the last value.
    assert template["spec"]["containers"][0]["env"] == [
        {"name": "A", "value": "3"},
        {"name": "B", "value": "2"},
    ]
    assert jp.owner_job(wl) == "train"


def test_min_parallelism_annotation_becomes_min_count() -> None:
    job = _job()
    job["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] = "1"
    assert jw.workload_for_job(job)["spec"]["podSets"][0]["minCount"] == 1


def _admitted(workload: dict[str, Any], flavors: dict[str, str], count: int = 2) -> dict[str, Any]:
    return {
        **workload,
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [{"name": "main", "flavors": flavors, "count": count}],
            },
            "conditions": [{"type": "Admitted", "status": "True"}],
        },
    }


FLAVORS = {
    "on-demand": {"spec": {"nodeLabels": {"instance": "on-demand"}}},
    "spot": {
        "spec": {
            "nodeLabels": {"instance": "spot"},
            "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        }
    },
    "gpu": {"spec": {"nodeLabels": {"gpu": "a100"}}},
}


def test_starting_merges_node_labels_tolerations_and_the_podset_label() -> None:
    """Job.RunWithPodSetsInfo with podset.FromAssignment and podset.Merge."""
    job = _job()
    wl = _admitted(jw.workload_for_job(job), {"cpu": "spot", "nvidia.com/gpu": "gpu"})
    patch = jp.start_patch(job, jp.start_info(wl, FLAVORS))
    spec = patch["spec"]
    assert spec["suspend"] is False
    assert spec["template"]["spec"]["nodeSelector"] == {"instance": "spot", "gpu": "a100"}
    assert spec["template"]["spec"]["tolerations"] == [
        {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert spec["template"]["metadata"]["labels"] == {"kueue.x-k8s.io/podset": "main"}
    assert "parallelism" not in spec


def _checked(workload: dict[str, Any], *updates: dict[str, Any]) -> dict[str, Any]:
    checks = [{"name": f"check-{i}", "state": "Ready", "podSetUpdates": [u]} for i, u in enumerate(updates)]
    return {**workload, "status": {**workload["status"], "admissionChecks": checks}}


def test_starting_merges_the_admission_checks_pod_set_updates() -> None:
    """jobframework getPodSetsInfoFromStatus: each check's podSetUpdates for the pod set, PodSetInfo.Merge."""
    job = _job()
    provisioned = {
        "name": "main",
        "labels": {"provisioned": "yes"},
        "annotations": {"cluster-autoscaler.kubernetes.io/consume-provisioning-request": "pr-1"},
        "nodeSelector": {"pool": "reserved"},
        "tolerations": [{"key": "reserved", "operator": "Exists", "effect": "NoSchedule"}],
    }
    other_pod_set = {"name": "driver", "labels": {"ignored": "yes"}}
    same_toleration = {"name": "main", "tolerations": provisioned["tolerations"]}
    wl = _checked(
        _admitted(jw.workload_for_job(job), {"cpu": "spot"}), provisioned, other_pod_set, same_toleration
    )
    template = jp.start_patch(job, jp.start_info(wl, FLAVORS))["spec"]["template"]
    assert template["metadata"]["labels"] == {"kueue.x-k8s.io/podset": "main", "provisioned": "yes"}
    assert template["metadata"]["annotations"] == provisioned["annotations"]
    assert template["spec"]["nodeSelector"] == {"instance": "spot", "pool": "reserved"}
    assert template["spec"]["tolerations"] == [
        {"key": "spot", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "reserved", "operator": "Exists", "effect": "NoSchedule"},
    ]


def test_a_pod_set_update_against_the_flavor_can_never_start() -> None:
    """PodSetInfo.Merge refuses an update that gives a node selector key another value."""
    job = _job()
    wl = _checked(
        _admitted(jw.workload_for_job(job), {"cpu": "spot"}),
        {"name": "main", "nodeSelector": {"instance": "x"}},
    )
    with pytest.raises(
        jp.PodSetConflict, match="admission check check-0: conflict for nodeSelector: instance=x"
    ):
        jp.start_info(wl, FLAVORS)


def test_a_node_label_the_template_sets_otherwise_can_never_start() -> None:
    job = _job()
    job["spec"]["template"]["spec"]["nodeSelector"] = {"instance": "reserved"}
    wl = _admitted(jw.workload_for_job(job), {"cpu": "spot"})
    with pytest.raises(jp.PodSetConflict, match="instance=reserved"):
        jp.start_patch(job, jp.start_info(wl, FLAVORS))


def test_an_unknown_flavor_cannot_start() -> None:
    wl = _admitted(jw.workload_for_job(_job()), {"cpu": "missing"})
    with pytest.raises(jp.PodSetConflict, match="ResourceFlavor missing"):
        jp.start_info(wl, FLAVORS)


def test_partial_admission_sets_parallelism_and_stopping_restores_it() -> None:
    job = _job()
    job["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] = "1"
    wl = _admitted(jw.workload_for_job(job), {"cpu": "on-demand"}, count=1)
    assert jp.start_patch(job, jp.start_info(wl, FLAVORS))["spec"]["parallelism"] == 1
    started = {**job, "spec": {**job["spec"], "parallelism": 1}}
    restore = jp.restore_patch(started, wl)
    assert restore is not None and restore["spec"]["parallelism"] == 2


def _apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, what the API server does with a merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _apply_merge_patch(out.get(key), value)
    return out


def test_stopping_restores_the_template_the_workload_kept() -> None:
    """Job.RestorePodSetsInfo: the Workload's template, plus the labels the Job controller manages."""
    job = _job()
    original = job["spec"]["template"]
    wl = _admitted(jw.workload_for_job(job), {"cpu": "spot"})
    started = _apply_merge_patch(job, jp.start_patch(job, jp.start_info(wl, FLAVORS)))
    assert started["spec"]["template"] != original
    restored = _apply_merge_patch(started, jp.restore_patch(started, wl))
    assert restored["spec"]["template"]["metadata"] == original["metadata"]
    assert restored["spec"]["template"]["spec"]["nodeSelector"] == {"disk": "ssd"}
    assert "tolerations" not in restored["spec"]["template"]["spec"]
    # Nothing left to restore: no write.
    assert jp.restore_patch(restored, wl) is None


labels = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(["1", "2"]), max_size=4)


@given(template_labels=labels, node_selector=labels, flavor_labels=labels)
def test_start_then_restore_gives_back_the_template(
    template_labels: dict[str, str], node_selector: dict[str, str], flavor_labels: dict[str, str]
) -> None:
    """Whatever the admission added, stopping removes it and keeps what the user wrote."""
    template = {
        "metadata": {"labels": template_labels},
        "spec": {"nodeSelector": node_selector, "containers": []},
    }
    job = _job(template=template)
    wl = _admitted(jw.workload_for_job(job), {"cpu": "f"})
    flavors = {"f": {"spec": {"nodeLabels": flavor_labels}}}
    try:
        patch = jp.start_patch(job, jp.start_info(wl, flavors))
    except jp.PodSetConflict:
        assert any(node_selector.get(k, v) != v for k, v in flavor_labels.items())
        return
    started = _apply_merge_patch(job, patch)
    assert started["spec"]["template"]["spec"].get("nodeSelector", {}) == {**node_selector, **flavor_labels}
    restored = _apply_merge_patch(started, jp.restore_patch(started, wl) or {})
    assert restored["spec"]["template"]["metadata"].get("labels", {}) == template_labels
    assert restored["spec"]["template"]["spec"].get("nodeSelector", {}) == node_selector
