"""What ``kueuestream simulate`` does: run a scenario, write Kueue's summary and plots, check ranges."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import yaml

from kueuestream.agents.kafka_commands import EXIT_FAILED, EXIT_INVALID
from kueuestream.agents.simulator.generator import GeneratorError
from kueuestream.agents.simulator.pipeline import EmbeddedSimPipeline
from kueuestream.agents.simulator.plots import admission_plot, usage_plot
from kueuestream.agents.simulator.scenario_run import ProgressBar, SimResult, run_scenario, scenario_from
from kueuestream.agents.simulator.summary import RangeSpec, check, class_admission_times
from kueuestream.streams.log import LogError


def _load_config(path: str) -> dict[str, Any]:
    from kueuestream.admission.decode import decode

    docs = [d for d in yaml.safe_load_all(Path(path).read_text(encoding="utf-8")) if d]
    for doc in docs:
        decoded = decode(doc)
        if decoded.kind == "Configuration":
            if decoded.errors:
                problems = "; ".join(str(e) for e in decoded.errors)
                raise GeneratorError(f"{path}: invalid Configuration: {problems}")
            return dict(doc)
    raise GeneratorError(f"{path}: no Kueue Configuration (config.kueue.x-k8s.io) in this file")


def _write_outputs(result: SimResult, out: Path, label: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.yaml").write_text(result.summary.to_yaml(), encoding="utf-8")
    stats = {
        "wallMs": result.wall_ms,
        "virtualMs": result.virtual_ms,
        "events": result.events,
        "decisions": result.decisions,
        "maxrss": result.maxrss_kib,
        "usagePercent": {
            cls: round(s.usage_percent, 2) for cls, s in result.summary.cluster_queue_classes.items()
        },
    }
    (out / "stats.yaml").write_text(yaml.safe_dump(stats, sort_keys=True), encoding="utf-8")
    title = f" ({label})" if label else ""
    return [
        usage_plot(result.recorder.queues, out / "usage.png", f"ClusterQueue usage{title}"),
        admission_plot(
            class_admission_times(result.recorder), out / "time-to-admission.png", f"Time to admission{title}"
        ),
    ]


def _print_summary(results: Sequence[SimResult], stream: TextIO) -> None:
    labels = [r.label or "run" for r in results]
    width = max(24, *(len(label) + 2 for label in labels))
    print(f"{'':<44}" + "".join(f"{label:>{width}}" for label in labels), file=stream)
    first = results[0].summary
    for cls in first.cluster_queue_classes:
        row = f"ClusterQueue class {cls}: usage"
        values = [
            f"{r.summary.cluster_queue_classes[cls].usage_percent:.1f}%"
            if cls in r.summary.cluster_queue_classes
            else "-"
            for r in results
        ]
        print(f"{row:<44}" + "".join(f"{v:>{width}}" for v in values), file=stream)
    for cls in first.workload_classes:
        for field, name in (
            ("average_time_to_admission_ms", "avg time to admission"),
            ("average_time_to_finish_ms", "avg time to finish"),
            ("total_evictions", "evictions"),
            ("count", "count"),
        ):
            row = f"workload class {cls}: {name}"
            values = []
            for r in results:
                wl = r.summary.workload_classes.get(cls)
                value = getattr(wl, field) if wl is not None else None
                unit = " ms" if field.endswith("_ms") else ""
                values.append("-" if value is None else f"{value:,}{unit}")
            print(f"{row:<44}" + "".join(f"{v:>{width}}" for v in values), file=stream)
    for name, attr in (("virtual time", "virtual_ms"), ("wall time", "wall_ms")):
        values = [f"{getattr(r, attr):,} ms" for r in results]
        print(f"{name:<44}" + "".join(f"{v:>{width}}" for v in values), file=stream)


def run_simulate(
    generator: str,
    *,
    rangespec: str | None = None,
    configs: Sequence[str] = (),
    out: str = "simulation",
    progress: bool = True,
    stream: TextIO | None = None,
) -> int:
    stream = stream or sys.stdout
    try:
        scenario = scenario_from(generator)
        spec = RangeSpec.load(rangespec) if rangespec else None
        runs: list[tuple[str, list[dict[str, Any]]]] = (
            [(Path(c).stem, [_load_config(c)]) for c in configs] if configs else [("", [])]
        )
    except (GeneratorError, OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_INVALID
    out_dir = Path(out)
    results: list[SimResult] = []
    for label, extra in runs:
        run_dir = out_dir / label if label and len(runs) > 1 else out_dir
        bar = ProgressBar(f"simulate {label}".strip(), enabled=progress and sys.stderr.isatty())
        try:
            pipeline = EmbeddedSimPipeline(run_dir / "log")
            result = run_scenario(scenario, pipeline, extra_objects=extra, progress=bar)
        except LogError as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_FAILED
        finally:
            bar.close()
        result.label = label
        results.append(result)
        plots = _write_outputs(result, run_dir, label)
        print(
            f"{label + ': ' if label else ''}{len(scenario.workloads):,} workloads, "
            f"{result.events:,} events, {result.decisions:,} decisions; "
            f"summary in {run_dir / 'summary.yaml'}, plots {', '.join(str(p) for p in plots)}",
            file=stream,
        )
    _print_summary(results, stream)
    failed = False
    if spec is not None:
        for result in results:
            print(f"\nrangespec {rangespec}{' (' + result.label + ')' if result.label else ''}:", file=stream)
            for c in check(result.summary, spec, result.wall_ms):
                mark = "info" if c.informational else ("ok" if c.ok else "FAIL")
                print(f"  {mark:<5} {c.what:<44} ours {c.ours:>14}  expected {c.limit}", file=stream)
                failed |= not c.ok and not c.informational
    return 1 if failed else 0
