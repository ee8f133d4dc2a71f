"""`kueuestream validate`: every problem in a set of manifests, one line each."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kueuestream.admission.api.config import Configuration
from kueuestream.admission.decode import decode
from kueuestream.admission.validation import config_warnings
from kueuestream.agents.sources.manifests import LoadedDoc


@dataclass(slots=True)
class Report:
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_documents(docs: Sequence[LoadedDoc]) -> Report:
    """Lines are ``FILE:DOC_INDEX: Kind namespace/name: field.path: what is wrong``."""
    report = Report()
    seen: dict[tuple[str, str, str], str] = {}
    configs: list[tuple[str, str]] = []  # (where, label)
    for doc in docs:
        decoded = decode(doc.manifest)
        for err in decoded.errors:
            report.problems.append(f"{doc.where}: {decoded.label}: {err}")
        if decoded.errors or not decoded.relevant:
            continue
        if isinstance(decoded.obj, Configuration):
            configs.append((doc.where, decoded.label))
            report.warnings.extend(f"{doc.where}: {w}" for w in config_warnings(decoded.obj))
            continue
        ident = (decoded.kind, decoded.namespace, decoded.name)
        if ident in seen:
            report.problems.append(
                f"{doc.where}: {decoded.label}: metadata.name: defined twice, first at {seen[ident]}; "
                "each object may appear once"
            )
        else:
            seen[ident] = doc.where
    if len(configs) > 1:
        for where, label in configs[1:]:
            report.problems.append(
                f"{where}: {label}: kind: a second Configuration, the first is at {configs[0][0]}; "
                "Kueue runs with exactly one"
            )
    return report
