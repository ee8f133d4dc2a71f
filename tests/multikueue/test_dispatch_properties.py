"""Random federations: never two reserving copies, a Ready check always names its copy, replay is exact."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kueuestream.agents.multikueue import MultiKueueHandler
from kueuestream.streams import codec
from kueuestream.streams.schemas import WatchEvent, WatchEventType
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
    st.tuples(st.just("pause"), st.sampled_from(WORKERS)),
    st.tuples(st.just("resume"), st.sampled_from(WORKERS)),
)


def _run(world: World, steps: list[tuple[object, ...]]) -> None:
    for op, *args in steps:
        if op == "advance":
            world.advance(int(str(args[0])))
            continue
        if op in ("connect", "disconnect"):
            world.connect(str(args[0]), connected=op == "connect")
            continue
        if op == "pause":
            world.paused.add(str(args[0]))
            continue
        if op == "resume":
            if world.workers[str(args[0])].connected:
                world.resume(str(args[0]))
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
            waiting = any(d.cluster == cluster for d in world.waiting)
            assert not worker.connected or waiting or cluster in reserving, f"{key}: Ready on {cluster}"
        if is_true(wl, "Finished") or not is_true(wl, "QuotaReserved"):
            held = [
                w
                for w in world.holding(key)
                if world.workers[w].connected and not any(d.cluster == w for d in world.waiting)
            ]
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


json_value = st.recursive(
    # What a watch event can carry: JSON, integers within 64 bits.
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
# Objects shaped like ours in places, garbage in others: the fields the dispatcher reads, wrongly typed.
field_soup = st.fixed_dictionaries(
    {},
    optional={
        "metadata": st.fixed_dictionaries(
            {},
            optional={
                "labels": st.one_of(json_value, st.just({"kueue.x-k8s.io/multikueue-origin": "multikueue"})),
                "ownerReferences": json_value,
                "uid": json_value,
                "namespace": json_value,
            },
        ),
        "status": st.fixed_dictionaries(
            {},
            optional={
                "conditions": st.lists(
                    st.fixed_dictionaries(
                        {"type": st.sampled_from(["Admitted", "QuotaReserved", "Finished", "Evicted"])},
                        optional={
                            "status": json_value,
                            "lastTransitionTime": json_value,
                            "reason": json_value,
                        },
                    ),
                    max_size=3,
                )
                | json_value,
                "admissionChecks": json_value,
            },
        ),
        "spec": json_value,
        "connected": json_value,
        "reason": json_value,
    },
)


@settings(max_examples=150, deadline=None)
@given(
    garbage=st.lists(
        st.tuples(
            st.sampled_from(["manager", "multikueue:w1", "multikueue:w2"]),
            st.sampled_from(["Workload", "Job", "ClusterConnection", "MultiKueueConfig", "AdmissionCheck"]),
            st.sampled_from(["a", "b"]),
            st.booleans(),
            field_soup,
        ),
        max_size=12,
    )
)
def test_malformed_objects_never_stop_the_dispatcher(garbage: list[tuple[str, str, str, bool, dict]]) -> None:  # type: ignore[type-arg]
    """Bad input never stops the pipeline: whatever a watch event carries, the dispatcher decides on,
    and the same events give the same decisions."""
    world = World(clusters=("w1", "w2")).setup()
    key = world.submit("a")
    world.reserve(key)
    for cluster, kind, name, deleted, body in garbage:
        obj = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, **body}
        obj["metadata"] = {**(body.get("metadata") or {}), "name": name, "namespace": NS}
        world.send(
            WatchEvent(
                cluster=cluster,
                kind=kind,
                apiVersion="kueue.x-k8s.io/v1beta2",
                namespace=NS,
                name=name,
                type=WatchEventType.DELETED if deleted else WatchEventType.MODIFIED,
                object=obj,
                timestamp=world.now,
            )
        )
        world.advance(61_000)
    fresh = MultiKueueHandler()
    replayed = [
        codec.encode(d)
        for offset, event in enumerate(world.events)
        for d in fresh.handle(offset, codec.encode(event))
    ]
    assert replayed == world.encoded()
