"""Partial admission: the largest pod counts, down to each pod set's minCount, that can go in.

Kueue's ``PodSetReducer`` (pkg/scheduler/flavorassigner/podset_reducer.go)
walks every pod set down from ``count`` towards ``minCount`` together: step
``i`` of ``total`` (the sum of every pod set's ``count - minCount``) takes
``delta * i // total`` pods off each, and a binary search finds the first
step whose counts fit. Steps are tried in the order Go's ``sort.Search``
tries them, so the counts tried, and the answer, are Kueue's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

R = TypeVar("R")


def counts_at(full: Sequence[int], deltas: Sequence[int], step: int, total: int) -> list[int]:
    """Each pod set's count at ``step`` of ``total`` (Kueue's ``fillPodSetSizesForSearchIndex``)."""
    return [count - delta * step // total for count, delta in zip(full, deltas, strict=True)]


def search(
    full: Sequence[int], minimums: Sequence[int | None], fits: Callable[[list[int]], R | None]
) -> R | None:
    """The result of ``fits`` for the largest counts it accepts, or None.

    ``fits`` answers None for counts that do not fit. As in Kueue, the search
    assumes fewer pods never fit worse, and the full counts are step 0.
    """
    deltas = [
        count - (count if minimum is None else minimum) for count, minimum in zip(full, minimums, strict=True)
    ]
    total = sum(deltas)
    if total == 0:
        return None
    last_good_step = 0
    last_good: R | None = None
    # Go's sort.Search over steps 0..total: the first step whose counts fit.
    low, high = 0, total + 1
    while low < high:
        step = (low + high) // 2
        result = fits(counts_at(full, deltas, step, total))
        if result is None:
            low = step + 1
        else:
            last_good_step, last_good = step, result
            high = step
    return last_good if low == last_good_step else None
