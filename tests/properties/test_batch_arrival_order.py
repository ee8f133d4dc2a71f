"""Within one batch, the order the objects arrive in decides nothing.

A Workload's requests are counted when it arrives, as Kueue's queue manager
builds a ``workload.Info`` in ``Manager.AddOrUpdateWorkload``. What they depend
on may arrive later in the same batch: the Configuration (its
``deviceClassMappings`` and ``excludeResourcePrefixes``), the DeviceClass and
the ResourceClaimTemplate. Whatever the order, the batch must end with the
statuses the written order gives, so every count taken before one of those
objects arrived is taken again.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Event, EventType
from tests.helpers import (
    NS,
    T0,
    claim_template,
    created_at,
    device_class,
    docs_of,
    dra_queue,
    dra_workload,
    workload_manifest,
)

CONFIGURATION = """
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
resources:
  excludeResourcePrefixes: [example.com/]
  deviceClassMappings:
  - name: gpus
    deviceClassNames: [gpu.example.com]
---
"""


def _objects() -> list[dict[str, Any]]:
    text = (
        CONFIGURATION
        + dra_queue({"gpus": 4})
        + device_class("gpu.example.com", 'device.driver == "gpu.example.com"')
        + claim_template("one-gpu", "- {name: gpu, deviceClassName: gpu.example.com}")
        + dra_workload("two-pods", [("main", 2, [("gpu", "one-gpu")])])
        + dra_workload("one-pod", [("main", 1, [("gpu", "one-gpu")])])
        # Three GPUs, where the two above leave one of the four: it waits.
        + dra_workload("three-pods", [("main", 3, [("gpu", "one-gpu")])])
    )
    # Asks for a resource no ClusterQueue covers: admissible only once the prefix is excluded.
    licensed = {"cpu": "1", "example.com/licence": "1"}
    docs = [*docs_of(text), workload_manifest("licensed", "lq", licensed, namespace=NS, priority=None)]
    seconds = 0
    for doc in docs:
        if doc["kind"] == "Workload":
            # Distinct ages: the queue order is the written order whatever the arrival order.
            seconds += 1
            doc["metadata"]["creationTimestamp"] = created_at(seconds)
    return docs


OBJECTS = _objects()
NOW = T0 + 3_600_000


def _statuses(order: list[dict[str, Any]]) -> dict[str, Any]:
    engine = Engine()
    for doc in order:
        engine.apply(Event(EventType.UPSERT, NOW, manifest=doc, batch=True))
    engine.apply(Event(EventType.TICK, NOW))
    return {wl["metadata"]["name"]: wl["status"] for wl in engine.workload_objects()}


WRITTEN = _statuses(OBJECTS)


def test_the_written_order_admits_what_fits_and_counts_every_workload() -> None:
    reserved = {name for name, status in WRITTEN.items() if "admission" in status}
    assert reserved == {"two-pods", "one-pod", "licensed"}
    waiting = WRITTEN["three-pods"]["conditions"][0]
    assert (waiting["reason"], waiting["message"]) == (
        "WaitingForQuota",
        "couldn't assign flavors to pod set main: insufficient unused quota for gpus in flavor f, "
        "2 more needed",
    )
    assert WRITTEN["licensed"]["admission"]["podSetAssignments"][0]["resourceUsage"] == {"cpu": "1"}


@settings(max_examples=150, deadline=None)
@given(order=st.permutations(OBJECTS))
def test_any_arrival_order_within_a_batch_ends_as_the_written_order(order: list[dict[str, Any]]) -> None:
    assert _statuses(order) == WRITTEN
