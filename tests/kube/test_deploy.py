"""config/deploy/ against a real API server: it applies, and the connector runs with exactly its RBAC.

kustomize and the server-side apply are kubectl's; the identity is the
deploy's ServiceAccount itself, with a token from the TokenRequest API.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueuestream.agents.cli.main import build_parser
from kueuestream.agents.kube.resources import KINDS_WATCHED
from tests.cluster.kube_rig import Cli, cluster, eventually, start_cli, unique
from tests.helpers import queued_job

pytestmark = pytest.mark.kube

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "config" / "deploy"
NAMESPACE = "kueuestream-system"
ACCOUNT = "kueuestream-connector"


def kubectl(kube_config: str, *args: str, stdin: str | None = None) -> str:
    binary = shutil.which("kubectl")
    assert binary is not None, "kubectl is needed to build and apply config/deploy (kustomize)"
    done = subprocess.run(
        [binary, "--kubeconfig", kube_config, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}:\n{done.stderr}"
    return done.stdout


def built(kube_config: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(kubectl(kube_config, "kustomize", str(DEPLOY))) if d]


def cluster_role(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [role] = [d for d in docs if d["kind"] == "ClusterRole"]
    return role


def allows(role: dict[str, Any], group: str, resource: str, verb: str) -> bool:
    return any(
        group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]
        for rule in role["rules"]
    )


def test_the_cluster_role_lets_the_watcher_list_and_watch_every_kind_it_watches(kube_config: str) -> None:
    role = cluster_role(built(kube_config))
    for kind in KINDS_WATCHED:
        for verb in ("list", "watch"):
            assert allows(role, kind.group, kind.plural, verb), f"{verb} {kind.plural}.{kind.group}"
    for verb in ("create", "delete", "update"):
        assert not allows(role, "batch", "jobs", verb), f"the connector never needs to {verb} Jobs"


def test_the_deploy_base_applies_for_real_and_as_a_server_side_dry_run(kube_config: str) -> None:
    docs = built(kube_config)
    kinds = sorted({d["kind"] for d in docs})
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "Namespace",
        "Role",
        "RoleBinding",
        "ServiceAccount",
    ]
    out = kubectl(kube_config, "apply", "--server-side", "-k", str(DEPLOY))
    assert "deployment.apps/kueuestream-watch serverside-applied" in out
    dry = kubectl(kube_config, "apply", "--server-side", "--dry-run=server", "-k", str(DEPLOY))
    assert dry.count("(server dry run)") == len(docs)
    for name in ("kueuestream-watch", "kueuestream-apply", "kueuestream-worker"):
        found = yaml.safe_load(kubectl(kube_config, "get", "deployment", name, "-n", NAMESPACE, "-o", "yaml"))
        container = found["spec"]["template"]["spec"]["containers"][0]
        args = container["args"]
        assert args[:2] == ["kueuestream", name.removeprefix("kueuestream-")]
        port = args[args.index("--metrics-port") + 1]
        assert container["ports"] == [{"name": "metrics", "containerPort": int(port), "protocol": "TCP"}]
        probe = container["livenessProbe"]["httpGet"]
        assert (probe["path"], probe["port"]) == ("/healthz", "metrics")
        # The CLI accepts the command line once Kubernetes has expanded the variables.
        expanded = [a.replace("$(KUEUESTREAM_BROKER)", "kafka://kafka:9092") for a in args[1:]]
        parsed = build_parser().parse_args([a.replace("$(KUEUESTREAM_POD_NAME)", "pod-0") for a in expanded])
        assert parsed.command == name.removeprefix("kueuestream-")
    # Each worker joins the group as a static member under its pod's name.
    worker = yaml.safe_load(
        kubectl(kube_config, "get", "deployment", "kueuestream-worker", "-n", NAMESPACE, "-o", "yaml")
    )
    container = worker["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[args.index("--instance-id") + 1] == "$(KUEUESTREAM_POD_NAME)"
    env = {e["name"]: e for e in container["env"]}
    assert env["KUEUESTREAM_POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


def token_kubeconfig(kube_config: str, account: str, path: Path) -> str:
    """A kubeconfig of the same server whose user is ``account``'s ServiceAccount token."""
    token = kubectl(kube_config, "create", "token", account, "-n", NAMESPACE, "--duration", "1h").strip()
    admin = yaml.safe_load(Path(kube_config).read_text())
    current = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])
    server = next(c for c in admin["clusters"] if c["name"] == current["context"]["cluster"])
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "deployed", "cluster": server["cluster"]}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": "deployed", "user": account}}],
        "current-context": account,
    }
    path.write_text(yaml.safe_dump(config))
    return str(path)


async def run_and_start_a_job(kube_config: str, account_config: str, log_dir: Path) -> tuple[Cli, bool]:
    async with cluster(kube_config) as rig:
        q = await rig.quota("rbac", "2")
        cli = await start_cli(
            "run",
            "--kubeconfig",
            account_config,
            "--log-dir",
            str(log_dir),
            "--leader-elect",
            "--lease",
            f"{NAMESPACE}/{unique('rbac')}",
        )
        try:
            await eventually(lambda: _said(cli, "running against"), "the connector running", 120)
            job = await rig.job(queued_job(q.namespace, "j", q.local_queue))

            async def settled() -> bool:
                started = (await rig.read_job(job))["spec"].get("suspend") is False
                return started or any("forbidden" in line for line in cli.lines)

            await eventually(settled, "the Job started, or a refusal")
            started = (await rig.read_job(job))["spec"].get("suspend") is False
        finally:
            await cli.stop()
        return cli, started


async def _said(cli: Cli, words: str) -> bool:
    return cli.said(words)


async def test_the_connector_runs_with_exactly_the_deployed_permissions(
    kube_config: str, tmp_path: Path
) -> None:
    kubectl(kube_config, "apply", "--server-side", "-k", str(DEPLOY))
    account_config = token_kubeconfig(kube_config, ACCOUNT, tmp_path / "account.kubeconfig")
    cli, started = await run_and_start_a_job(kube_config, account_config, tmp_path / "log")
    assert started, "\n".join(cli.lines)
    assert not any("forbidden" in line for line in cli.lines), "\n".join(cli.lines)
    assert cli.process.returncode == 0, "\n".join(cli.lines)


async def test_a_call_outside_the_role_fails_naming_the_missing_permission(
    kube_config: str, tmp_path: Path
) -> None:
    """The deployed roles less one verb (patch on Jobs): the refusal names user, verb and resource."""
    kubectl(kube_config, "apply", "--server-side", "-k", str(DEPLOY))
    account = unique("narrow")
    role = cluster_role(built(kube_config))
    for rule in role["rules"]:
        if rule["resources"] == ["jobs"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != "patch"]
    role["metadata"] = {"name": account}
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    docs = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": NAMESPACE}},
        role,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": account},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": account},
            "subjects": subject,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": account, "namespace": NAMESPACE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ACCOUNT},
            "subjects": subject,
        },
    ]
    kubectl(kube_config, "apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    account_config = token_kubeconfig(kube_config, account, tmp_path / "narrow.kubeconfig")
    cli, started = await run_and_start_a_job(kube_config, account_config, tmp_path / "log")
    assert not started
    [refusal] = [line for line in cli.lines if "forbidden" in line]
    assert f'User "system:serviceaccount:{NAMESPACE}:{account}" cannot patch resource "jobs"' in refusal
    assert 'in API group "batch"' in refusal
