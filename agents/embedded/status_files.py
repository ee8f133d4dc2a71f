"""The embedded applier: one Kueue YAML file per Workload in a status directory.

``<dir>/<namespace>/<name>.yaml`` holds the Workload's identity and its whole
``status`` stanza as Kueue writes it (a name longer than 250 bytes is cut to
200, followed by ``-`` and 16 hex digits of its SHA-256). Files are replaced atomically (write,
then rename), and only when their content changes, so applying a decision
again (after a restart) is harmless and cheap.

Whatever the names in a decision, nothing is written or removed outside the
directory: a namespace or name that is not one plain path component (empty,
``.``, ``..``, a slash, a NUL byte), or a path that leads elsewhere once
symbolic links are resolved, is refused with an error outcome, and so is
a file the file system will not write (a name too long for it, a full
disk); nothing here raises.
"""

from __future__ import annotations

import hashlib
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


CLUSTER_FOLDER = "_cluster"  # for cluster-scoped objects; "_" keeps it apart from any namespace
# File names are at most 255 bytes on common file systems; Workload names may have 253 characters.
MAX_STEM_BYTES = 250
CUT_STEM_BYTES = 200


class UnsafeStatusPath(ValueError):
    """A namespace or name that would put a status file outside the status directory."""


def _component_problem(what: str, value: str) -> str | None:
    if value in ("", ".", "..") or "\0" in value or "/" in value or (os.altsep and os.altsep in value):
        return f"{what} {value!r} is not a plain file name"
    return None


def _file_name(name: str) -> str:
    """``<name>.yaml``; a name too long for a file name is cut, with a hash that tells cut names apart."""
    if len(name.encode()) <= MAX_STEM_BYTES:
        return f"{name}.yaml"
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return f"{name.encode()[:CUT_STEM_BYTES].decode(errors='ignore')}-{digest}.yaml"


class StatusDirectory:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._root = self.directory.resolve()
        # What each file holds, so an unchanged status is not written again.
        self._written: dict[Path, bytes | None] = {}

    def path_of(self, namespace: str, name: str) -> Path:
        """The status file of a Workload; raises :class:`UnsafeStatusPath` for a name that escapes."""
        folder = namespace or CLUSTER_FOLDER
        problem = _component_problem("namespace", folder) or _component_problem("name", name)
        if problem is not None:
            raise UnsafeStatusPath(f"{problem}; no status file is written outside {self.directory}")
        return self.directory / folder / _file_name(name)

    def _confined(self, path: Path) -> None:
        """Refuse a folder that a symbolic link leads out of the status directory."""
        if path.parent.resolve() != self._root / path.parent.name:
            raise UnsafeStatusPath(
                f"{path.parent} leads outside {self.directory}; no status file is written there"
            )

    def apply(self, decision: DecisionRecord) -> tuple[ApplyOutcome, str]:
        ref = decision.ref
        if ref.kind != "Workload":
            return ApplyOutcome.APPLIED, f"no status file for a {ref.kind}"
        if decision.action == Action.REJECTED:
            return ApplyOutcome.ERROR, decision.message
        # A name is the object's problem and is recorded; a file system that
        # refuses (permissions, a full disk) is the operator's and stops the run.
        try:
            return self._apply(decision, self.path_of(ref.namespace, ref.name))
        except UnsafeStatusPath as exc:
            ident = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
            return ApplyOutcome.ERROR, f"Workload {ident!r}: status not written: {exc}"

    def _apply(self, decision: DecisionRecord, path: Path) -> tuple[ApplyOutcome, str]:
        ref = decision.ref
        if decision.action == Action.DELETED:
            self._write(path, None)
            return ApplyOutcome.APPLIED, f"removed {path}"
        text = yaml.safe_dump(
            status_document(ref.namespace, ref.name, decision.status), sort_keys=False, width=1_000_000
        )
        self._write(path, text.encode())
        return ApplyOutcome.APPLIED, str(path)

    def _write(self, path: Path, data: bytes | None) -> None:
        if path not in self._written:
            if path.parent.exists():
                self._confined(path)
            # A symbolic link is never followed: it is taken for something else there.
            self._written[path] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        if self._written[path] == data:
            return
        if data is None:
            if path.parent.exists():
                self._confined(path)
                path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(exist_ok=True)
            self._confined(path)
            tmp = path.with_name(f".{hashlib.sha256(path.name.encode()).hexdigest()[:16]}.tmp")
            tmp.unlink(missing_ok=True)  # never write through a link left there
            tmp.write_bytes(data)
            os.replace(tmp, path)
        self._written[path] = data
