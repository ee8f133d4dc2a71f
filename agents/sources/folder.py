"""A folder of manifests as a watch stream: ``kueuestream run --source DIR``.

The folder is polled: a file whose mtime or size changed is read again, and the
objects of all files together are compared with what the log says exists.
Folders given as ``exclude`` (the runtime's own log and status folders, when
they sit inside the source) are never read. Each
difference is a watch event (ADDED, MODIFIED, DELETED per object); one poll's
events form one batch. Because the starting point is the log (every watch event
it holds, folded), a restart emits only what changed while it was down.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kueuestream.agents.embedded.memory_log import SyncLog
from kueuestream.agents.log_entries import control_kind
from kueuestream.agents.sources.manifests import load_file, manifest_files
from kueuestream.agents.sources.watch_events import (
    DEFAULT_CLUSTER,
    Identified,
    ObjId,
    as_batch,
    identify,
    listing_order,
    watch_event,
)
from kueuestream.streams import codec
from kueuestream.streams.codec import normalize_manifest
from kueuestream.streams.schemas import ErrorRecord, ErrorSource, WatchEvent, WatchEventType

Stamp = tuple[int, int]  # mtime_ns, size


def known_objects(log: SyncLog, watch_topic: str) -> dict[ObjId, Identified]:
    """What the watch log says exists now: the last ADDED/MODIFIED of each object not DELETED since."""
    known: dict[ObjId, Identified] = {}
    for record in log.read_sync(watch_topic, 0):
        try:
            event = codec.decode(record.value, WatchEvent)
        except codec.DecodeError:
            continue
        if control_kind(event.object):
            continue
        key = (event.kind, event.namespace, event.name)
        if event.type == WatchEventType.DELETED:
            known.pop(key, None)
        elif event.object is not None:
            known[key] = Identified(key, event.apiVersion, event.object)
    return known


@dataclass(slots=True)
class Poll:
    events: list[WatchEvent] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)


class FolderSource:
    def __init__(
        self,
        root: str | os.PathLike[str],
        known: dict[ObjId, Identified],
        cluster: str = DEFAULT_CLUSTER,
        *,
        exclude: Iterable[str | os.PathLike[str]] = (),
    ):
        self.root = Path(root)
        self.cluster = cluster
        self.known = known
        self.exclude = tuple(Path(folder).resolve() for folder in exclude)
        self._stamps: dict[Path, Stamp] = {}
        self._objects: dict[Path, list[tuple[int, Identified]]] = {}

    def poll(self, timestamp: int) -> Poll:
        out = Poll()
        files, problems = manifest_files([str(self.root)])
        if self.exclude:
            files = [f for f in files if not any(f.resolve().is_relative_to(x) for x in self.exclude)]
        for problem in problems:
            out.errors.append(_error(str(self.root), None, problem, ""))
        current: dict[Path, Stamp] = {}
        for path in files:
            try:
                st = path.stat()
            except OSError:
                continue  # removed between the listing and the stat
            current[path] = (st.st_mtime_ns, st.st_size)
        changed = [p for p in sorted(current) if self._stamps.get(p) != current[p]]
        if not changed and set(current) == set(self._stamps):
            return out
        for path in set(self._stamps) - set(current):
            self._objects.pop(path, None)
        for path in changed:
            self._objects[path] = self._read(path, out)
        self._stamps = current
        desired: dict[ObjId, tuple[Path, int, Identified]] = {}
        for path in sorted(self._objects):
            for index, item in self._objects[path]:
                if item.id in desired and path in changed:
                    first = desired[item.id]
                    out.errors.append(
                        _error(
                            str(path),
                            index,
                            f"{_label(item.id)} is defined twice, first in {first[0]}#{first[1]}; "
                            "this definition is used",
                            "",
                        )
                    )
                desired[item.id] = (path, index, item)
        out.events = self._diff({k: v[2] for k, v in desired.items()}, timestamp)
        return out

    def _read(self, path: Path, out: Poll) -> list[tuple[int, Identified]]:
        loaded = load_file(path)
        for problem in loaded.errors:
            out.errors.append(_error(str(path), None, problem, _head(path)))
        items: list[tuple[int, Identified]] = []
        for doc in loaded.docs:
            found = identify(doc.manifest)
            if isinstance(found, str):
                out.errors.append(_error(doc.path, doc.index, found, repr(doc.manifest)))
                continue
            manifest: dict[str, Any] = normalize_manifest(found.manifest)
            items.append((doc.index, Identified(found.id, found.api_version, manifest)))
        return items

    def _diff(self, desired: dict[ObjId, Identified], timestamp: int) -> list[WatchEvent]:
        changed = [
            item
            for key, item in desired.items()
            if key not in self.known or self.known[key].manifest != item.manifest
        ]
        upserts = [
            watch_event(
                item,
                WatchEventType.MODIFIED if item.id in self.known else WatchEventType.ADDED,
                timestamp,
                self.cluster,
            )
            for item in listing_order(changed)
        ]
        gone = listing_order(item for key, item in self.known.items() if key not in desired)
        # Dependents go first: a Workload before its LocalQueue, a LocalQueue before its ClusterQueue.
        deletes = [
            watch_event(item, WatchEventType.DELETED, timestamp, self.cluster) for item in reversed(gone)
        ]
        for key in [k for k in self.known if k not in desired]:
            del self.known[key]
        self.known.update(desired)
        return as_batch(upserts + deletes, timestamp, self.cluster)


def _label(obj: ObjId) -> str:
    kind, namespace, name = obj
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _head(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="backslashreplace")[:4096]
    except OSError:
        return ""


def _error(file: str, document: int | None, message: str, raw: str) -> ErrorRecord:
    return ErrorRecord.from_bad_input(raw, message, ErrorSource(file=file, document=document))
