"""`kueuestream admit`: the contract other tools script against."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kueuestream.agents.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "config" / "examples"


def _admit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["admit", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _reserved(item: dict) -> str:  # type: ignore[type-arg]
    return next(c["status"] for c in item["status"]["conditions"] if c["type"] == "QuotaReserved")


def test_team_queues_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _admit(capsys, str(EXAMPLES / "team-queues"))
    assert code == 0
    listing = yaml.safe_load(out)
    assert (listing["apiVersion"], listing["kind"]) == ("v1", "List")
    items = {(i["metadata"]["namespace"], i["metadata"]["name"]): i for i in listing["items"]}
    # Sorted by namespace, then name.
    assert list(items) == sorted(items)
    by_name = {name: item for (_, name), item in items.items()}
    assert _reserved(by_name["hotfix-eval"]) == "True"
    assert by_name["eval"]["status"]["admission"]["podSetAssignments"][0]["flavors"] == {
        "cpu": "spot",
        "memory": "spot",
    }
    job = next(name for name in by_name if name.startswith("job-simulate-"))
    assert _reserved(by_name[job]) == "True"
    pending = by_name["train-llm"]["status"]["conditions"][0]
    assert (pending["status"], pending["reason"]) == ("False", "WaitingForQuota")
    assert pending["message"].startswith("couldn't assign flavors to pod set workers: ")


def test_json_output_and_files_given_one_by_one(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in (EXAMPLES / "dra").glob("*.yaml"))
    code, out, _ = _admit(capsys, *files, "-o", "json")
    assert code == 0
    [item] = json.loads(out)["items"]
    psa = item["status"]["admission"]["podSetAssignments"][0]
    assert psa["flavors"]["whole-gpus"] == "default-gpu-flavor"
    assert psa["resourceUsage"]["whole-gpus"] == "1"


def test_invalid_input_exits_2_with_the_problems_and_no_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: q}\n"
        "spec: {queueingStrategy: Whatever}\n"
    )
    code, out, err = _admit(capsys, str(bad))
    assert code == 2
    assert out == ""
    assert err.startswith(f"{bad}:0: ClusterQueue q: spec.queueingStrategy: unsupported value 'Whatever'")


def test_valid_input_with_nothing_admitted_still_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wl = tmp_path / "wl.yaml"
    wl.write_text(
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns}\n"
        "spec:\n  queueName: nowhere\n"
        "  podSets: [{name: main, count: 1, template: {spec: {containers: []}}}]\n"
    )
    code, out, _ = _admit(capsys, str(wl))
    assert code == 0
    [item] = yaml.safe_load(out)["items"]
    cond = item["status"]["conditions"][0]
    assert (cond["reason"], cond["message"]) == ("Misconfigured", "LocalQueue nowhere doesn't exist")


def test_admission_checks_example(capsys: pytest.CaptureFixture[str]) -> None:
    """`admit` reads each check's state from the Workload's status.admissionChecks, across shards.

    Upstream: SyncAdmittedCondition, AdmissionChecksForWorkload and
    reconcileCheckBasedEviction (see tests/core/test_admission_checks.py).
    """
    code, out, _ = _admit(capsys, str(EXAMPLES / "admission-checks"))
    assert code == 0
    items = {i["metadata"]["name"]: i for i in yaml.safe_load(out)["items"]}

    def conditions(name: str) -> dict[str, tuple[str, str]]:
        return {c["type"]: (c["status"], c["reason"]) for c in items[name]["status"]["conditions"]}

    def states(name: str) -> list[tuple[str, str]]:
        return [(c["name"], c["state"]) for c in items[name]["status"].get("admissionChecks", [])]

    # Nothing reported yet: the quota is held, the Workload waits for its check.
    assert conditions("train")["Admitted"] == ("False", "UnsatisfiedAdmissionChecks")
    assert states("train") == [("capacity", "Pending")]
    # Ready: admitted.
    assert conditions("eval")["Admitted"] == ("True", "Admitted")
    # The check applies to spot only: on on-demand none is needed, on spot it is.
    assert (conditions("batch")["Admitted"], states("batch")) == (("True", "Admitted"), [])
    assert items["spill"]["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": "spot"}
    assert states("spill") == [("capacity", "Pending")]
    # Retry: evicted once, requeued after its delay, holding quota again.
    assert conditions("sweep")["Requeued"] == ("True", "BackoffFinished")
    assert conditions("sweep")["QuotaReserved"][0] == "True"
    assert items["sweep"]["status"]["admissionChecks"][0]["retryCount"] == 1
    # Rejected: evicted and deactivated.
    assert conditions("render")["Evicted"] == ("True", "DeactivatedDueToAdmissionCheck")
    assert items["render"]["spec"]["active"] is False
    assert "admission" not in items["render"]["status"]


def test_limit_ranges_example(capsys: pytest.CaptureFixture[str]) -> None:
    """What config/examples/limit-ranges/README.md says ``admit`` prints.

    Upstream: AdjustResources (handlePodOverhead, handlePodLimitRange) and
    ValidateAdmissibility (see tests/core/test_pod_resource_rules.py).
    """
    code, out, _ = _admit(capsys, str(EXAMPLES / "limit-ranges"))
    assert code == 0
    items = {i["metadata"]["name"]: i for i in yaml.safe_load(out)["items"]}

    def usage(name: str) -> dict[str, str]:
        return dict(items[name]["status"]["admission"]["podSetAssignments"][0]["resourceUsage"])

    def refused(name: str) -> str:
        [cond] = [c for c in items[name]["status"]["conditions"] if c["type"] == "QuotaReserved"]
        assert (cond["status"], cond["reason"]) == ("False", "Misconfigured")
        return str(cond["message"])

    assert usage("notebook") == {"cpu": "1", "memory": "2Gi"}
    assert usage("sandboxed") == {"cpu": "1250m", "memory": "2176Mi"}
    path = "spec.podSets[0].template.spec.containers[0]"
    assert refused("greedy") == (
        f"resources didn't satisfy LimitRange constraints: {path}: "
        'Invalid value: ["cpu"]: requests must not be above the limitRange max'
    )
    assert refused("capped") == (
        f'resources validation failed: {path}: Invalid value: ["memory"]: requests must not exceed its limits'
    )
    readme = (EXAMPLES / "limit-ranges" / "README.md").read_text()
    assert refused("greedy") in readme and refused("capped") in readme


def test_problems_are_listed_in_the_order_they_are_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``admit`` checks the manifests with keys sorted, as its log holds them, but reports as written."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: w, namespace: ns}\n"
        "spec:\n  queueName: lq\n  podSets:\n  - name: main\n    count: 1\n    template:\n"
        "      spec:\n        containers:\n        - name: c\n"
        "          resources: {requests: {memory: lots, cpu: many}}\n"
    )
    code, out, err = _admit(capsys, str(bad))
    assert (code, out) == (2, "")
    field = "spec.podSets[0].template.spec.containers[0].resources.requests"
    assert [line.split(": ")[2] for line in err.splitlines()] == [f"{field}[memory]", f"{field}[cpu]"]
