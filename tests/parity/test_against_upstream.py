"""Upstream Kueue's own scheduler and the engine agree on random scenarios.

The scenarios of :mod:`tests.parity.scenarios` go through upstream's
``Scheduler.schedule`` (v0.19.2 with main's gates at 0.19, built by
:mod:`tests.parity.upstream`) and through the embedded pipeline; every
Workload's admission and conditions must be the same, in four families:
quota and flavors alone, with fair sharing (``fairSharingIterator``), with
preemption and a second wave (``classicalPreemptions``, the job framework's
stop and ``WorkloadReconciler.Update`` on upstream's side), and with fair
sharing's preemption (``fairPreemptions``).

``python -m tests.parity.check`` runs more seeds on demand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import background_builds
from tests.parity import upstream
from tests.parity.check import UNSETTLED, compare

pytestmark = pytest.mark.upstream

SEEDS = range(0, 120)


@pytest.fixture(scope="module")
def upstream_scheduler() -> Path:
    """Upstream's scheduler built, by ``.ci/run`` in the background or here."""
    building = background_builds.folder()
    if building is not None:
        return background_builds.wait_for(building, "parity.", "the build of upstream's scheduler")
    try:
        return upstream.build()
    except upstream.UpstreamUnavailable as exc:
        if background_builds.in_ci():
            pytest.fail(str(exc), pytrace=False)
        pytest.skip(f"{exc}; `pytest -m 'not upstream'` leaves these tests out")


@pytest.mark.parametrize("fair_sharing", [False, True], ids=["classic", "fair-sharing"])
@pytest.mark.parametrize("preemption", [False, True], ids=["no-preemption", "preemption"])
def test_the_engine_decides_as_upstreams_scheduler(
    upstream_scheduler: Path, tmp_path: Path, preemption: bool, fair_sharing: bool
) -> None:
    found = compare(list(SEEDS), tmp_path, preemption=preemption, fair_sharing=fair_sharing)
    differing = {seed: diff for seed, diff in found.items() if diff != [UNSETTLED]}
    report = "\n".join(f"seed {seed}:\n  " + "\n  ".join(diff) for seed, diff in sorted(differing.items()))
    assert not differing, f"{len(differing)} of {len(SEEDS)} scenarios differ:\n{report}"
    compared = len(SEEDS) - sum(1 for diff in found.values() if diff == [UNSETTLED])
    assert compared >= len(SEEDS) * 0.9, "upstream settles on nearly every scenario"
