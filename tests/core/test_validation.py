"""Every way a manifest is refused, with the exact field path and what would be accepted."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kueuestream.admission.api.config import Configuration
from kueuestream.admission.decode import Decoded, decode
from kueuestream.admission.validation import config_warnings
from kueuestream.agents.sources.checks import check_documents
from kueuestream.agents.sources.manifests import LoadedDoc

V1B2 = "kueue.x-k8s.io/v1beta2"
CONFIG_V1B1 = "config.kueue.x-k8s.io/v1beta1"
CONFIG_V1B2 = "config.kueue.x-k8s.io/v1beta2"


def decoded(text: str) -> Decoded:
    return decode(yaml.safe_load(text))


def problems(text: str) -> list[str]:
    """Every error of one manifest, as ``path: message``."""
    d = decoded(text)
    assert d.obj is None, "expected the manifest to be refused"
    return [str(e) for e in d.errors]


def accepted(text: str) -> Any:
    d = decoded(text)
    assert not d.errors, d.errors
    assert d.obj is not None
    return d.obj


def cq(spec: str, name: str = "q", version: str = V1B2) -> str:
    return f"apiVersion: {version}\nkind: ClusterQueue\nmetadata: {{name: {name}}}\nspec:\n{spec}"


def wl(spec: str, meta: str = "{name: w, namespace: team-a}") -> str:
    return f"apiVersion: {V1B2}\nkind: Workload\nmetadata: {meta}\nspec:\n{spec}"


def config(body: str, version: str = CONFIG_V1B2) -> str:
    return f"apiVersion: {version}\nkind: Configuration\n{body}"


ONE_GROUP = """  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 4}]
"""


# ---------------------------------------------------------------- wrong types


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a string where an integer belongs: quoted numbers are strings to the API server
        (
            wl("  podSets: [{name: main, count: '3'}]"),
            "spec.podSets[0].count: expected an integer, got str '3'",
        ),
        (
            wl("  podSets: [{name: main, count: two}]"),
            "spec.podSets[0].count: expected an integer, got str 'two'",
        ),
        (
            wl("  priority: '5'\n  podSets: [{name: main}]"),
            "spec.priority: expected an integer, got str '5'",
        ),
        (
            wl("  podSets: [{name: main, count: true}]"),
            "spec.podSets[0].count: expected an integer, got bool True",
        ),
        (wl("  podSets: [{name: main, count: 2.5}]"), "spec.podSets[0].count: expected an integer, got 2.5"),
        (
            f"apiVersion: {V1B2}\nkind: WorkloadPriorityClass\nmetadata: {{name: high}}\nvalue: high",
            "value: expected an integer, got str 'high'",
        ),
        # an integer where a string belongs
        (cq("  cohortName: 5\n" + ONE_GROUP), "spec.cohortName: expected a string, got int 5"),
        (
            cq("  cohort: 5\n" + ONE_GROUP, version="kueue.x-k8s.io/v1beta1"),
            "spec.cohort: expected a string, got int 5",
        ),
        (
            cq("  resourceGroups: [{coveredResources: [1], flavors: []}]"),
            "spec.resourceGroups[0].coveredResources[0]: expected a string, got int 1",
        ),
        (
            f"apiVersion: {V1B2}\nkind: ResourceFlavor\nmetadata: {{name: f}}\n"
            "spec: {nodeLabels: {zone: 1}}",
            "spec.nodeLabels[zone]: expected a string, got int 1",
        ),
        (
            f"apiVersion: {V1B2}\nkind: LocalQueue\nmetadata: {{name: l, namespace: a}}\n"
            "spec: {clusterQueue: 7}",
            "spec.clusterQueue: expected a string, got int 7",
        ),
        # a list where an object belongs, and the other way round
        (cq("  []"), "spec: expected an object (a mapping of fields), got list"),
        (
            f"apiVersion: {V1B2}\nkind: ResourceFlavor\nmetadata: {{name: f}}\nspec: {{nodeLabels: [a]}}",
            "spec.nodeLabels: expected a map of key: value pairs, got list",
        ),
        (
            wl("  podSets:\n  - template: {spec: {containers: [{resources: {requests: [cpu]}}]}}"),
            "spec.podSets[0].template.spec.containers[0].resources.requests: "
            "expected a map of key: value pairs, got list",
        ),
        (wl("  podSets: {name: main}"), "spec.podSets: expected a list, got dict"),
        (cq("  resourceGroups: {coveredResources: [cpu]}"), "spec.resourceGroups: expected a list, got dict"),
        # booleans are true or false, not "yes"
        (wl("  active: 'yes'\n  podSets: [{name: main}]"), "spec.active: expected true or false, got 'yes'"),
        (
            config("fairSharing: {enable: sure}", version=CONFIG_V1B1),
            "fairSharing.enable: expected true or false, got 'sure'",
        ),
        (
            config("featureGates: {QuotaCheck: maybe}"),
            "featureGates[QuotaCheck]: expected true or false, got 'maybe'",
        ),
        (
            config("resources: {excludeResourcePrefixes: example.com/}"),
            "resources.excludeResourcePrefixes: expected a list, got str",
        ),
    ],
)
def test_wrong_types_name_the_field_and_the_expected_type(text: str, expected: str) -> None:
    assert problems(text) == [expected]


def test_a_wrongly_typed_name_is_one_error_not_also_a_missing_one() -> None:
    assert problems(cq(ONE_GROUP, name="123")) == ["metadata.name: expected a string, got int 123"]


# ------------------------------------------------------------ invalid enums


@pytest.mark.parametrize(
    ("spec", "path", "value", "accepted_values"),
    [
        ("  queueingStrategy: FIFO", "spec.queueingStrategy", "'FIFO'", "'StrictFIFO' or 'BestEffortFIFO'"),
        (
            "  preemption: {withinClusterQueue: Any}",
            "spec.preemption.withinClusterQueue",
            "'Any'",
            "'Never', 'LowerPriority' or 'LowerOrNewerEqualPriority'",
        ),
        (
            "  preemption: {reclaimWithinCohort: Sometimes}",
            "spec.preemption.reclaimWithinCohort",
            "'Sometimes'",
            "'Never', 'LowerPriority' or 'Any'",
        ),
        (
            "  preemption: {borrowWithinCohort: {policy: Any}}",
            "spec.preemption.borrowWithinCohort.policy",
            "'Any'",
            "'Never' or 'LowerPriority'",
        ),
        ("  stopPolicy: Stop", "spec.stopPolicy", "'Stop'", "'None', 'Hold' or 'HoldAndDrain'"),
        (
            "  flavorFungibility: {whenCanBorrow: Maybe}",
            "spec.flavorFungibility.whenCanBorrow",
            "'Maybe'",
            "'MayStopSearch' or 'TryNextFlavor' (v1beta1 also 'Borrow')",
        ),
        (
            # Borrow is a whenCanBorrow value only
            "  flavorFungibility: {whenCanPreempt: Borrow}",
            "spec.flavorFungibility.whenCanPreempt",
            "'Borrow'",
            "'MayStopSearch' or 'TryNextFlavor' (v1beta1 also 'Preempt')",
        ),
    ],
)
def test_cluster_queue_enums_list_the_accepted_values(
    spec: str, path: str, value: str, accepted_values: str
) -> None:
    assert problems(cq(spec + "\n" + ONE_GROUP)) == [
        f"{path}: unsupported value {value}; accepted values: {accepted_values}"
    ]


def test_every_bad_enum_of_one_object_is_reported_at_once() -> None:
    spec = "  queueingStrategy: 3\n  stopPolicy: Stop\n  preemption: {withinClusterQueue: Any}\n" + ONE_GROUP
    assert problems(cq(spec)) == [
        "spec.queueingStrategy: unsupported value 3; accepted values: 'StrictFIFO' or 'BestEffortFIFO'",
        "spec.preemption.withinClusterQueue: unsupported value 'Any'; "
        "accepted values: 'Never', 'LowerPriority' or 'LowerOrNewerEqualPriority'",
        "spec.stopPolicy: unsupported value 'Stop'; accepted values: 'None', 'Hold' or 'HoldAndDrain'",
    ]


@pytest.mark.parametrize(
    ("fungibility", "borrow", "preempt"),
    [
        ("{whenCanBorrow: MayStopSearch, whenCanPreempt: MayStopSearch}", "Borrow", "Preempt"),
        ("{whenCanBorrow: Borrow, whenCanPreempt: Preempt}", "Borrow", "Preempt"),
        ("{whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor}", "TryNextFlavor", "TryNextFlavor"),
        ("{}", "Borrow", "TryNextFlavor"),
    ],
)
def test_flavor_fungibility_v1beta1_and_v1beta2_spellings(
    fungibility: str, borrow: str, preempt: str
) -> None:
    obj = accepted(cq(f"  flavorFungibility: {fungibility}\n" + ONE_GROUP))
    assert (obj.spec.flavor_fungibility.when_can_borrow, obj.spec.flavor_fungibility.when_can_preempt) == (
        borrow,
        preempt,
    )


def test_local_queue_stop_policy_enum() -> None:
    text = f"apiVersion: {V1B2}\nkind: LocalQueue\nmetadata: {{name: l, namespace: a}}\n"
    assert problems(text + "spec: {clusterQueue: q, stopPolicy: Pause}") == [
        "spec.stopPolicy: unsupported value 'Pause'; accepted values: 'None', 'Hold' or 'HoldAndDrain'"
    ]


def test_taint_effect_enum() -> None:
    text = f"apiVersion: {V1B2}\nkind: ResourceFlavor\nmetadata: {{name: f}}\n"
    assert problems(text + "spec: {nodeTaints: [{key: spot, value: 'true', effect: Sometimes}]}") == [
        "spec.nodeTaints[0].effect: unsupported value 'Sometimes'; "
        "accepted values: 'NoSchedule', 'PreferNoSchedule' or 'NoExecute'"
    ]


# ----------------------------------------------------------- invalid quantities

QUANTITY_HINT = "expected a number with an optional suffix such as 500m, 2, 1.5Gi, 1200Mi or 1e3"


@pytest.mark.parametrize(
    ("quota", "message"),
    [
        ("1x", f'"1x" is not a quantity: {QUANTITY_HINT}'),
        ("'4 cores'", f'"4 cores" is not a quantity: {QUANTITY_HINT}'),
        ("[4]", "expected a quantity such as 500m, 2, 1.5Gi or 1200Mi, got list"),
        ("true", "expected a quantity such as 500m, 2, 1.5Gi or 1200Mi, got bool"),
    ],
)
def test_invalid_quota_quantities_say_what_would_be_accepted(quota: str, message: str) -> None:
    spec = f"""  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{{name: cpu, nominalQuota: {quota}}}]
"""
    assert problems(cq(spec)) == [f"spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: {message}"]


def test_invalid_request_quantity_names_the_resource_as_a_map_key() -> None:
    spec = """  podSets:
  - template:
      spec:
        containers:
        - resources: {requests: {cpu: lots, nvidia.com/gpu: one}}
"""
    base = "spec.podSets[0].template.spec.containers[0].resources.requests"
    assert problems(wl(spec)) == [
        f'{base}[cpu]: "lots" is not a quantity: {QUANTITY_HINT}',
        f'{base}[nvidia.com/gpu]: "one" is not a quantity: {QUANTITY_HINT}',
    ]


def test_negative_request_is_refused() -> None:
    spec = "  podSets:\n  - template: {spec: {containers: [{resources: {requests: {cpu: '-1'}}}]}}"
    assert problems(wl(spec)) == [
        "spec.podSets[0].template.spec.containers[0].resources.requests[cpu]: must be >= 0, got -1"
    ]


# ------------------------------------------------------------ required fields


def test_missing_name_of_a_cluster_scoped_object() -> None:
    assert problems(f"apiVersion: {V1B2}\nkind: ResourceFlavor\nmetadata: {{}}\n") == [
        "metadata.name: required field is missing"
    ]


def test_missing_metadata_is_reported_once_as_the_missing_name() -> None:
    assert problems(f"apiVersion: {V1B2}\nkind: ClusterQueue\nspec: {{}}\n") == [
        "metadata.name: required field is missing"
    ]


@pytest.mark.parametrize("kind", ["LocalQueue", "Workload"])
def test_namespaced_kinds_need_a_namespace(kind: str) -> None:
    spec = "{clusterQueue: q}" if kind == "LocalQueue" else "{podSets: [{name: main}]}"
    text = f"apiVersion: {V1B2}\nkind: {kind}\nmetadata: {{name: x}}\nspec: {spec}\n"
    assert problems(text) == [f"metadata.namespace: required: {kind} is namespaced"]


def test_local_queue_needs_its_cluster_queue() -> None:
    text = f"apiVersion: {V1B2}\nkind: LocalQueue\nmetadata: {{name: l, namespace: a}}\nspec: {{}}\n"
    assert problems(text) == ["spec.clusterQueue: required field is missing"]
    assert problems(text.replace("spec: {}\n", "")) == ["spec.clusterQueue: required field is missing"]


def test_workload_needs_pod_sets() -> None:
    assert problems(wl("  queueName: q")) == ["spec.podSets: must list at least one pod set"]
    assert problems(wl("  podSets: []")) == ["spec.podSets: must list at least one pod set"]


def test_workload_without_anything_lists_every_missing_field() -> None:
    assert problems(f"apiVersion: {V1B2}\nkind: Workload\nmetadata: {{}}\n") == [
        "metadata.name: required field is missing",
        "metadata.namespace: required: Workload is namespaced",
        "spec.podSets: must list at least one pod set",
    ]


def test_missing_kind() -> None:
    d = decoded(f"apiVersion: {V1B2}\nmetadata: {{name: x}}\n")
    assert [str(e) for e in d.errors] == ["kind: required field is missing"]
    assert d.label == "<no kind> x"


def test_a_manifest_that_is_not_a_mapping() -> None:
    d = decode(["a", "b"])
    assert [str(e) for e in d.errors] == ["a manifest must be a mapping with apiVersion and kind"]


def test_taint_needs_key_and_effect() -> None:
    text = f"apiVersion: {V1B2}\nkind: ResourceFlavor\nmetadata: {{name: f}}\nspec: {{nodeTaints: [{{}}]}}\n"
    assert problems(text) == [
        "spec.nodeTaints[0].key: required field is missing",
        "spec.nodeTaints[0].effect: required field is missing",
    ]


def test_quota_needs_nominal_quota() -> None:
    spec = (
        "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors: [{name: f, resources: [{name: cpu}]}]"
    )
    assert problems(cq(spec)) == [
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: required field is missing"
    ]


# -------------------------------------------------------- ClusterQueue rules


def test_flavor_resources_must_match_covered_resources_in_order() -> None:
    spec = """  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources: [{name: memory, nominalQuota: 1Gi}, {name: cpu, nominalQuota: 1}]
    - name: small
      resources: [{name: cpu, nominalQuota: 1}]
"""
    assert problems(cq(spec)) == [
        "spec.resourceGroups[0].flavors[0].resources: must list exactly the covered resources in the "
        "same order ['cpu', 'memory'], got ['memory', 'cpu']",
        "spec.resourceGroups[0].flavors[1].resources: must list exactly the covered resources in the "
        "same order ['cpu', 'memory'], got ['cpu']",
    ]


def test_a_resource_belongs_to_one_group() -> None:
    spec = """  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: a, resources: [{name: cpu, nominalQuota: 1}]}]
  - coveredResources: [memory, cpu]
    flavors: [{name: b, resources: [{name: memory, nominalQuota: 1}, {name: cpu, nominalQuota: 1}]}]
"""
    assert problems(cq(spec)) == [
        "spec.resourceGroups[1].coveredResources[1]: resource cpu is already covered by "
        "resourceGroups[0]; a resource may belong to one resource group only"
    ]


def test_a_flavor_belongs_to_one_group() -> None:
    spec = """  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: a, resources: [{name: cpu, nominalQuota: 1}]}]
  - coveredResources: [memory]
    flavors: [{name: a, resources: [{name: memory, nominalQuota: 1}]}]
"""
    assert problems(cq(spec)) == [
        "spec.resourceGroups[1].flavors[0].name: flavor a already appears in resourceGroups[0]; "
        "a flavor may appear in one resource group only"
    ]


def test_groups_need_resources_and_flavors() -> None:
    assert problems(cq("  resourceGroups: [{coveredResources: [], flavors: []}]")) == [
        "spec.resourceGroups[0].coveredResources: must list at least one resource",
        "spec.resourceGroups[0].flavors: must list at least one flavor",
    ]


@pytest.mark.parametrize("field", ["nominalQuota", "borrowingLimit", "lendingLimit"])
def test_negative_quotas(field: str) -> None:
    extra = "" if field == "nominalQuota" else f", {field}: '-2'"
    nominal = "'-2'" if field == "nominalQuota" else "4"
    spec = f"""  cohortName: team
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: a, resources: [{{name: cpu, nominalQuota: {nominal}{extra}}}]}}]
"""
    assert problems(cq(spec)) == [
        f"spec.resourceGroups[0].flavors[0].resources[0].{field}: must be >= 0, got -2"
    ]


def test_lending_limit_above_nominal_quota() -> None:
    spec = """  cohortName: team
  resourceGroups:
  - coveredResources: [memory]
    flavors: [{name: a, resources: [{name: memory, nominalQuota: 1Gi, lendingLimit: 2Gi}]}]
"""
    assert problems(cq(spec)) == [
        "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: must be <= nominalQuota (1Gi), got 2Gi"
    ]


def test_lending_limit_equal_to_nominal_quota_is_fine() -> None:
    spec = """  cohortName: team
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: a, resources: [{name: cpu, nominalQuota: 4, lendingLimit: 4, borrowingLimit: 0}]}]
"""
    accepted(cq(spec))


def test_borrowing_and_lending_limits_need_a_cohort() -> None:
    spec = """  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: a, resources: [{name: cpu, nominalQuota: 4, borrowingLimit: 1, lendingLimit: 2}]}]
"""
    assert problems(cq(spec)) == [
        "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: "
        "must be unset when there is no cohort to borrow from",
        "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: "
        "must be unset when there is no cohort to lend to",
    ]


def test_borrow_within_cohort_needs_reclaim_within_cohort() -> None:
    spec = "  cohortName: team\n  preemption: {borrowWithinCohort: {policy: LowerPriority}}\n" + ONE_GROUP
    assert problems(cq(spec)) == [
        "spec.preemption.borrowWithinCohort.policy: requires reclaimWithinCohort to be LowerPriority or Any"
    ]
    fixed = spec.replace("preemption: {", "preemption: {reclaimWithinCohort: Any, ")
    accepted(cq(fixed))


def test_negative_fair_sharing_weight() -> None:
    assert problems(cq("  fairSharing: {weight: '-1'}\n" + ONE_GROUP)) == [
        "spec.fairSharing.weight: must be >= 0, got -1"
    ]


def test_cohort_name_must_be_a_dns_label() -> None:
    [message] = problems(cq("  cohortName: Team_A\n" + ONE_GROUP))
    assert message.startswith("spec.cohortName: name 'Team_A' must be a DNS label")


# ------------------------------------------------------------------- Cohort


def test_cohort_cannot_be_its_own_parent() -> None:
    text = f"apiVersion: {V1B2}\nkind: Cohort\nmetadata: {{name: org}}\nspec: {{parentName: org}}\n"
    assert problems(text) == ["spec.parentName: a Cohort cannot be its own parent"]


def test_cohort_quota_follows_the_cluster_queue_rules() -> None:
    text = f"""apiVersion: {V1B2}
kind: Cohort
metadata: {{name: org}}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: a, resources: [{{name: cpu, nominalQuota: 4, lendingLimit: 1}}]}}]
"""
    assert problems(text) == [
        "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: "
        "must be unset when there is no cohort to lend to"
    ]
    accepted(text.replace("spec:\n", "spec:\n  parentName: root\n"))


# ------------------------------------------------------------------ Workload


def test_duplicate_pod_set_names() -> None:
    assert problems(wl("  podSets: [{name: main}, {name: main}]")) == [
        "spec.podSets[1].name: duplicate pod set name 'main'"
    ]


def test_pod_set_name_must_be_a_dns_label() -> None:
    assert problems(wl("  podSets: [{name: Main_1}]")) == [
        "spec.podSets[0].name: 'Main_1' must be a DNS label: lower-case alphanumerics or '-', "
        "starting and ending with an alphanumeric, at most 63 characters"
    ]


def test_negative_count() -> None:
    assert problems(wl("  podSets: [{name: main, count: -1}]")) == [
        "spec.podSets[0].count: must be >= 0, got -1"
    ]


@pytest.mark.parametrize("min_count", [3, 0])
def test_min_count_between_one_and_count(min_count: int) -> None:
    assert problems(wl(f"  podSets: [{{name: main, count: 2, minCount: {min_count}}}]")) == [
        f"spec.podSets[0].minCount: must be between 1 and count (2), got {min_count}"
    ]


def test_at_most_eight_pod_sets() -> None:
    eight = ", ".join(f"{{name: p{i}}}" for i in range(8))
    accepted(wl(f"  podSets: [{eight}]"))
    assert problems(wl(f"  podSets: [{eight}, {{name: p8}}]")) == ["spec.podSets: at most 8 pod sets, got 9"]


# ----------------------------------------------------- versions and leniency


def test_unsupported_api_version() -> None:
    assert problems(cq(ONE_GROUP, version="kueue.x-k8s.io/v1")) == [
        "apiVersion: unsupported apiVersion 'kueue.x-k8s.io/v1' for ClusterQueue; "
        "accepted: kueue.x-k8s.io/v1beta1, kueue.x-k8s.io/v1beta2"
    ]
    assert problems(config("", version="config.kueue.x-k8s.io/v1")) == [
        "apiVersion: unsupported apiVersion 'config.kueue.x-k8s.io/v1' for Configuration; "
        "accepted: config.kueue.x-k8s.io/v1beta1, config.kueue.x-k8s.io/v1beta2"
    ]


@pytest.mark.parametrize("version", ["kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"])
def test_both_kueue_versions_are_read(version: str) -> None:
    cohort_field = "cohort" if version.endswith("v1beta1") else "cohortName"
    obj = accepted(cq(f"  {cohort_field}: team\n" + ONE_GROUP, version=version))
    assert obj.spec.cohort == "team"


def test_unknown_fields_are_ignored_like_the_api_server_prunes_them() -> None:
    text = f"""apiVersion: {V1B2}
kind: ClusterQueue
metadata: {{name: q, someAnnotation: x}}
whatever: 1
spec:
  admissionChecksStrategy: {{admissionChecks: [{{name: check}}]}}
  futureField: [1, 2]
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      unknown: {{deep: true}}
      resources: [{{name: cpu, nominalQuota: 4, extra: 1}}]
"""
    obj = accepted(text)
    assert obj.spec.resource_groups[0].flavors[0].resources[0].nominal_quota.value == 4


def test_unrelated_kinds_are_ignored() -> None:
    d = decoded("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: a}\nspec: {ports: 3}\n")
    assert (d.relevant, d.errors, d.obj) == (False, [], None)
    d = decoded("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\ndata: {a: b}\n")
    assert (d.relevant, d.errors) == (False, [])


def test_cluster_scoped_objects_drop_metadata_namespace() -> None:
    # The API server clears it; two ClusterQueues "q" in different namespaces are one object.
    d = decoded(cq(ONE_GROUP).replace("{name: q}", "{name: q, namespace: team-a}"))
    assert (d.namespace, d.name, d.label) == ("", "q", "ClusterQueue q")


# --------------------------------------------------------------- ResourceFlavor


@pytest.mark.parametrize("weight", ["0", "'-1'", "0m"])
def test_resource_weights_must_be_positive(weight: str) -> None:
    text = f"""apiVersion: {V1B2}
kind: ResourceFlavor
metadata: {{name: a100}}
spec: {{resourceWeights: {{cpu: 1, nvidia.com/gpu: {weight}}}}}
"""
    shown = weight.strip("'")
    assert problems(text) == [
        f"spec.resourceWeights[nvidia.com/gpu]: weight of nvidia.com/gpu must be greater than 0, "
        f'got {"0" if shown == "0m" else shown}; use a positive quantity such as "1", "8" or "0.5"'
    ]


def test_positive_resource_weights_are_accepted() -> None:
    text = f"""apiVersion: {V1B2}
kind: ResourceFlavor
metadata: {{name: a100}}
spec: {{resourceWeights: {{cpu: 0.5, nvidia.com/gpu: 8}}}}
"""
    obj = accepted(text)
    assert {k: str(v) for k, v in obj.spec.resource_weights.items()} == {"cpu": "500m", "nvidia.com/gpu": "8"}


# -------------------------------------------------------------- Configuration


@pytest.mark.parametrize("version", [CONFIG_V1B1, CONFIG_V1B2])
@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ("{}", "All"),
        ("{quotaCheck: All}", "All"),
        ("{quotaCheck: OnlyDeclared}", "OnlyDeclared"),
        ("{quotaCheck: BlockUndeclared}", "All"),
        ("{quotaCheck: IgnoreUndeclared}", "OnlyDeclared"),
        ("{quotaCheckStrategy: IgnoreUndeclared}", "OnlyDeclared"),
        ("{quotaCheckStrategy: BlockUndeclared}", "All"),
        ("{quotaCheck: OnlyDeclared, quotaCheckStrategy: IgnoreUndeclared}", "OnlyDeclared"),
    ],
)
def test_quota_check_and_its_upstream_aliases(version: str, resources: str, expected: str) -> None:
    obj: Configuration = accepted(config(f"resources: {resources}", version=version))
    assert obj.quota_check == expected


def test_quota_check_invalid_values() -> None:
    assert problems(config("resources: {quotaCheck: Some}")) == [
        "resources.quotaCheck: unsupported value 'Some'; accepted values: 'All' or 'OnlyDeclared'"
    ]
    assert problems(config("resources: {quotaCheckStrategy: Some}")) == [
        "resources.quotaCheckStrategy: unsupported value 'Some'; accepted values: 'BlockUndeclared' or "
        "'IgnoreUndeclared' (the same as quotaCheck: 'All' or 'OnlyDeclared')"
    ]


def test_quota_check_and_quota_check_strategy_must_agree() -> None:
    assert problems(config("resources: {quotaCheck: All, quotaCheckStrategy: IgnoreUndeclared}")) == [
        "resources: quotaCheck is All but quotaCheckStrategy means OnlyDeclared; set only one of them"
    ]


@pytest.mark.parametrize(
    ("gates", "expected"),
    [
        ("{}", "OnlyDeclared"),  # the gate is on by default
        ("{QuotaCheck: true}", "OnlyDeclared"),
        ("{QuotaCheck: false}", "All"),
        ("{QuotaCheckStrategy: false}", "All"),  # upstream's gate name
        ("{QuotaCheckStrategy: true}", "OnlyDeclared"),
    ],
)
def test_quota_check_feature_gate(gates: str, expected: str) -> None:
    obj: Configuration = accepted(config(f"featureGates: {gates}\nresources: {{quotaCheck: OnlyDeclared}}"))
    assert obj.quota_check == expected


def test_gate_alias_is_stored_under_the_project_name() -> None:
    obj: Configuration = accepted(config("featureGates: {QuotaCheckStrategy: false}"))
    assert obj.gate("QuotaCheck") is False


def test_v1beta1_fair_sharing_needs_enable() -> None:
    on: Configuration = accepted(config("fairSharing: {enable: true}", version=CONFIG_V1B1))
    off: Configuration = accepted(
        config("fairSharing: {preemptionStrategies: [LessThanInitialShare]}", version=CONFIG_V1B1)
    )
    absent: Configuration = accepted(config("", version=CONFIG_V1B1))
    assert (on.fair_sharing_enabled, off.fair_sharing_enabled, absent.fair_sharing_enabled) == (
        True,
        False,
        False,
    )


def test_v1beta2_fair_sharing_is_enabled_by_its_presence() -> None:
    on: Configuration = accepted(config("fairSharing: {preemptionStrategies: [LessThanInitialShare]}"))
    assert on.fair_sharing_enabled
    assert on.fair_sharing is not None and on.fair_sharing.preemption_strategies == ["LessThanInitialShare"]
    # v1beta2 has no `enable`: the API server would prune it, so it cannot turn fair sharing off.
    pruned: Configuration = accepted(
        config("fairSharing: {enable: false, preemptionStrategies: [LessThanOrEqualToFinalShare]}")
    )
    assert pruned.fair_sharing_enabled
    assert not accepted(config("")).fair_sharing_enabled


@pytest.mark.parametrize(
    "strategies",
    [
        "[LessThanOrEqualToFinalShare]",
        "[LessThanInitialShare]",
        "[LessThanOrEqualToFinalShare, LessThanInitialShare]",
    ],
)
def test_accepted_preemption_strategy_combinations(strategies: str) -> None:
    accepted(config(f"fairSharing: {{preemptionStrategies: {strategies}}}"))


@pytest.mark.parametrize(
    ("strategies", "shown"),
    [
        (
            "[LessThanInitialShare, LessThanOrEqualToFinalShare]",
            "['LessThanInitialShare', 'LessThanOrEqualToFinalShare']",
        ),
        ("[LessThanInitialShare, LessThanInitialShare]", "['LessThanInitialShare', 'LessThanInitialShare']"),
        ("[]", "[]"),
    ],
)
def test_wrong_preemption_strategy_combination(strategies: str, shown: str) -> None:
    assert problems(config(f"fairSharing: {{preemptionStrategies: {strategies}}}")) == [
        f"fairSharing.preemptionStrategies: unsupported combination {shown}; accepted: "
        "[LessThanOrEqualToFinalShare], [LessThanInitialShare], "
        "or [LessThanOrEqualToFinalShare, LessThanInitialShare]"
    ]


def test_unknown_preemption_strategy() -> None:
    assert problems(config("fairSharing: {preemptionStrategies: [Fairest]}")) == [
        "fairSharing.preemptionStrategies[0]: unsupported value 'Fairest'; "
        "accepted values: 'LessThanOrEqualToFinalShare' or 'LessThanInitialShare'"
    ]


def test_configuration_label_has_no_name() -> None:
    assert decoded(config("resources: {quotaCheck: Nope}")).label == "Configuration"


CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata: {name: kueue-manager-config, namespace: kueue-system}
data:
  controller_manager_config.yaml: |
    apiVersion: config.kueue.x-k8s.io/v1beta2
    kind: Configuration
    resources:
      quotaCheck: Nope
      excludeResourcePrefixes: [example.com/]
"""


def test_configuration_inside_a_config_map_prefixes_the_error_path() -> None:
    d = decoded(CONFIGMAP)
    assert d.label == "Configuration kueue-manager-config"
    assert [str(e) for e in d.errors] == [
        "data[controller_manager_config.yaml].resources.quotaCheck: unsupported value 'Nope'; "
        "accepted values: 'All' or 'OnlyDeclared'"
    ]


def test_configuration_inside_a_config_map_is_read() -> None:
    obj: Configuration = accepted(CONFIGMAP.replace("Nope", "IgnoreUndeclared"))
    assert obj.quota_check == "OnlyDeclared"


def test_configuration_inside_a_config_map_with_broken_yaml() -> None:
    text = """apiVersion: v1
kind: ConfigMap
metadata: {name: kueue-config, namespace: kueue-system}
data:
  config.yaml: "kind: Configuration\\nresources: [unclosed"
"""
    assert problems(text) == ["data[config.yaml]: is not valid YAML"]


# ----------------------------------------------------- warnings and documents


def test_only_declared_with_exclude_prefixes_warns() -> None:
    obj: Configuration = accepted(
        config("resources: {quotaCheck: OnlyDeclared, excludeResourcePrefixes: [example.com/]}")
    )
    assert config_warnings(obj) == [
        "resources.excludeResourcePrefixes is ignored because resources.quotaCheck is OnlyDeclared: "
        "only the resources a ClusterQueue covers are checked"
    ]


@pytest.mark.parametrize(
    "body",
    [
        "resources: {quotaCheck: All, excludeResourcePrefixes: [example.com/]}",
        "resources: {quotaCheck: OnlyDeclared}",
        # with the gate off quotaCheck is ignored, so the prefixes do apply
        "featureGates: {QuotaCheck: false}\n"
        "resources: {quotaCheck: OnlyDeclared, excludeResourcePrefixes: [x/]}",
    ],
)
def test_no_warning_when_the_prefixes_do_apply(body: str) -> None:
    assert config_warnings(accepted(config(body))) == []


def docs(*files: tuple[str, str]) -> list[LoadedDoc]:
    out: list[LoadedDoc] = []
    for path, text in files:
        for i, manifest in enumerate(yaml.safe_load_all(text)):
            out.append(LoadedDoc(path, i, manifest))
    return out


def test_duplicate_objects_across_files() -> None:
    flavor = f"apiVersion: {V1B2}\nkind: ResourceFlavor\nmetadata: {{name: nvidia}}\n"
    lq = f"apiVersion: {V1B2}\nkind: LocalQueue\nmetadata: {{name: lq, namespace: a}}\n"
    lq += "spec: {clusterQueue: q}\n"
    report = check_documents(
        docs(
            ("a.yaml", flavor + "---\n" + lq),
            ("b.yaml", flavor + "---\n" + lq.replace("namespace: a", "namespace: b")),
        )
    )
    assert report.problems == [
        "b.yaml:0: ResourceFlavor nvidia: metadata.name: defined twice, first at a.yaml:0; "
        "each object may appear once"
    ]


def test_duplicate_cluster_scoped_objects_in_different_namespaces() -> None:
    text = cq(ONE_GROUP)
    report = check_documents(
        docs(("a.yaml", text), ("b.yaml", text.replace("{name: q}", "{name: q, namespace: x}")))
    )
    assert report.problems == [
        "b.yaml:0: ClusterQueue q: metadata.name: defined twice, first at a.yaml:0; "
        "each object may appear once"
    ]


def test_two_configurations() -> None:
    report = check_documents(docs(("a.yaml", config("")), ("b.yaml", CONFIGMAP.replace("Nope", "All"))))
    assert report.problems == [
        "b.yaml:0: Configuration kueue-manager-config: kind: a second Configuration, the first is at "
        "a.yaml:0; Kueue runs with exactly one"
    ]


def test_config_warning_carries_the_document() -> None:
    text = config("resources: {quotaCheck: OnlyDeclared, excludeResourcePrefixes: [example.com/]}")
    report = check_documents(docs(("c.yaml", text)))
    assert report.problems == []
    assert report.warnings == [
        "c.yaml:0: resources.excludeResourcePrefixes is ignored because resources.quotaCheck is "
        "OnlyDeclared: only the resources a ClusterQueue covers are checked"
    ]
