"""The embedded applier: one Kueue YAML file per Workload in a status directory.

``<dir>/<namespace>/<name>.yaml`` holds the Workload's identity and its whole
``status`` stanza as Kueue writes it. Files are replaced atomically (write,
then rename), and only when their content changes, so applying a decision
again (after a restart) is harmless and cheap.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from kueuestream.admission.events import Action
from kueuestream.streams.schemas import ApplyOutcome, DecisionRecord

STATUS_API_VERSION = "kueue.x-k8s.io/v1beta2"


def status_document(namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": STATUS_API_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "status": status,
    }


class StatusDirectory:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        # What each file holds, so an unchanged status is not written again.
        self._written: dict[Path, bytes | None] = {}

    def path_of(self, namespace: str, name: str) -> Path:
        return self.directory / (namespace or "_cluster") / f"{name}.yaml"

    def apply(self, decision: DecisionRecord) -> tuple[ApplyOutcome, str]:
        ref = decision.ref
        if ref.kind != "Workload":
            return ApplyOutcome.APPLIED, f"no status file for a {ref.kind}"
        path = self.path_of(ref.namespace, ref.name)
        if decision.action == Action.DELETED:
            self._write(path, None)
            return ApplyOutcome.APPLIED, f"removed {path}"
        if decision.action == Action.REJECTED:
            return ApplyOutcome.ERROR, decision.message
        text = yaml.safe_dump(
            status_document(ref.namespace, ref.name, decision.status), sort_keys=False, width=1_000_000
        )
        self._write(path, text.encode())
        return ApplyOutcome.APPLIED, str(path)

    def _write(self, path: Path, data: bytes | None) -> None:
        if path not in self._written:
            self._written[path] = path.read_bytes() if path.exists() else None
        if self._written[path] == data:
            return
        if data is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        self._written[path] = data
