"""Fair sharing (filled in by the fair-sharing work)."""

from __future__ import annotations

from typing import Any


class FairSharing:
    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def order(self, entries: list[Any]) -> list[Any]:
        return entries

    def targets(self, pre: Any, cq: Any, nodes: Any, admitted: Any) -> list[Any]:
        return []
