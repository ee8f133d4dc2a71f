"""Commands that build a large heap once and exit run without Python's cyclic garbage collector.

``admit`` reads every manifest, admits, prints and exits. Reference counting
frees its objects; what the cyclic collector adds is a walk over the whole
growing heap every time enough objects were allocated, which took about 40%
of an ``admit`` of 15,000 Workloads. Its garbage is bounded by its input and
gone when the process ends, so the collector is paused while it runs and put
back as it was afterwards (the command may run inside a longer-lived process).
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def without_cyclic_gc(command: Callable[P, R]) -> Callable[P, R]:
    """``command`` with the cyclic collector paused while it runs, then restored as it was."""

    @functools.wraps(command)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return command(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return paused
