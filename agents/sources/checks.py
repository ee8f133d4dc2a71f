"""`kueuestream validate`: every problem in a set of manifests, one line each."""

from __future__ import annotations

from collections.abc import Iterable
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


class DocumentChecker:
    """Checks documents as they come, file after file, keeping only what later ones are checked against.

    Lines are ``FILE:DOC_INDEX: Kind namespace/name: field.path: what is wrong``.
    """

    def __init__(self) -> None:
        self.report = Report()
        self.count = 0
        self._seen: dict[tuple[str, str, str], str] = {}
        self._configs: list[tuple[str, str]] = []  # (where, label)

    def check(self, docs: Iterable[LoadedDoc]) -> None:
        report = self.report
        for doc in docs:
            self.count += 1
            where = doc.where
            decoded = decode(doc.manifest)
            for err in decoded.errors:
                report.problems.append(f"{where}: {decoded.label}: {err}")
            if decoded.errors or not decoded.relevant:
                continue
            if isinstance(decoded.obj, Configuration):
                self._configs.append((where, decoded.label))
                report.warnings.extend(f"{where}: {w}" for w in config_warnings(decoded.obj))
                continue
            ident = (decoded.kind, decoded.namespace, decoded.name)
            first = self._seen.setdefault(ident, where)
            if first is not where:
                report.problems.append(
                    f"{where}: {decoded.label}: metadata.name: defined twice, first at {first}; "
                    "each object may appear once"
                )

    def finish(self) -> Report:
        configs = self._configs
        for where, label in configs[1:]:
            self.report.problems.append(
                f"{where}: {label}: kind: a second Configuration, the first is at {configs[0][0]}; "
                "Kueue runs with exactly one"
            )
        return self.report


def check_documents(docs: Iterable[LoadedDoc]) -> Report:
    """Every problem in ``docs``; see :class:`DocumentChecker`."""
    checker = DocumentChecker()
    checker.check(docs)
    return checker.finish()
