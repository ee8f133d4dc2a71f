"""Reading Kueue manifests from files and folders, remembering where each came from."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kueuestream.agents.sources.parallel_yaml import load_documents_parallel
from kueuestream.agents.sources.strict_json import JsonProblem, load_json

SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True, slots=True)
class LoadedDoc:
    path: str
    index: int  # position of the document in its file, from 0
    manifest: Any

    @property
    def where(self) -> str:
        return f"{self.path}:{self.index}"


@dataclass(slots=True)
class Loaded:
    docs: list[LoadedDoc]
    # Problems that keep a file or a document of it out, already formatted for the user.
    errors: list[str]


def manifest_files(paths: Iterable[str]) -> tuple[list[Path], list[str]]:
    files: list[Path] = []
    errors: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES))
        elif path.is_file():
            files.append(path)
        else:
            errors.append(f"{raw}: no such file or directory")
    return files, errors


@dataclass(frozen=True, slots=True)
class _Document:
    value: Any
    problem: str | None = None


def _documents(path: Path, text: str) -> Iterator[_Document]:
    if path.suffix == ".json":
        try:
            yield _Document(load_json(text))
        except JsonProblem as err:
            yield _Document(None, f"not valid JSON: {err}" if err.syntax else str(err))
        return
    for document in load_documents_parallel(text):
        problem = document.problem
        if problem is None:
            yield _Document(document.value)
        elif problem.syntax:
            yield _Document(None, f"not valid YAML: {problem.message}")
        else:
            yield _Document(None, f"{problem.label}: {problem.message}" if problem.label else problem.message)


def _expand(manifest: Any) -> Iterator[Any]:
    # `kind: List` (what kubectl get -o yaml prints) carries the objects in items.
    if isinstance(manifest, dict) and manifest.get("kind") == "List":
        items = manifest.get("items")
        if isinstance(items, list):
            yield from items
            return
    yield manifest


def load_file(path: Path) -> Loaded:
    """The objects of one file, and the problems that keep any of its documents out.

    A document that breaks a rule (a duplicate key, an alias bomb, ...) is
    reported and the next one is read; after a syntax error nothing more of
    the file can be.
    """
    out = Loaded([], [])
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        out.errors.append(f"{path}: cannot read: {err}")
        return out
    where = str(path)
    # DOC_INDEX is the document's position in the file, empty documents included,
    # so that it points at the right `---` section; a List's items share their
    # document's index.
    for index, document in enumerate(_documents(path, text)):
        if document.problem is not None:
            out.errors.append(f"{where}:{index}: {document.problem}")
        elif document.value is not None:
            out.docs.extend(LoadedDoc(where, index, manifest) for manifest in _expand(document.value))
    return out


def load_paths(paths: Iterable[str]) -> Loaded:
    files, errors = manifest_files(paths)
    out = Loaded([], errors)
    for path in files:
        loaded = load_file(path)
        out.docs.extend(loaded.docs)
        out.errors.extend(loaded.errors)
    return out
