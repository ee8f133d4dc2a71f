"""What ``pip install .`` gives a user: the wheel alone runs the CLI, and installs no top-level ``agents``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Never part of a build: local environments, caches and what earlier builds left.
NOT_SOURCES = shutil.ignore_patterns(
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    ".kafka",
    ".kueuestream",
    "out",
)


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_the_wheel_installed_in_a_clean_venv_runs_the_cli(tmp_path: Path) -> None:
    """``pip wheel . --no-deps``, installed into a new venv, runs ``kueuestream admit``.

    The source is copied first so that no build output of an earlier run (a
    stale ``build/lib``) can stand in for a module the package lacks. The new
    venv gets the wheel and nothing else of this project; the third-party
    dependencies are lent from the test's own environment, so that the test
    needs no package index (``.ci/run`` installs the wheel with its
    dependencies from the index).
    """
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=NOT_SOURCES)
    built = run(
        sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w", tmp_path / "dist", cwd=source
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("kueuestream-*.whl")

    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path).returncode == 0
    python = venv / "bin" / "python"
    installed = run(
        sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", wheel, cwd=tmp_path
    )
    assert installed.returncode == 0, installed.stderr
    site = Path(
        run(
            python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path
        ).stdout.strip()
    )
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    where = run(python, "-c", "import kueuestream; print(kueuestream.__file__)", cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(site), where.stdout + where.stderr
    admitted = run(
        venv / "bin" / "kueuestream", "admit", ROOT / "config" / "examples" / "team-queues", cwd=tmp_path
    )
    assert admitted.returncode == 0, admitted.stderr
    assert admitted.stdout.startswith("apiVersion: v1\nkind: List\nitems:\n")
    assert "clusterQueue: team-a" in admitted.stdout
    # Only the one package: nothing claims the top-level names of its folders.
    for name in ("agents", "admission", "streams"):
        imported = run(python, "-c", f"import {name}", cwd=tmp_path)
        assert imported.returncode == 1 and f"No module named '{name}'" in imported.stderr, imported.stderr
    # The dashboard's page, script and style sheet are package data of the wheel.
    assets = run(
        python,
        "-c",
        "from kueuestream.agents.dashboard.routes import ASSETS, asset; "
        "print(sorted((n, len(asset(n)) > 0) for n in [*ASSETS, 'index.html']))",
        cwd=tmp_path,
    )
    assert assets.stdout.strip() == "[('app.js', True), ('index.html', True), ('style.css', True)]", (
        assets.stdout + assets.stderr
    )
