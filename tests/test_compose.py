"""docker-compose.yml cannot run here (no Docker engine); its shape is checked instead."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

from kueuestream.agents.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]


def _compose() -> dict:  # type: ignore[type-arg]
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def test_kafka_runs_in_kraft_mode_with_single_node_exactly_once_settings() -> None:
    kafka = _compose()["services"]["kafka"]
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{env['KAFKA_NODE_ID']}@kafka:9093"
    for key in (
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR",
    ):
        assert env[key] == 1
    listeners = dict(item.split("://") for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    assert listeners == {"PLAINTEXT": "kafka:9092", "EXTERNAL": "localhost:29092"}
    assert "29092:29092" in kafka["ports"]


def test_two_workers_share_the_broker_and_mount_config() -> None:
    services = _compose()["services"]
    workers = {name: svc for name, svc in services.items() if name.startswith("worker-")}
    assert sorted(workers) == ["worker-1", "worker-2"]
    parser = build_parser()
    datadirs = set()
    instances = set()
    for svc in workers.values():
        command = svc["command"]
        assert command[0] == "kueuestream"
        args = parser.parse_args(command[1:])  # the CLI accepts exactly this command line
        assert (args.command, args.broker) == ("worker", "kafka://kafka:9092")
        datadirs.add(next(v for v in svc["volumes"] if v.endswith(args.datadir)))
        instances.add(args.instance_id)
        assert "./config:/config:ro" in svc["volumes"]
        assert svc["depends_on"]["kafka"]["condition"] == "service_healthy"
        assert svc["build"] == "."
    # Each worker keeps its Faust state apart, and is a static group member under its own id.
    assert len(datadirs) == 2
    assert len(instances) == 2 and None not in instances


def test_the_worker_image_installs_the_console_script(tmp_path: Path) -> None:
    """The Dockerfile's COPY lines carry everything a wheel of the package needs.

    No Docker engine here, so the build context is rebuilt by hand: only what the
    Dockerfile copies goes into a folder, and pip builds the wheel from it, as
    ``pip install .`` in the image would.
    """
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert dockerfile.startswith("# ") and "FROM python:3.11" in dockerfile
    assert "pip install --no-cache-dir ." in dockerfile
    context = tmp_path / "src"
    context.mkdir()
    for line in dockerfile.splitlines():
        if not line.startswith("COPY "):
            continue
        *sources, target = line.split()[1:]
        for source in sources:
            dest = context / (source if target.endswith("/") or target == "./" else target)
            if (ROOT / source).is_dir():
                shutil.copytree(ROOT / source, dest, symlinks=True)
            else:
                shutil.copy2(ROOT / source, dest)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), "."],
        cwd=context,
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("kueuestream-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "kueuestream/agents/cli/main.py" in names
    assert "kueuestream/admission/engine.py" in names
    assert "kueuestream/streams/file_log.py" in names
    assert {name.split("/")[0] for name in names if not name.startswith("kueuestream-")} == {"kueuestream"}
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    console_scripts = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "kueuestream = kueuestream.agents.cli.main:main" in console_scripts
