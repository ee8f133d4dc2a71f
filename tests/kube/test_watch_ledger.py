"""What a restarted watcher knows from the log, and what a relist sends (no server needed).

- the resume point of a kind is the resourceVersion of the last record about
  it, an object event or a progress marker; other clusters' records and batch
  markers do not move it;
- an event the log already holds (same resourceVersion, deletion of an object
  it does not know) is not news, so a replay after a restart sends nothing twice;
- after a relist, the events sent are exactly the differences between the log
  and the list (property test over random before/after states), and folding
  them into the log gives the listed state.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kueuestream.agents.kube.resources import KINDS_WATCHED, ServedKind
from kueuestream.agents.kube.watch_ledger import WatchLedger
from kueuestream.agents.kube.watcher import list_differences
from kueuestream.agents.log_entries import BATCH_BEGIN, batch_marker, progress_marker
from kueuestream.streams.schemas import WatchEvent, WatchEventType

CQ = ServedKind(next(k for k in KINDS_WATCHED if k.kind == "ClusterQueue"), "v1beta2")


def cq_event(
    name: str, rv: str, type_: WatchEventType = WatchEventType.ADDED, cluster: str = "a"
) -> WatchEvent:
    obj = None
    if type_ != WatchEventType.DELETED:
        obj = {
            "apiVersion": CQ.api_version,
            "kind": "ClusterQueue",
            "metadata": {"name": name, "resourceVersion": rv},
        }
    return WatchEvent(
        cluster=cluster,
        kind="ClusterQueue",
        apiVersion=CQ.api_version,
        name=name,
        type=type_,
        resourceVersion=rv,
        object=obj,
        timestamp=1,
    )


def test_resume_point_is_the_last_record_of_the_kind_in_this_cluster() -> None:
    log = [
        cq_event("q1", "10"),
        progress_marker("a", "ClusterQueue", "15", 2),
        batch_marker(BATCH_BEGIN, "a", 3),
        cq_event("q2", "99", cluster="b"),  # another cluster's versions mean nothing here
        progress_marker("b", "ClusterQueue", "120", 4),
        cq_event("q1", "17", WatchEventType.MODIFIED),
        progress_marker("a", "ResourceFlavor", "30", 5),
    ]
    ledger = WatchLedger.fold("a", log)
    assert ledger.progress == {"ClusterQueue": "17", "ResourceFlavor": "30"}
    assert ledger.objects == {("ClusterQueue", "", "q1"): "17"}

    ledger.record(progress_marker("a", "ClusterQueue", "40", 6))  # a bookmark
    assert ledger.progress["ClusterQueue"] == "40"


def test_events_already_in_the_log_are_not_news() -> None:
    ledger = WatchLedger.fold("a", [cq_event("q1", "10"), cq_event("q2", "11")])
    assert not ledger.is_news(cq_event("q1", "10", WatchEventType.MODIFIED))
    assert ledger.is_news(cq_event("q1", "12", WatchEventType.MODIFIED))
    assert not ledger.is_news(cq_event("q9", "13", WatchEventType.DELETED))
    assert ledger.is_news(cq_event("q2", "14", WatchEventType.DELETED))

    ledger.record(cq_event("q2", "14", WatchEventType.DELETED))
    assert ledger.objects == {("ClusterQueue", "", "q1"): "10"}
    # The same name created again is a new object.
    assert ledger.is_news(cq_event("q2", "15"))


names = st.sampled_from([f"q{i}" for i in range(8)])
states = st.dictionaries(names, st.integers(min_value=1, max_value=5).map(str), max_size=8)


@settings(max_examples=300, deadline=None)
@given(before=states, after=states)
def test_a_relist_sends_exactly_the_differences(before: dict[str, str], after: dict[str, str]) -> None:
    ledger = WatchLedger.fold("a", [cq_event(n, rv) for n, rv in sorted(before.items())])
    other = ("ResourceFlavor", "", "rf")
    ledger.objects[other] = "1"  # a kind the relist is not about: untouched
    listed = [{"metadata": {"name": n, "resourceVersion": rv}, "spec": {}} for n, rv in sorted(after.items())]

    events = list_differences(ledger, CQ, listed, "50", now=7)

    sent = {(e.name, e.type) for e in events}
    expected = (
        {(n, WatchEventType.ADDED) for n in after.keys() - before.keys()}
        | {(n, WatchEventType.MODIFIED) for n in after.keys() & before.keys() if after[n] != before[n]}
        | {(n, WatchEventType.DELETED) for n in before.keys() - after.keys()}
    )
    assert sent == expected
    assert len(events) == len(sent)  # one event per object at most
    for e in events:
        assert e.resourceVersion == (after[e.name] if e.type != WatchEventType.DELETED else "50")
        assert e.cluster == "a" and e.apiVersion == "kueue.x-k8s.io/v1beta2"
    assert ledger.of_kind("ClusterQueue") == {("ClusterQueue", "", n): rv for n, rv in after.items()}
    assert ledger.objects[other] == "1"
    # Folding what was sent into the old log reaches the same state: a restart agrees.
    refolded = WatchLedger.fold("a", [*(cq_event(n, rv) for n, rv in sorted(before.items())), *events])
    assert refolded.of_kind("ClusterQueue") == ledger.of_kind("ClusterQueue")
