"""``python -m tests.cluster.cli_child ARGS``: the ``kueuestream`` command, able to say where it hangs.

On SIGUSR1 it prints every thread's stack and every asyncio task's, so a
test whose command does not stop can show what it was waiting for.
"""

from __future__ import annotations

import asyncio
import faulthandler
import signal
import sys
from types import FrameType

from kueuestream.agents.cli.main import main


def _dump_tasks(signum: int, frame: FrameType | None) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        print("cli_child: no running event loop", file=sys.stderr, flush=True)
        return
    for task in sorted(asyncio.all_tasks(loop), key=lambda t: t.get_name()):
        print(f"cli_child: task {task.get_name()}:", file=sys.stderr)
        task.print_stack(file=sys.stderr)
    sys.stderr.flush()


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _dump_tasks)
    faulthandler.register(signal.SIGUSR1, all_threads=True, chain=True)  # threads first, then the tasks
    sys.exit(main())
