"""``admit`` runs without the cyclic garbage collector and gives it back as it found it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kueuestream.agents.cli.collector import without_cyclic_gc
from kueuestream.agents.cli.main import main
from kueuestream.agents.embedded import runtime

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"


@pytest.fixture
def collector_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_admit_pauses_the_collector_and_restores_it(
    collector_enabled: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[bool] = []
    admit = runtime.admit

    def watched(*args: Any, **kwargs: Any) -> runtime.Admitted:
        seen.append(gc.isenabled())
        return admit(*args, **kwargs)

    monkeypatch.setattr(runtime, "admit", watched)
    assert main(["admit", str(EXAMPLES / "team-queues")]) == 0
    assert "kind: List" in capsys.readouterr().out
    assert seen == [False]
    assert gc.isenabled()


def test_the_collector_comes_back_when_the_command_fails(collector_enabled: None) -> None:
    @without_cyclic_gc
    def failing() -> None:
        assert not gc.isenabled()
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        failing()
    assert gc.isenabled()


def test_a_collector_switched_off_before_stays_off(collector_enabled: None) -> None:
    gc.disable()
    assert without_cyclic_gc(lambda: 7)() == 7
    assert not gc.isenabled()
