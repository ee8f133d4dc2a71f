"""Upstream Kueue's scheduler on scenario files: builds and runs ``upstream/parity_test.go``.

The Go files are ours; they are compiled inside a copy of upstream's module
(``sigs.k8s.io/kueue`` at the version ``scripts/kueue.sh`` pins), taken from the
Go module cache, never committed, in place of upstream's own tests of
``pkg/scheduler``. A test binary is cached per user beside
``scripts/kueue.sh``'s build, under a name holding the hash of its Go files, so
only the first run after a change compiles: several minutes on a 2-core
machine the first time (upstream's test dependencies), about a minute after a
change to a Go file. ``bench/kueue_go_bench.py`` builds its own binary here too.

    .venv/bin/python -m tests.parity.upstream build     # prints the binary's path
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GO_SOURCES = sorted((Path(__file__).parent / "upstream").glob("*_test.go"))
# The Go helper bench/kueue_go_bench.py builds its benchmark with.
HEADS_SOURCE = Path(__file__).parent / "upstream" / "heads_test.go"
MODULE = "sigs.k8s.io/kueue"
RESULT_PREFIX = "KUEUE_PARITY_RESULT "


class UpstreamUnavailable(RuntimeError):
    """Go or upstream's module cannot be had here; the message says what to do."""


def kueue_version() -> str:
    found = re.search(r"^KUEUE_VERSION=(\S+)$", (ROOT / "scripts" / "kueue.sh").read_text(), re.M)
    if found is None:
        raise UpstreamUnavailable("scripts/kueue.sh pins no KUEUE_VERSION")
    return found.group(1)


def go_binary() -> str:
    for candidate in (os.environ.get("GO", ""), shutil.which("go") or "", "/usr/local/go/bin/go"):
        if candidate and Path(candidate).is_file():
            return candidate
    raise UpstreamUnavailable("go not found: upstream's scheduler needs Go 1.26 or newer (or set GO)")


def _cache() -> Path:
    base = os.environ.get("KUEUESTREAM_KUEUE_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kueuestream" / "kueue"
    )
    return Path(base)


def _go(go: str, args: list[str], cwd: Path, what: str) -> str:
    # The module's go.mod asks for the Go it was released with; this one builds it.
    env = {**os.environ, "GOFLAGS": "-mod=mod -buildvcs=false", "CGO_ENABLED": "0", "GOTOOLCHAIN": "local"}
    done = subprocess.run(
        [go, *args], cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False
    )
    if done.returncode != 0:
        raise UpstreamUnavailable(f"{what} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return done.stdout


def build(sources: Sequence[Path] = GO_SOURCES, name: str = "parity") -> Path:
    """The test binary of upstream's pkg/scheduler with the Go files ``sources``, built once per change."""
    version = kueue_version()
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    out = _cache() / f"{name}-{version}-{digest}" / "scheduler.test"
    if out.is_file():
        return out
    go = go_binary()
    with tempfile.TemporaryDirectory(prefix="kueue-parity-") as tmp:
        work = Path(tmp)
        # Downloaded by scripts/kueue.sh build already when it ran; this is a no-op then.
        _go(
            go,
            ["mod", "download", "-json", f"{MODULE}@{version}"],
            work,
            f"go mod download {MODULE}@{version}",
        )
        modcache = Path(_go(go, ["env", "GOMODCACHE"], work, "go env").strip())
        source = modcache / f"{MODULE}@{version}"
        module = work / "kueue"
        shutil.copytree(source, module)
        for path in module.rglob("*"):
            path.chmod(path.stat().st_mode | 0o200)
        package = module / "pkg" / "scheduler"
        # Upstream's own tests there are not run, and are 20,000 lines to compile.
        for test in package.glob("*_test.go"):
            test.unlink()
        for go_file in sources:
            shutil.copy(go_file, package / go_file.name)
        built = work / "scheduler.test"
        _go(
            go,
            ["test", "-c", "-o", str(built), "./pkg/scheduler"],
            module,
            "building upstream's scheduler tests",
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        staged = out.with_suffix(f".tmp.{os.getpid()}")
        shutil.copy(built, staged)
        staged.replace(out)
    return out


def run(scenarios: Path) -> dict[str, dict[str, Any]]:
    """Upstream's outcome of every ``*.yaml`` scenario in ``scenarios``, by file name."""
    binary = build()
    done = subprocess.run(
        [str(binary), "-test.run", "^TestKueueParity$", "-test.count", "1"],
        env={**os.environ, "KUEUE_PARITY_DIR": str(scenarios)},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
        timeout=1800,
    )
    results: dict[str, dict[str, Any]] = {}
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX) :])
            results[result["scenario"]] = result
    if done.returncode != 0:
        raise RuntimeError(f"upstream's scheduler failed (exit {done.returncode}):\n{done.stdout[-4000:]}")
    return results


if __name__ == "__main__":
    if sys.argv[1:] == ["build"]:
        print(build())
    else:
        raise SystemExit("usage: python -m tests.parity.upstream build")
