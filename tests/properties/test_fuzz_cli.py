"""Fuzz: hostile and damaged input through validate, admit, run --once and replay.

Random mutations of the example manifests (bytes flipped, inserted or cut; YAML
nodes replaced, dropped or renamed; hostile names such as ``../..``, absolute
paths and NUL bytes) and of the embedded log's segment files. Whatever the
input, a command ends with a status code and, at most, clear lines on stderr:
no traceback, no hang, and no file written outside the folders it was given.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kueuestream.agents.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"
SEEDS = sorted(p for p in EXAMPLES.rglob("*.yaml") if p.is_file())
SEED_TEXTS = [p.read_text(encoding="utf-8") for p in SEEDS]
# A command that takes longer than this on a few small files has hung.
HANG_SECONDS = 60
EXIT_CODES = {0, 1, 2}


class Hung(Exception):
    pass


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    def expire(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"no answer after {seconds}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def cli(*args: str) -> tuple[int, str]:
    """Run one command in-process; a traceback or a hang fails the test with the command line."""
    err = io.StringIO()
    command = f"kueuestream {' '.join(args)}"
    try:
        quiet = contextlib.redirect_stdout(io.StringIO())
        with deadline(HANG_SECONDS), quiet, contextlib.redirect_stderr(err):
            code = main(list(args))
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    except BaseException as exc:
        raise AssertionError(f"{command} raised {exc!r}\nstderr:\n{err.getvalue()}") from exc
    assert code in EXIT_CODES, f"{command} exited {code}"
    assert "Traceback" not in err.getvalue(), err.getvalue()
    return code, err.getvalue()


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def assert_confined(base: Path, allowed: tuple[Path, ...]) -> None:
    strays = sorted(str(p) for p in files_under(base) if not any(p.is_relative_to(a) for a in allowed))
    assert not strays, f"files written outside the folders given: {strays}"


# --- mutations -----------------------------------------------------------------------------


def hostile_names(base: Path) -> st.SearchStrategy[str]:
    return st.sampled_from(
        [
            "../..",
            "../../outside/x",
            "a/b",
            "..",
            ".",
            "",
            f"{base}/abs/victim",
            "x\x00y",
            "UPPER",
            "a" * 300,
            "-lead",
            "ünïcode",
            "sp ace",
        ]
    )


def scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True),
        st.text(max_size=20),
        st.sampled_from(["1e400", "NaN", "-1", "0.5Gi", "1_000", " 1", "Infinity", "*alias"]),
    )


def paths_in(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key in sorted(node, key=str):
            out += paths_in(node[key], (*prefix, key))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            out += paths_in(item, (*prefix, i))
    return out


@st.composite
def mutated_document(draw: st.DrawFn, base: Path) -> str:
    """One example file, changed at the YAML level or as bytes."""
    text = draw(st.sampled_from(SEED_TEXTS))
    how = draw(st.sampled_from(["tree", "tree", "names", "bytes", "duplicate-key", "alias"]))
    if how == "bytes":
        data = bytearray(text.encode())
        for _ in range(draw(st.integers(1, 6))):
            pos = draw(st.integers(0, max(0, len(data) - 1)))
            op = draw(st.sampled_from(["flip", "insert", "cut"]))
            if op == "flip" and data:
                data[pos] ^= draw(st.integers(1, 255))
            elif op == "insert":
                data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
            else:
                del data[pos : pos + draw(st.integers(1, 30))]
        return data.decode("utf-8", errors="replace")
    if how == "alias":
        # Each level repeats the one before four times: 9 * 4**9 leaves once expanded.
        levels = [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 4)}]" for i in range(1, 10)]
        bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x]\n" + "\n".join(levels) + "\n"
        return text.replace("spec:", "bomb:\n  " + bomb.replace("\n", "\n  ") + "\nspec:", 1)
    if how == "duplicate-key":
        return text.replace("name:", "name: first\n  name:", 1)
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError:
        return text
    if not docs:
        return text
    index = draw(st.integers(0, len(docs) - 1))
    doc = docs[index]
    for _ in range(draw(st.integers(1, 4))):
        if how == "names" and isinstance(doc, dict):
            meta = doc.setdefault("metadata", {})
            if isinstance(meta, dict):
                meta[draw(st.sampled_from(["name", "namespace"]))] = draw(hostile_names(base))
            continue
        path = draw(st.sampled_from(paths_in(doc)))
        if not path:
            continue
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        op = draw(st.sampled_from(["replace", "drop", "rename", "listify"]))
        key = path[-1]
        if op == "replace":
            parent[key] = draw(scalars())
        elif op == "drop" and isinstance(parent, dict):
            del parent[key]
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=12))] = parent.pop(key)
        elif op == "listify":
            parent[key] = [parent[key]]
    try:
        return yaml.safe_dump_all(docs, allow_unicode=True)
    except (yaml.YAMLError, ValueError):
        return text


def write_inputs(src: Path, texts: list[str]) -> None:
    src.mkdir(parents=True, exist_ok=True)
    for i, text in enumerate(texts):
        (src / f"m{i}.yaml").write_text(text, encoding="utf-8", errors="replace")


FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)


@pytest.fixture
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@FUZZ
@given(data=st.data())
def test_mutated_manifests_never_crash_hang_or_escape(base: Path, data: st.DataObject) -> None:
    root = base / f"case{len(list(base.iterdir()))}"
    src, status, log = root / "src", root / "status", root / "log"
    texts = [data.draw(mutated_document(root)) for _ in range(data.draw(st.integers(1, 3)))]
    texts += [SEED_TEXTS[i] for i in data.draw(st.lists(st.integers(0, len(SEED_TEXTS) - 1), max_size=2))]
    write_inputs(src, texts)

    validated, problems = cli("validate", str(src))
    admitted, _ = cli("admit", str(src))
    # admit and validate agree on whether the input is valid.
    assert (validated == 0) == (admitted == 0), problems
    if validated == 2:
        assert problems.strip(), "exit 2 without a word on what is wrong"
    cli("run", "--source", str(src), "--status-dir", str(status), "--log-dir", str(log), "--once")
    # A restart over the same log must come up too.
    cli("run", "--source", str(src), "--status-dir", str(status), "--log-dir", str(log), "--once")
    cli("replay", str(log))
    assert_confined(root, (src, status, log))


@FUZZ
@given(data=st.data())
def test_damaged_log_segments_never_crash_a_restart_or_replay(base: Path, data: st.DataObject) -> None:
    root = base / f"case{len(list(base.iterdir()))}"
    src, status, log = root / "src", root / "status", root / "log"
    shutil.copytree(EXAMPLES / "team-queues", src)
    code, err = cli("run", "--source", str(src), "--status-dir", str(status), "--log-dir", str(log), "--once")
    assert code == 0, err
    segments = sorted(p for p in files_under(log) if p.is_file() and p.stat().st_size > 0)
    for _ in range(data.draw(st.integers(1, 3))):
        victim = data.draw(st.sampled_from(segments))
        raw = bytearray(victim.read_bytes())
        if not raw:
            continue
        op = data.draw(st.sampled_from(["flip", "truncate", "garbage", "zero"]))
        pos = data.draw(st.integers(0, len(raw) - 1))
        if op == "flip":
            raw[pos] ^= data.draw(st.integers(1, 255))
        elif op == "truncate":
            del raw[pos:]
        elif op == "garbage":
            raw += data.draw(st.binary(min_size=1, max_size=64))
        else:
            raw[pos : pos + 16] = bytes(min(16, len(raw) - pos))
        victim.write_bytes(bytes(raw))
    # A changed source after the damage: new events must get decided, not lost.
    (src / "late.yaml").write_text(
        (EXAMPLES / "team-queues" / "workloads.yaml").read_text().replace("name: ", "name: late-", 1)
    )
    cli("run", "--source", str(src), "--status-dir", str(status), "--log-dir", str(log), "--once")
    cli("run", "--source", str(src), "--status-dir", str(status), "--log-dir", str(log), "--once")
    cli("replay", str(log))
    assert_confined(root, (src, status, log))
