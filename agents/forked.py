"""Work split over the available cores: each part but the first in a forked child.

A child computes its part and sends the result back through a pipe, pickled;
the parent computes the first part meanwhile, then collects the others in
order. A part whose child could not be started, failed or sent something
unreadable is computed again in the parent, so the results are always what
computing every part in the parent gives. Forking is only done where it is
safe: on a system with ``fork``, from a process with no other thread.
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

P = TypeVar("P")
R = TypeVar("R")

MAX_PARTS = 4


def cores() -> int:
    """How many parts are worth making: the cores this process may run on, at most :data:`MAX_PARTS`."""
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        available = os.cpu_count() or 1
    return min(available, MAX_PARTS)


def can_fork() -> bool:
    return hasattr(os, "fork") and threading.active_count() == 1


def _in_child(compute: Callable[[P], R], part: P) -> Callable[[], R]:
    """Start computing ``part`` in a child; the function returned gives its result."""
    try:
        r, w = os.pipe()
    except OSError:
        return lambda: compute(part)
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return lambda: compute(part)
    if pid == 0:  # the child: never returns to the caller's code
        code = 1
        try:
            os.close(r)
            payload = pickle.dumps(compute(part), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(w, "wb") as pipe:
                pipe.write(payload)
            code = 0
        finally:
            os._exit(code)
    os.close(w)

    def result() -> R:
        with os.fdopen(r, "rb") as pipe:
            payload = pipe.read()
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) == 0:
            try:
                found: R = pickle.loads(payload)
                return found
            except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError):
                pass
        return compute(part)

    return result


def map_parts(compute: Callable[[P], R], parts: Sequence[P]) -> list[R]:
    """``[compute(p) for p in parts]``, the parts after the first in forked children when that is safe.

    ``compute`` must be a pure function of its part whose result pickles.
    """
    if len(parts) < 2 or not can_fork():
        return [compute(p) for p in parts]
    others = [_in_child(compute, p) for p in parts[1:]]
    first = compute(parts[0])
    return [first, *(other() for other in others)]
