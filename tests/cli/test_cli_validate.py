"""`kueuestream validate PATH...`: exit 0 when valid, else exit 2 and one line per problem.

A problem line is ``FILE:DOC_INDEX: Kind namespace/name: field.path: what is wrong``;
DOC_INDEX counts the documents of the file from 0.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kueuestream.agents.cli.main import main
from tests.core.quota_check_examples import WARNING, only_declared_with_prefixes

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"

LINE = re.compile(
    r"^(?P<file>[^:]+):(?P<index>\d+): (?P<kind>[A-Za-z]+)(?: (?P<ident>\S+))?: (?P<path>\S+): (?P<msg>.+)$"
)

FLAVOR = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
"""
CQ = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
"""
LQ = """apiVersion: kueue.x-k8s.io/v1beta2
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


def validate(capsys: pytest.CaptureFixture[str], *paths: Path | str) -> tuple[int, list[str]]:
    code = main(["validate", *(str(p) for p in paths)])
    out, err = capsys.readouterr()
    assert out == "", "validate prints on stderr only"
    return code, err.splitlines()


def write(folder: Path, name: str, *docs: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("---\n".join(docs))
    return path


# ------------------------------------------------------------------- valid


def test_a_valid_folder_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "00-flavor.yaml", FLAVOR)
    write(tmp_path, "01-queues.yml", CQ, LQ)
    write(tmp_path, "nested/02-workload.yaml", WL)
    (tmp_path / "notes.txt").write_text("not a manifest: [")
    assert validate(capsys, tmp_path) == (0, ["4 objects valid"])


@pytest.mark.parametrize("name", ["only-declared", "all"])
def test_the_quota_check_examples_are_valid_without_warnings(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(EXAMPLES / "quota-check" / name)]) == 0
    assert capsys.readouterr() == ("", "6 objects valid\n")


def test_exclude_prefixes_under_only_declared_are_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = only_declared_with_prefixes(tmp_path)
    assert validate(capsys, folder) == (
        0,
        [f"warning: {folder / '00-configuration.yaml'}:0: {WARNING}", "6 objects valid"],
    )


def test_files_and_folders_can_be_mixed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "queues", "cq.yaml", CQ)
    flavor = write(tmp_path, "flavor.yaml", FLAVOR)
    assert validate(capsys, flavor, tmp_path / "queues") == (0, ["2 objects valid"])


def test_json_and_kind_list_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "flavor.json").write_text(
        '{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpu"}}'
    )
    items = "\n".join("- " + doc.replace("\n", "\n  ").rstrip() for doc in (CQ, LQ))
    write(tmp_path, "list.yaml", f"apiVersion: v1\nkind: List\nitems:\n{items}\n")
    assert validate(capsys, tmp_path) == (0, ["3 objects valid"])


def test_unrelated_kinds_and_unknown_fields_are_no_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: team-a}\nspec: {ports: oops}\n"
    write(tmp_path, "mixed.yaml", service, FLAVOR.replace("spec", "x") + "futureField: {a: 1}\n")
    assert validate(capsys, tmp_path) == (0, ["2 objects valid"])


# ----------------------------------------------------------------- invalid


def test_invalid_files_exit_two_with_one_line_per_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write(
        tmp_path,
        "a.yaml",
        FLAVOR,
        CQ.replace("nominalQuota: 4", "nominalQuota: 4 cores").replace(
            "namespaceSelector: {}", "stopPolicy: Stop"
        ),
        LQ.replace("spec: {clusterQueue: team}", "spec: {}"),
    )
    b = write(
        tmp_path,
        "b.yaml",
        FLAVOR,
        WL.replace("count: 2", "count: '2'").replace("name: main, ", "name: main, minCount: 1, "),
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nresources: {quotaCheck: Some}\n",
    )
    code, lines = validate(capsys, tmp_path)
    assert code == 2
    assert lines == [
        f"{a}:1: ClusterQueue team: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "
        '"4 cores" is not a quantity: expected a number with an optional suffix such as 500m, 2, 1.5Gi, '
        "1200Mi or 1e3",
        f"{a}:1: ClusterQueue team: spec.stopPolicy: unsupported value 'Stop'; "
        "accepted values: 'None', 'Hold' or 'HoldAndDrain'",
        f"{a}:2: LocalQueue team-a/team: spec.clusterQueue: required field is missing",
        f"{b}:0: ResourceFlavor default: metadata.name: defined twice, first at {a}:0; "
        "each object may appear once",
        f"{b}:1: Workload team-a/job: spec.podSets[0].count: expected an integer, got str '2'",
        f"{b}:2: Configuration: resources.quotaCheck: unsupported value 'Some'; "
        "accepted values: 'All' or 'OnlyDeclared'",
    ]
    for line in lines:
        match = LINE.match(line)
        assert match is not None, line
        assert match["file"] in (str(a), str(b))


def test_problem_line_shape_for_a_namespaced_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "wl.yaml", WL.replace("count: 2", "count: 2, minCount: 3"))
    code, [line] = validate(capsys, path)
    assert code == 2
    match = LINE.match(line)
    assert match is not None
    assert match.groupdict() == {
        "file": str(path),
        "index": "0",
        "kind": "Workload",
        "ident": "team-a/job",
        "path": "spec.podSets[0].minCount",
        "msg": "must be between 1 and count (2), got 3",
    }


def test_configuration_in_a_config_map(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path,
        "kueue.yaml",
        """apiVersion: v1
kind: ConfigMap
metadata: {name: kueue-manager-config, namespace: kueue-system}
data:
  controller_manager_config.yaml: |
    apiVersion: config.kueue.x-k8s.io/v1beta1
    kind: Configuration
    fairSharing:
      enable: true
      preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]
""",
    )
    code, lines = validate(capsys, path)
    assert (code, lines) == (
        2,
        [
            f"{path}:0: Configuration kueue-manager-config: "
            "data[controller_manager_config.yaml].fairSharing.preemptionStrategies: unsupported combination "
            "['LessThanInitialShare', 'LessThanOrEqualToFinalShare']; "
            "accepted: [LessThanOrEqualToFinalShare], "
            "[LessThanInitialShare], or [LessThanOrEqualToFinalShare, LessThanInitialShare]"
        ],
    )


def test_two_configurations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
    first = write(tmp_path, "a.yaml", cfg)
    second = write(tmp_path, "b.yaml", FLAVOR, cfg + "resources: {quotaCheck: OnlyDeclared}\n")
    assert validate(capsys, tmp_path) == (
        2,
        [
            f"{second}:1: Configuration: kind: a second Configuration, the first is at {first}:0; "
            "Kueue runs with exactly one"
        ],
    )


def test_yaml_syntax_error_names_file_and_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "broken.yaml", FLAVOR, "apiVersion: v1\nkind: Namespace\nmetadata: {name: [oops\n")
    code, lines = validate(capsys, path)
    assert code == 2
    # the first document is still read and checked; lines and columns count from the top of the file
    assert lines == [
        f"{path}:1: not valid YAML: line 8, column 1: expected ',' or ']', but got '<stream end>' "
        "(while parsing a flow sequence at line 7, column 18)"
    ]


def test_yaml_syntax_error_in_the_first_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("kind: ResourceFlavor\n  metadata: x\n")
    code, [line] = validate(capsys, path)
    assert code == 2
    assert line.startswith(f"{path}:0: not valid YAML: line 2, column 11: ")


def test_invalid_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"kind": "ResourceFlavor",')
    code, [line] = validate(capsys, path)
    assert code == 2
    assert line.startswith(f"{path}:0: not valid JSON: ")


def test_doc_index_counts_every_document_of_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # an empty document still counts; the items of a List share their document's index
    items = "\n".join(
        "- " + doc.replace("\n", "\n  ").rstrip()
        for doc in (FLAVOR, LQ.replace("{clusterQueue: team}", "{}"))
    )
    path = write(
        tmp_path,
        "many.yaml",
        CQ,
        "# nothing here\n",
        f"apiVersion: v1\nkind: List\nitems:\n{items}\n",
        CQ.replace("name: team", "name: other").replace("nominalQuota: 4", "nominalQuota: -4"),
    )
    code, lines = validate(capsys, path)
    assert code == 2
    assert lines == [
        f"{path}:2: LocalQueue team-a/team: spec.clusterQueue: required field is missing",
        f"{path}:3: ClusterQueue other: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "
        "must be >= 0, got -4",
    ]


def test_a_document_that_is_not_an_object(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "list.yaml", FLAVOR, "- just\n- a list\n")
    assert validate(capsys, path) == (
        2,
        [f"{path}:1: <no kind> <no name>: a manifest must be a mapping with apiVersion and kind"],
    )


def test_missing_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "flavor.yaml", FLAVOR)
    missing = tmp_path / "nope"
    assert validate(capsys, tmp_path, missing) == (2, [f"{missing}: no such file or directory"])


def test_missing_path_and_invalid_object_are_both_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path, "cq.yaml", CQ.replace("namespaceSelector: {}", "cohortName: 5"))
    assert validate(capsys, "does-not-exist.yaml", bad) == (
        2,
        [
            "does-not-exist.yaml: no such file or directory",
            f"{bad}:0: ClusterQueue team: spec.cohortName: expected a string, got int 5",
        ],
    )


def test_warnings_do_not_fail_validation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write(
        tmp_path,
        "config.yaml",
        "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
        "resources: {quotaCheckStrategy: IgnoreUndeclared, excludeResourcePrefixes: [example.com/]}\n",
    )
    assert validate(capsys, cfg) == (
        0,
        [
            f"warning: {cfg}:0: resources.excludeResourcePrefixes is ignored because resources.quotaCheck is "
            "OnlyDeclared: only the resources a ClusterQueue covers are checked",
            "1 objects valid",
        ],
    )


def test_warnings_are_printed_beside_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write(
        tmp_path,
        "a.yaml",
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "resources: {quotaCheck: OnlyDeclared, excludeResourcePrefixes: [example.com/]}\n",
        LQ.replace("namespace: team-a", "namespace: ''"),
    )
    code, lines = validate(capsys, cfg)
    assert code == 2
    assert lines[0].startswith(f"warning: {cfg}:0: resources.excludeResourcePrefixes is ignored")
    assert lines[1:] == [f"{cfg}:1: LocalQueue team: metadata.namespace: required: LocalQueue is namespaced"]
