"""validate and admit refuse what the API server refuses, and report every problem run records.

Upstream: the API server's strict field validation refuses a duplicate key
(sigs.k8s.io/yaml ``YAMLToJSONStrict``; encoding/json's duplicate-field check
for JSON); go-yaml refuses excessive aliasing (``allowedAliasRatio`` in
go.yaml.in/yaml/v2 decode.go). Kueue's API group kueue.x-k8s.io serves
AdmissionCheck, ClusterQueue, Cohort, LocalQueue, MultiKueueCluster,
MultiKueueConfig, ProvisioningRequestConfig, ResourceFlavor, Topology,
Workload and WorkloadPriorityClass (config/components/crd/bases).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kueuestream.agents.cli.main import main
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.schemas import ErrorRecord

QUEUES = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team, namespace: team-a}
spec: {clusterQueue: team}
"""
WL = """apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: job, namespace: team-a}
spec:
  queueName: team
  podSets: [{name: main, count: 2, template: {spec: {containers: [{resources: {requests: {cpu: 1}}}]}}}]
"""


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, list[str]]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


def folder(tmp_path: Path, *docs: str, name: str = "input.yaml") -> tuple[Path, Path]:
    src = tmp_path / "src"
    src.mkdir(parents=True)
    (src / "queues.yaml").write_text(QUEUES)
    path = src / name
    path.write_text("---\n".join(docs))
    return src, path


def bomb(levels: int, width: int = 9) -> str:
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines)


def test_an_alias_bomb_in_a_valid_workload_is_refused_by_validate_and_admit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Six levels of nine: 531,441 leaves, all but 9 of them through aliases. Refused as soon as
    # more than 99% of over 1,000 values come through aliases, long before it is expanded.
    carried = WL.replace("spec:\n", "spec:\n  bomb:\n    " + bomb(6).replace("\n", "\n    ") + "\n", 1)
    src, path = folder(tmp_path, carried)
    for command in ("validate", "admit"):
        code, out, err = cli(capsys, command, str(src))
        assert (code, out) == (2, ""), command
        [line] = err
        assert line.startswith(f"{path}:0: Workload team-a/job: spec.bomb.l2: excessive aliasing at line 8, ")
        assert line.endswith("through aliases; refused, as the API server refuses alias bombs")


def test_a_typo_kind_under_a_kueue_api_version_is_an_error_naming_the_kinds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, path = folder(tmp_path, WL.replace("kind: Workload", "kind: Workoad"))
    expected = (
        f"{path}:0: Workoad team-a/job: kind: unknown kind 'Workoad' in kueue.x-k8s.io/v1beta2; the kinds "
        "of kueue.x-k8s.io are AdmissionCheck, ClusterQueue, Cohort, LocalQueue, MultiKueueCluster, "
        "MultiKueueConfig, ProvisioningRequestConfig, ResourceFlavor, Topology, Workload, "
        "WorkloadPriorityClass"
    )
    assert cli(capsys, "validate", str(src)) == (2, "", [expected])
    assert cli(capsys, "admit", str(src)) == (2, "", [expected])
    config = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuraton\n"
    src, path = folder(tmp_path / "config", config)
    code, _, err = cli(capsys, "validate", str(src))
    assert code == 2
    assert err == [
        f"{path}:0: Configuraton <no name>: kind: unknown kind 'Configuraton' in "
        "config.kueue.x-k8s.io/v1beta2; the kinds of config.kueue.x-k8s.io are Configuration"
    ]


def test_kinds_that_are_none_of_kueuestreams_business_are_ignored_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topology = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: default}\n"
    service = "apiVersion: v1\nkind: Service\nmetadata: {name: Web_UI, namespace: x}\n"
    src, _ = folder(tmp_path, WL, topology, service)
    assert cli(capsys, "validate", str(src)) == (0, "", ["6 objects valid"])
    code, out, _ = cli(capsys, "admit", str(src))
    assert code == 0 and "name: job" in out
    log = tmp_path / "log"
    assert cli(capsys, "run", "--source", str(src), "--log-dir", str(log), "--once")[0] == 0
    assert recorded_errors(log) == []


def test_a_duplicate_yaml_key_names_the_key_its_path_and_both_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lq = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: b, namespace: team-a}\n"
    lq += "spec:\n  clusterQueue: team\n  clusterQueue: other\n"
    src, path = folder(tmp_path, WL, lq)
    expected = (
        f"{path}:1: LocalQueue team-a/b: spec.clusterQueue: duplicate key 'clusterQueue' at line 13, "
        "column 3, first given at line 12, column 3; a key may appear once in a map, as the API server's "
        "strict field validation requires"
    )
    assert cli(capsys, "validate", str(src)) == (2, "", [expected])
    assert cli(capsys, "admit", str(src)) == (2, "", [expected])


def test_a_duplicate_json_key_names_the_key_and_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        '{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", '
        '"metadata": {"name": "b", "namespace": "team-a"}, '
        '"spec": {"clusterQueue": "team", "clusterQueue": "other"}}'
    )
    src, path = folder(tmp_path, text, name="lq.json")
    expected = (
        f"{path}:0: spec.clusterQueue: duplicate key 'clusterQueue'; a key may appear once in an object, "
        "as the API server's strict field validation requires"
    )
    assert cli(capsys, "validate", str(src)) == (2, "", [expected])
    assert cli(capsys, "admit", str(src)) == (2, "", [expected])


def test_json_values_the_api_server_would_not_take(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "nan.json").write_text(
        '{"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "a"}, "x": NaN}'
    )
    (src / "deep.json").write_text("[" * 5000 + "]" * 5000)
    (src / "lone.json").write_text(
        '{"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "\\ud800"}}'
    )
    code, _, err = cli(capsys, "validate", str(src))
    assert code == 2
    assert err == [
        f"{src / 'deep.json'}:0: nested more than 100 levels deep",
        f"{src / 'lone.json'}:0: metadata.name: a lone UTF-16 surrogate escape is not text",
        f"{src / 'nan.json'}:0: not valid JSON: NaN is not a JSON value; "
        "write numbers as digits, or a string",
    ]


def recorded_errors(log: Path) -> list[str]:
    with FileLog(log, read_only=True) as opened:
        return [codec.decode(r.value, ErrorRecord).error for r in opened.read_sync(TopicNames().errors, 0)]


BAD_DOCUMENTS = {
    "typo kind": WL.replace("kind: Workload", "kind: Workoad"),
    "name with a slash": WL.replace("name: job", "name: a/b"),
    "namespace with a NUL": WL.replace("namespace: team-a", 'namespace: "a\\0b"'),
    "duplicate key": WL.replace("queueName: team", "queueName: team\n  queueName: team"),
    "alias bomb": WL.replace("spec:\n", "spec:\n  bomb:\n    " + bomb(9).replace("\n", "\n    ") + "\n", 1),
    "no apiVersion": WL.replace("apiVersion: kueue.x-k8s.io/v1beta2\n", ""),
    "wrong type": WL.replace("count: 2", "count: two"),
    "config map name": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Kueue_Config, namespace: kueue-system}\n"
        "data: {c.yaml: 'apiVersion: config.kueue.x-k8s.io/v1beta2\n\n  kind: Configuration\n\n'}\n"
    ),
    "deep": "a: " + "[" * 150 + "]" * 150 + "\n",
    "huge count": WL.replace("count: 2", "count: 100000000000000000000000"),
    "binary": WL.replace("queueName: team", "queueName: !!binary dGVhbQ=="),
}


@pytest.mark.parametrize("case", sorted(BAD_DOCUMENTS))
def test_validate_and_admit_refuse_whatever_run_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    src, _ = folder(tmp_path, BAD_DOCUMENTS[case])
    log = tmp_path / "log"
    code, _, _ = cli(capsys, "run", "--source", str(src), "--log-dir", str(log), "--once")
    assert code == 0
    assert recorded_errors(log), "run records the problem"
    assert cli(capsys, "validate", str(src))[0] == 2
    code, out, err = cli(capsys, "admit", str(src))
    assert (code, out) == (2, "") and err


def test_a_valid_folder_gives_run_nothing_to_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, _ = folder(
        tmp_path, WL, json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    )
    log = tmp_path / "log"
    assert cli(capsys, "run", "--source", str(src), "--log-dir", str(log), "--once")[0] == 0
    assert recorded_errors(log) == []
    assert cli(capsys, "validate", str(src))[0] == 0
    assert cli(capsys, "admit", str(src))[0] == 0
