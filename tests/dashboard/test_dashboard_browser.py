"""The dashboard in a real browser: the numbers of the tables, a Workload's timeline, live updates.

``kueuestream dashboard LOG`` runs as a user runs it, on a log the embedded
runtime wrote (the team-queues and DRS examples); Chromium loads the page.
While the page is open, the runtime admits one more Workload, which
preempts another: the page must show both without a reload. The screenshot
the README shows is taken at the end, into ``docs/dashboard.png``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.dashboard.browser import chromium
from tests.dashboard.scenario import append, new_workload, record
from tests.dashboard.test_dashboard_state import drs_shares, table_usage

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "dashboard.png"


@contextmanager
def dashboard(log: Path) -> Iterator[str]:
    """``kueuestream dashboard LOG --port 0`` running in LOG's folder; the page's URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "kueuestream", "dashboard", log.name, "--port", "0"],
        cwd=log.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("dashboard on http://127.0.0.1:"), line + process.stderr.read()  # type: ignore[union-attr]
        yield line.split(" on ", 1)[1].strip()
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0


def urgent(name: str) -> dict[str, object]:
    """A team-a Workload of the ``urgent`` class: it takes back team-a's quota team-b borrows."""
    manifest = new_workload(name, "team-a", "main", {"cpu": "2", "memory": "1Gi"})
    manifest["spec"]["priorityClassRef"] = {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "urgent",
    }
    return manifest


@pytest.mark.browser
def test_the_dashboard_in_chromium_shows_the_tables_a_timeline_and_live_changes(tmp_path: Path) -> None:
    log, pipeline, stream = record(tmp_path / "log")
    tables, shares = table_usage(), drs_shares()
    with log, dashboard(tmp_path / "log") as url, chromium(tmp_path / "profile") as browser:
        page = browser.new_page()
        page.goto(url)
        page.wait_for_selector('[data-cq="team-a"]')
        page.wait_for_selector("#live:not(.off)")

        # Every usage, nominal quota, pending count and weighted share as the tables print them.
        for cq, (pending, usage) in tables.items():
            for part in usage.split("; "):
                flavor, amounts = part.split(": ")
                for item in amounts.split(" "):
                    resource, shown = item.split("=")
                    assert page.text_content(f'[data-usage="{cq}/{flavor}/{resource}"]') == shown, item
            counts = page.text_content(f'[data-counts="{cq}"]') or ""
            assert counts.startswith(f"{pending} pending, "), (cq, counts)
            assert (page.text_content(f'[data-share="{cq}"]') or "").startswith(
                f"weighted share {shares[cq]}"
            )
        assert page.locator('[data-cohort="research"] [data-cq]').evaluate_all(
            "nodes => nodes.map(n => n.dataset.cq)"
        ) == ["team-a", "team-b"]
        pending = page.locator('[data-pending-cq="team-a"] tbody tr').evaluate_all(
            "rows => rows.map(r => r.dataset.pending)"
        )
        assert pending == ["team-a/train-llm", "team-a/sweep"]
        # The whole list is at the visibility API's path on the same port.
        visibility = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/team-a/pendingworkloads"
        answer = page.request.get(url.replace("/dashboard", visibility))
        assert answer.ok and [i["metadata"]["name"] for i in answer.json()["items"]] == ["train-llm", "sweep"]

        # A Workload's timeline, opened from the pending list.
        page.click('[data-pending="team-a/train-llm"] a')
        page.wait_for_selector('#workload[data-loaded="team-a/train-llm"]')
        events = page.locator("#timeline tbody tr").evaluate_all("rows => rows.map(r => r.dataset.event)")
        assert events == ["Created", "Queued", "Waiting"]
        waiting = page.text_content('#timeline tr[data-event="Waiting"]') or ""
        assert "WaitingForQuota" in waiting
        assert "cpu in on-demand short by 8 at Cohort research" in waiting
        assert "raise the nominal quota of ClusterQueue team-a in flavor on-demand by cpu +8" in (
            page.text_content("#would-admit") or ""
        )
        # A name the log does not have: the error names the closest, which opens.
        page.fill("#find-name", "team-a/train-lm")
        page.click("#find button")
        page.wait_for_selector("#workload-error:not([hidden])")
        assert (page.text_content("#workload-error") or "").startswith(
            "Workload team-a/train-lm: not in the log"
        )
        page.click('#workload-error [data-workload="team-a/train-llm"]')
        page.wait_for_selector('#workload[data-loaded="team-a/train-llm"]')
        page.wait_for_selector("#workload-error[hidden]", state="attached")

        page.click("text=overview")
        page.wait_for_selector("#overview:not([hidden])")

        # One more Workload arrives while the page is open: admitted, after preempting in team-b.
        version = int(page.get_attribute("body", "data-version") or "0")
        append(pipeline, stream, urgent("urgent-fix"))
        page.wait_for_selector('[data-recent="admitted team-a/urgent-fix"]', timeout=20_000)
        page.wait_for_selector('[data-recent^="preempted team-b/"]', timeout=20_000)
        # The preemption freed more than urgent-fix takes: train-llm, first in team-a's queue, follows.
        page.wait_for_selector('[data-recent="admitted team-a/train-llm"]', timeout=20_000)
        assert int(page.get_attribute("body", "data-version") or "0") > version
        assert page.text_content('[data-usage="team-b/on-demand/cpu"]') == "0/8"
        assert page.text_content('[data-usage="team-a/on-demand/cpu"]') == "16/8"
        assert page.locator('[data-pending-cq="team-a"] tbody tr').evaluate_all(
            "rows => rows.map(r => r.dataset.pending)"
        ) == ["team-a/sweep"]
        page.screenshot(path=str(SCREENSHOT), full_page=True)
