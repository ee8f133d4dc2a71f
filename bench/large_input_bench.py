"""validate and admit on a large folder: wall time, CPU time and peak memory.

Run: .venv/bin/python bench/large_input_bench.py [--workloads 174000] [--queues 20] [--per-file 1000]

Generates, in a temporary folder, one ResourceFlavor, a Cohort, ``--queues``
ClusterQueues (each with a LocalQueue in a namespace of its own) and
``--workloads`` Workloads of about 290 bytes each (the default makes about
50 MB), ``--per-file`` documents to a file. Then runs ``kueuestream validate``
and ``kueuestream admit`` on it, each in a child process of its own, and
prints for each its wall time, CPU time (user + system, which a busy machine
inflates less than wall time) and peak resident memory.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUEUE = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: cq-{q}}}
spec:
  namespaceSelector: {{}}
  cohortName: all
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources: [{{name: cpu, nominalQuota: 2000}}, {{name: memory, nominalQuota: 8000Gi}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: lq, namespace: team-{q}}}
spec: {{clusterQueue: cq-{q}}}
"""
WORKLOAD = """apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {{name: job-{i:06d}, namespace: team-{q}, labels: {{app: train}}}}
spec:
  queueName: lq
  podSets:
  - name: main
    count: {count}
    template: {{spec: {{containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}", memory: 2Gi}}}}}}]}}}}
"""


def generate(folder: Path, workloads: int, queues: int, per_file: int) -> int:
    """Write the input; its size in bytes."""
    header = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: default}\n---\n"
    header += "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: all}\n"
    (folder / "00-queues.yaml").write_text(
        header + "".join(f"---\n{QUEUE.format(q=q)}" for q in range(queues))
    )
    for start in range(0, workloads, per_file):
        docs = [
            WORKLOAD.format(i=i, q=i % queues, count=1 + i % 4, cpu=1 + i % 3)
            for i in range(start, min(workloads, start + per_file))
        ]
        (folder / f"wl-{start // per_file:05d}.yaml").write_text("---\n".join(docs))
    return sum(p.stat().st_size for p in folder.iterdir())


def measure(command: list[str], out: Path) -> tuple[int, float, float, int]:
    """Exit code, wall seconds, CPU seconds and peak RSS (bytes) of one child process."""
    started = time.perf_counter()
    with out.open("wb") as sink:
        child = subprocess.Popen(command, stdout=sink, stderr=subprocess.PIPE)
        assert child.stderr is not None
        err = child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        print(err.decode(errors="replace")[-2000:], file=sys.stderr)
    return code, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", type=int, default=174_000)
    parser.add_argument("--queues", type=int, default=20)
    parser.add_argument("--per-file", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "input"
        folder.mkdir()
        size = generate(folder, args.workloads, args.queues, args.per_file)
        files = len(list(folder.iterdir()))
        print(f"input: {args.workloads:,} Workloads, {args.queues} ClusterQueues", end="")
        print(f", {files} files, {size / 1e6:.1f} MB")
        for name in ("validate", "admit"):
            out = Path(tmp) / f"{name}.out"
            code, wall, cpu, rss = measure([sys.executable, "-m", "kueuestream", name, str(folder)], out)
            extra = f", output {out.stat().st_size / 1e6:.1f} MB" if name == "admit" else ""
            print(f"{name:<8} exit {code}: wall {wall:6.1f} s, cpu {cpu:6.1f} s", end="")
            print(f", peak RSS {rss / 2**30:.2f} GiB{extra}")


if __name__ == "__main__":
    main()
