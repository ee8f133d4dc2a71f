"""``wouldAdmit`` is checked, not trusted, on random small scenarios.

A ClusterQueue ``q`` (alone, or in a Cohort with a lender, with or without a
borrowing limit) runs a few Workloads; a later one, ``target``, waits.
Raising ``q``'s nominal quota by what ``wouldAdmit`` says and running the
same log through ``replay --config`` (the what-if) admits ``target``; raising
it by one millicore less does not. Finishing the Workloads ``wouldAdmit``
names lets ``target`` in; leaving any one of them running does not. Both hold
when no other Workload waits ahead of ``target`` (one that does would take
the freed quota first, and ``wouldAdmit`` does not count it).
The quota arithmetic is Kueue's (``fitsResourceQuota``, ``available`` and
``potentialAvailable`` of the resource nodes).
"""

from __future__ import annotations

import io
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kueuestream.admission.quantity import parse_quantity
from kueuestream.agents.audit.explain import UnknownWorkload, explain_json
from kueuestream.agents.audit.replay import replay
from kueuestream.agents.embedded.runtime import run_source
from tests.helpers import cluster_queue, flavor, workload


@dataclass(frozen=True)
class Shape:
    nominal: int
    lender: int | None  # the lender's nominal quota, or None for no Cohort
    borrowing_limit: int | None
    running: tuple[int, ...]  # cpus of q's running Workloads
    lender_running: tuple[int, ...]
    target: int


@st.composite
def shapes(draw: st.DrawFn) -> Shape:
    nominal = draw(st.integers(1, 6))
    lender = draw(st.one_of(st.none(), st.integers(0, 4)))
    limit = draw(st.one_of(st.none(), st.integers(0, 3))) if lender is not None else None
    running = tuple(draw(st.lists(st.integers(1, 3), max_size=3)))
    lender_running = tuple(draw(st.lists(st.integers(1, 2), max_size=2))) if lender is not None else ()
    return Shape(nominal, lender, limit, running, lender_running, draw(st.integers(1, 8)))


def _within(sizes: list[int], room: int) -> tuple[int, ...]:
    """The first sizes whose sum stays within ``room``."""
    out: list[int] = []
    for size in sizes:
        if sum(out) + size <= room:
            out.append(size)
    return tuple(out)


@st.composite
def busy_shapes(draw: st.DrawFn) -> Shape:
    """Shapes whose running Workloads all fit in their own ClusterQueue's nominal quota."""
    shape = draw(shapes())
    lender_running = _within(list(shape.lender_running), shape.lender or 0)
    return Shape(
        shape.nominal,
        shape.lender,
        shape.borrowing_limit,
        _within(list(shape.running), shape.nominal),
        lender_running,
        shape.target,
    )


def quota(nominal: str, limit: int | None = None) -> str:
    extra = f", borrowingLimit: {limit}" if limit is not None else ""
    return f"default: [{{name: cpu, nominalQuota: {nominal}{extra}}}]"


def queues(shape: Shape, nominal: str) -> str:
    cohort = "team" if shape.lender is not None else ""
    text = cluster_queue("q", quota(nominal, shape.borrowing_limit), cohort)
    if shape.lender is not None:
        text += cluster_queue("lender", quota(str(shape.lender)), cohort)
    return text


def cq_only(text: str) -> str:
    """The ClusterQueue document of ``cluster_queue``'s text, without its LocalQueue."""
    return text.split("---")[0]


def run_steps(root: Path, shape: Shape, finish: tuple[str, ...] = ()) -> Path:
    src, log = root / "src", root / "log"
    src.mkdir(parents=True)
    (src / "q.yaml").write_text(flavor("default") + queues(shape, str(shape.nominal)))
    running = "".join(
        workload(f"r{i}", "q", cpu=str(cpu), created=f"2024-01-01T00:00:0{i}Z")
        for i, cpu in enumerate(shape.running)
    ) + "".join(
        workload(f"l{i}", "lender", cpu=str(cpu), created=f"2024-01-01T00:00:0{i}Z")
        for i, cpu in enumerate(shape.lender_running)
    )
    target = workload("target", "q", cpu=str(shape.target), created="2024-01-01T01:00:00Z")
    for name, text in (("running", running), ("target", target)):
        (src / f"{name}.yaml").write_text(text)
        assert run_source(str(src), str(root / "status"), str(log), once=True, out=io.StringIO()) == 0
    if finish:
        kept = "".join(
            doc + "---"
            for doc in running.split("---")
            if doc.strip() and not any(f"name: {n}," in doc for n in finish)
        )
        (src / "running.yaml").write_text(kept)
        assert run_source(str(src), str(root / "status"), str(log), once=True, out=io.StringIO()) == 0
    return log


def millis(quantity: str) -> int:
    return int(parse_quantity(quantity).value * 1000)


def admitted_by_what_if(root: Path, log: Path, shape: Shape, nominal_millis: int) -> bool:
    changed = root / f"q-{nominal_millis}.yaml"
    changed.write_text(cq_only(queues(shape, f"{nominal_millis}m")))
    out = io.StringIO()
    assert replay(str(log), str(changed), out=out) == 0, out.getvalue()
    report = out.getvalue()
    gained = report.split("Admitted only with the new configuration:")[1].split("Admitted on other flavors")[
        0
    ]
    return "default/target " in gained


def is_admitted(log: Path) -> bool:
    return explain_json(str(log), "default", "target")["wouldAdmit"] is None


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes())
def test_the_quota_increase_is_the_smallest_that_admits(shape: Shape) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        log = run_steps(root / "recorded", shape)
        answer = explain_json(str(log), "default", "target")
        would = answer["wouldAdmit"]
        assume(would is not None)
        assert isinstance(would, dict)
        assume(only_target_waits(log))
        [option] = would["quotaIncrease"]
        assert (option["clusterQueue"], option["flavor"]) == ("q", "default")
        more = millis(option["resources"]["cpu"])
        assert more > 0
        raised = shape.nominal * 1000 + more
        assert admitted_by_what_if(root, log, shape, raised)
        assert not admitted_by_what_if(root, log, shape, raised - 1)


def only_target_waits(log: Path) -> bool:
    """Whether every other Workload runs: none waits ahead of ``target`` for freed quota."""
    others = [e["event"] for n in ("r", "l") for i in range(3) for e in _last(log, f"{n}{i}")]
    return all(event == "Admitted" for event in others)


def _last(log: Path, name: str) -> list[dict[str, object]]:
    """The last timeline entry of a Workload, or none when the log does not have it."""
    try:
        timeline = explain_json(str(log), "default", name)["timeline"]
    except UnknownWorkload:  # not generated in this scenario
        return []
    assert isinstance(timeline, list)
    return timeline[-1:]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_shapes())
def test_finishing_the_named_workloads_admits_and_every_one_is_needed(shape: Shape) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        log = run_steps(root / "recorded", shape)
        would = explain_json(str(log), "default", "target")["wouldAdmit"]
        assume(isinstance(would, dict) and would["finishing"] and only_target_waits(log))
        assert isinstance(would, dict)
        names = tuple(str(n).split("/")[1] for n in would["finishing"])
        assert is_admitted(run_steps(root / "all", shape, names))
        for i in range(len(names)):
            fewer = names[:i] + names[i + 1 :]
            assert not is_admitted(run_steps(root / f"without-{i}", shape, fewer)), fewer
