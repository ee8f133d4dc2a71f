"""Reading Kueue manifests from files and folders, remembering where each came from."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

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
    # Problems that stop a file from being read at all, already formatted for the user.
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


def _documents(path: Path, text: str) -> Iterator[Any]:
    if path.suffix == ".json":
        yield orjson.loads(text)
        return
    yield from yaml.safe_load_all(text)


def _expand(manifest: Any) -> Iterator[Any]:
    # `kind: List` (what kubectl get -o yaml prints) carries the objects in items.
    if isinstance(manifest, dict) and manifest.get("kind") == "List":
        items = manifest.get("items")
        if isinstance(items, list):
            yield from items
            return
    yield manifest


def _yaml_problem(err: yaml.YAMLError) -> str:
    """PyYAML's text names "<unicode string>"; say line and column in the file instead."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        mark = err.problem_mark
        detail = f"line {mark.line + 1}, column {mark.column + 1}: {err.problem}"
        if err.context:
            context = err.context
            if err.context_mark is not None:
                context += f" at line {err.context_mark.line + 1}, column {err.context_mark.column + 1}"
            detail += f" ({context})"
        return " ".join(detail.split())
    return " ".join(str(err).split())


def load_file(path: Path) -> Loaded:
    out = Loaded([], [])
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        out.errors.append(f"{path}: cannot read: {err}")
        return out
    # DOC_INDEX is the document's position in the file, empty documents included,
    # so that it points at the right `---` section; a List's items share their
    # document's index.
    index = 0
    try:
        for doc in _documents(path, text):
            if doc is not None:
                for manifest in _expand(doc):
                    out.docs.append(LoadedDoc(str(path), index, manifest))
            index += 1
    except yaml.YAMLError as err:
        out.errors.append(f"{path}:{index}: not valid YAML: {_yaml_problem(err)}")
    except orjson.JSONDecodeError as err:
        out.errors.append(f"{path}:{index}: not valid JSON: {' '.join(str(err).split())}")
    return out


def load_paths(paths: Iterable[str]) -> Loaded:
    files, errors = manifest_files(paths)
    out = Loaded([], errors)
    for path in files:
        loaded = load_file(path)
        out.docs.extend(loaded.docs)
        out.errors.extend(loaded.errors)
    return out
