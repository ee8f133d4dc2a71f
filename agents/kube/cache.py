"""The latest version seen of each object the connector writes to, from watch events and its own writes.

Both the watch and the answers to our own writes bring versions of an object,
and a watch event can arrive after the answer to a later write. Where both
resourceVersions are numbers (as every API server backed by etcd makes them),
an older one never replaces a newer one; otherwise the last one seen wins.
Either way a stale entry only costs a write refused with 409 Conflict, never a
lost change: every write carries the resourceVersion it was based on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kueuestream.streams.schemas import WatchEvent, WatchEventType

Key = tuple[str, str, str]  # kind, namespace, name
Manifest = dict[str, Any]


def resource_version(manifest: Manifest) -> str:
    meta = manifest.get("metadata")
    value = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return value if isinstance(value, str) else ""


def _older(candidate: str, current: str) -> bool:
    return candidate.isdigit() and current.isdigit() and int(candidate) < int(current)


def _not_newer(candidate: str, reference: str) -> bool:
    return candidate.isdigit() and reference.isdigit() and int(candidate) <= int(reference)


class ObjectCache:
    def __init__(self, kinds: frozenset[str]) -> None:
        self.kinds = kinds
        self._objects: dict[Key, Manifest] = {}
        # The keys of each kind, so that listing the few flavors never walks thousands of Jobs.
        self._by_kind: dict[str, set[Key]] = {}
        # Deleted objects' last versions, so that a late event cannot bring one back.
        self._deleted: dict[Key, str] = {}

    def observe(self, event: WatchEvent) -> Key | None:
        """Take in a watch event; the key of the object when it is of a cached kind."""
        if event.kind not in self.kinds:
            return None
        key = (event.kind, event.namespace, event.name)
        if event.type is WatchEventType.DELETED:
            gone = self._pop(key)
            self._deleted[key] = event.resourceVersion or (resource_version(gone) if gone else "")
            return key
        if event.object is not None:
            self.put(key, event.object)
        return key

    def put(self, key: Key, manifest: Manifest) -> None:
        version = resource_version(manifest)
        current = self._objects.get(key)
        if current is not None and _older(version, resource_version(current)):
            return
        deleted = self._deleted.get(key)
        if current is None and deleted is not None and _not_newer(version, deleted):
            return
        self._deleted.pop(key, None)
        self._objects[key] = manifest
        self._by_kind.setdefault(key[0], set()).add(key)

    def forget(self, key: Key) -> None:
        """The object is known to be gone (a call answered 404)."""
        gone = self._pop(key)
        self._deleted[key] = resource_version(gone) if gone else ""

    def _pop(self, key: Key) -> Manifest | None:
        self._by_kind.get(key[0], set()).discard(key)
        return self._objects.pop(key, None)

    def get(self, key: Key) -> Manifest | None:
        return self._objects.get(key)

    def keys(self, kind: str) -> Iterator[Key]:
        return iter(sorted(self._by_kind.get(kind, ())))
