"""An admission partition applies each record once, and what it keeps to know that is bounded.

Records reach a partition in log order; a runtime that crashed or rebuilt
writes some again (copies, with the origin of the first), and a repaired
record may come after later ones. Within the horizon every origin is told
apart exactly; beyond it, an origin counts as applied, so the sets a snapshot
carries stop growing with history.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kueuestream.agents.seen_origins import SeenOrigins

HORIZON = 50


@st.composite
def arrivals(draw: st.DrawFn) -> list[tuple[int, int]]:
    """Origins in input order (a few records per input), some moved later by less than the
    horizon (repairs), plus copies of earlier ones arriving within the horizon."""
    inputs = draw(st.integers(min_value=1, max_value=400))
    origins = [(o, i) for o in range(inputs) for i in range(draw(st.integers(0, 3)))]
    order: list[tuple[int, int]] = list(origins)
    for _ in range(draw(st.integers(0, 20))):
        if not order:
            break
        at = draw(st.integers(0, len(order) - 1))
        moved = order.pop(at)
        order.insert(min(len(order), at + draw(st.integers(0, 30))), moved)
    for _ in range(draw(st.integers(0, 40))):
        if not order:
            break
        at = draw(st.integers(0, len(order) - 1))
        order.insert(min(len(order), at + draw(st.integers(1, 30))), order[at])
    return order


def newest_before(order: list[tuple[int, int]], position: int) -> int:
    return max((o for o, _ in order[:position]), default=-1)


@settings(max_examples=300, deadline=None)
@given(arrivals())
def test_within_the_horizon_each_origin_is_applied_exactly_once(order: list[tuple[int, int]]) -> None:
    seen = SeenOrigins(horizon=HORIZON)
    applied: set[tuple[int, int]] = set()
    for position, (offset, index) in enumerate(order):
        first = (offset, index) not in applied
        if offset <= newest_before(order, position) - HORIZON:
            continue  # generated within the horizon; an input this far back is not expected
        assert seen.first_time(offset, index) is first, f"origin {(offset, index)} at {position}"
        applied.add((offset, index))


def test_an_origin_beyond_the_horizon_counts_as_applied() -> None:
    seen = SeenOrigins(horizon=HORIZON)
    for offset in range(0, 200, 2):
        assert seen.first_time(offset, 0)
    # The newest input is 198: inputs after 148 are within the horizon.
    assert not seen.first_time(190, 0), "a copy within the horizon"
    assert seen.first_time(190, 1), "another record of a seen input"
    assert seen.first_time(151, 0), "a repaired record, later than newer ones"
    assert not seen.first_time(151, 0)
    assert not seen.first_time(148, 1), "never seen, but beyond the horizon"
    assert not seen.first_time(0, 3)


def test_what_is_kept_stays_bounded_as_history_grows() -> None:
    seen = SeenOrigins(horizon=HORIZON)
    sizes = []
    for offset in range(20 * HORIZON):
        for index in range(3):
            assert seen.first_time(offset, index)
        sizes.append(len(seen.keys))
    # At most the horizon and the quarter between two prunings, three records per input.
    assert max(sizes) <= 3 * (HORIZON + HORIZON // 4)
    assert sizes[-1] >= 3 * (HORIZON - 1)
