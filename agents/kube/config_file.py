"""Kueue's Configuration read from a file, as Kueue reads it: once, when the process starts.

The file becomes one watch event, sent only when its content differs from
what the log last recorded for it: the event's resourceVersion is a digest of
the content, so restarting with the same file sends nothing again.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from kueuestream.agents.kube.watch_ledger import WatchLedger
from kueuestream.agents.sources.checks import check_documents
from kueuestream.agents.sources.manifests import load_file
from kueuestream.agents.sources.watch_events import identify
from kueuestream.streams import codec
from kueuestream.streams.codec import normalize_manifest
from kueuestream.streams.schemas import WatchEvent, WatchEventType

DIGEST_PREFIX = "sha256:"
KIND = "Configuration"


class ConfigFileError(ValueError):
    """The file is not one valid Configuration; the message says where and what."""


def config_file_event(path: Path, ledger: WatchLedger, timestamp: int) -> WatchEvent | None:
    """The watch event for the Configuration in ``path``, or None if the log already has it."""
    loaded = load_file(path)
    if loaded.errors:
        raise ConfigFileError("; ".join(loaded.errors))
    configs = [d for d in loaded.docs if isinstance(d.manifest, dict) and d.manifest.get("kind") == KIND]
    if len(loaded.docs) != 1 or len(configs) != 1:
        raise ConfigFileError(
            f"{path}: expected exactly one document of kind Configuration "
            f"(config.kueue.x-k8s.io/v1beta1 or v1beta2), found {len(loaded.docs)} document(s), "
            f"{len(configs)} of them Configuration"
        )
    report = check_documents(loaded.docs)
    if report.problems:
        raise ConfigFileError("; ".join(report.problems))
    found = identify(configs[0].manifest)
    if isinstance(found, str):
        raise ConfigFileError(f"{path}: {found}")
    manifest = normalize_manifest(found.manifest)
    digest = DIGEST_PREFIX + hashlib.sha256(codec.encode_json(manifest)).hexdigest()[:32]
    event = WatchEvent(
        cluster=ledger.cluster,
        kind=KIND,
        apiVersion=found.api_version,
        namespace=found.id[1],
        name=found.id[2],
        type=WatchEventType.MODIFIED if (found.id in ledger.objects) else WatchEventType.ADDED,
        resourceVersion=digest,
        object=manifest,
        timestamp=timestamp,
    )
    return event if ledger.is_news(event) else None
