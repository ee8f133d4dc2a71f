"""Random federations: never two reserving copies, a Ready check always names its copy, replay is exact."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kueuestream.agents.multikueue import MultiKueueHandler
from kueuestream.streams import codec
from tests.multikueue.world import NS, World, is_true

WORKERS = ("w1", "w2", "w3")
NAMES = ("a", "b", "c")

step = st.one_of(
    st.tuples(st.just("reserve"), st.sampled_from(NAMES)),
    st.tuples(st.just("admit"), st.sampled_from(NAMES), st.sampled_from(WORKERS)),
    st.tuples(st.just("evict"), st.sampled_from(NAMES), st.sampled_from(WORKERS)),
    st.tuples(st.just("finish"), st.sampled_from(NAMES), st.sampled_from(WORKERS)),
    st.tuples(st.just("disconnect"), st.sampled_from(WORKERS)),
    st.tuples(st.just("connect"), st.sampled_from(WORKERS)),
    st.tuples(st.just("advance"), st.integers(min_value=1, max_value=20 * 60_000)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES)),
)


def _run(world: World, steps: list[tuple[object, ...]]) -> None:
    for op, *args in steps:
        if op == "advance":
            world.advance(int(str(args[0])))
            continue
        if op in ("connect", "disconnect"):
            world.connect(str(args[0]), connected=op == "connect")
            continue
        key = (NS, str(args[0]))
        wl = world.workloads.get(key)
        if wl is None:
            continue
        if op == "reserve" and not is_true(wl, "QuotaReserved") and not is_true(wl, "Finished"):
            world.reserve(key)
        elif op == "delete":
            world.delete_workload(key)
        elif op in ("admit", "evict", "finish"):
            worker = world.workers[str(args[1])]
            copy = worker.workloads.get(key)
            if copy is None or not worker.connected:
                continue
            if op == "admit" and not is_true(copy, "QuotaReserved") and not is_true(copy, "Finished"):
                world.admit(str(args[1]), key)
            elif op == "evict" and is_true(copy, "Admitted"):
                world.remote_evict(str(args[1]), key)
            elif op == "finish" and is_true(copy, "Admitted"):
                world.remote_finish(str(args[1]), key)
        _check(world)


def _check(world: World) -> None:
    for key, wl in world.workloads.items():
        reserving = world.reserving(key)
        assert len(reserving) <= 1, f"{key}: copies reserve quota in {reserving}"
        if world.check_state(key) == "Ready" and not is_true(wl, "Finished"):
            cluster = wl["status"].get("clusterName")
            worker = world.workers[cluster]
            assert not worker.connected or cluster in reserving, f"{key}: Ready on {cluster} without its copy"
        if is_true(wl, "Finished") or not is_true(wl, "QuotaReserved"):
            held = [w for w in world.holding(key) if world.workers[w].connected]
            assert not held, f"{key}: copies in {held} of a Workload without quota"


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(step, max_size=40), incremental=st.booleans())
def test_random_federations_keep_one_reserving_copy_and_replay_exactly(
    steps: list[tuple[object, ...]], incremental: bool
) -> None:
    """reconcileGroup over random histories: at no point does a Workload have copies holding quota in
    two reachable workers once the dispatcher's decisions are carried out; a Ready check names the
    worker whose copy holds it; a Workload without quota keeps no copy; and re-running the recorded
    watch events through a fresh agent reproduces every decision byte for byte."""
    config = {"multiKueue": {"workerLostTimeout": "5m", "gcInterval": "1m"}}
    if incremental:
        config["multiKueue"].update(
            {
                "dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
                "incrementalDispatcherConfig": {"stepSize": 1},
            }
        )
    world = World(clusters=WORKERS, configuration=config).setup()
    for name in NAMES:
        world.submit(name)
    _run(world, steps)
    fresh = MultiKueueHandler()
    replayed = [
        codec.encode(d)
        for offset, event in enumerate(world.events)
        for d in fresh.handle(offset, codec.encode(event))
    ]
    assert replayed == world.encoded()
