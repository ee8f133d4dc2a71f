"""Seed 003's Story 1 as config/examples/quota-check/ holds it, and the variants the tests make of it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from kueuestream.agents.sources.manifests import load_paths
from tests.helpers import configuration_manifest

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples" / "quota-check"
ONLY_DECLARED = EXAMPLES / "only-declared"
ALL = EXAMPLES / "all"
WORKLOAD = "gpu-training"
WARNING = (
    "resources.excludeResourcePrefixes is ignored because resources.quotaCheck is OnlyDeclared: "
    "only the resources a ClusterQueue covers are checked"
)


def manifests(folder: Path) -> list[Any]:
    loaded = load_paths([str(folder)])
    assert loaded.errors == []
    return [doc.manifest for doc in loaded.docs]


def with_config(folder: Path, resources: dict[str, Any], gates: dict[str, bool] | None = None) -> list[Any]:
    """The example's objects under another Configuration."""
    docs = [d for d in manifests(folder) if d.get("kind") != "Configuration"]
    return [configuration_manifest(resources=resources, gates=gates), *docs]


def only_declared_with_prefixes(tmp_path: Path) -> Path:
    """A copy of the OnlyDeclared example whose Configuration also sets excludeResourcePrefixes."""
    folder = tmp_path / "only-declared"
    shutil.copytree(ONLY_DECLARED, folder)
    cfg = folder / "00-configuration.yaml"
    doc = yaml.safe_load(cfg.read_text())
    doc["resources"]["excludeResourcePrefixes"] = ["example.com/"]
    cfg.write_text(yaml.safe_dump(doc))
    return folder
