"""PNG plots of a simulation: usage over time and time-to-admission distributions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display on servers and in CI

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from kueuestream.agents.simulator.summary import QueueState


def _class_usage(queues: Iterable[QueueState]) -> tuple[list[float], list[float]]:
    """Percent of the class's nominal quota in use, as a step function of time (seconds)."""
    queues = list(queues)
    nominal = sum(q.nominal_mcpu for q in queues) or 1
    changes: list[tuple[int, int]] = []
    for q in queues:
        previous = 0
        for time_ms, usage in q.timeline:
            changes.append((time_ms, usage - previous))
            previous = usage
    changes.sort()
    xs: list[float] = [0.0]
    ys: list[float] = [0.0]
    total = 0
    for time_ms, delta in changes:
        total += delta
        xs.append(time_ms / 1000)
        ys.append(total * 100 / nominal)
    return xs, ys


def usage_plot(queues: Mapping[str, QueueState], path: Path, title: str) -> Path:
    by_class: dict[str, list[QueueState]] = {}
    for name in sorted(queues):
        by_class.setdefault(queues[name].class_name, []).append(queues[name])
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for cls, group in sorted(by_class.items()):
        xs, ys = _class_usage(group)
        ax.step(xs, ys, where="post", label=f"{cls} ({len(group)} ClusterQueues)")
    return _save(fig, ax, path, title, "virtual time (s)", "cpu in use (% of nominal quota)")


def admission_plot(times: Mapping[str, Iterable[int]], path: Path, title: str) -> Path:
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for cls, values in sorted(times.items()):
        seconds = [v / 1000 for v in values]
        if seconds:
            ax.hist(seconds, bins=50, alpha=0.55, label=f"{cls} ({len(seconds)})")
    return _save(fig, ax, path, title, "time to admission (virtual s)", "workloads")


def _save(fig: Figure, ax: Axes, path: Path, title: str, xlabel: str, ylabel: str) -> Path:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
