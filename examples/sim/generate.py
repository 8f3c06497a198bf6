"""Write the small example GPU trace of ``examples/sim/``: ``example_node_list.csv`` and
``example_pod_list.csv``, in the columns of the public Alibaba GPU trace (cluster-trace-gpu-v2023,
"openb"), so ``koord sim`` runs in seconds on a fresh clone.

Node list: ``sn, cpu_milli, memory_mib, gpu, model`` (milli-cores, MiB, GPUs, GPU model). Pod list:
``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time,
deletion_time, scheduled_time`` (``gpu_milli`` is milli-GPU per GPU, 1..1000; times in seconds).

The shapes are drawn with a fixed seed in roughly the proportions of the public trace's default pod list
(about half whole-GPU pods, 40 % GPU shares, 13 % cpu-only, a few multi-GPU pods; LS and BE) and its most
common node types. Nothing is copied from the trace itself.

    python examples/sim/generate.py [--pods 300] [--nodes 24] [--seed 7] [--out-dir examples/sim]
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

#: (gpus, model, cpu_milli, memory_mib, weight): the public trace's most common GPU node types.
NODE_TYPES = (
    (8, "G2", 96000, 393216, 10),
    (2, "T4", 104000, 524288, 7),
    (2, "P100", 64000, 262144, 3),
    (4, "V100M16", 32000, 131072, 2),
    (8, "V100M32", 96000, 786432, 1),
)
#: (num_gpu, kind, weight): kind "whole" = 1000 milli per GPU, "share" = 100..900, "none" = no GPU.
POD_SHAPES = ((1, "whole", 48), (1, "share", 38), (0, "none", 13), (2, "whole", 1), (4, "whole", 1), (8, "whole", 1))
CPU_CHOICES = (1000, 2000, 4000, 6000, 8000, 12000, 16000)
MEMORY_PER_CPU_MIB = (1024, 2048, 4096)

NODE_HEADER = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_HEADER = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)


def node_rows(count: int, rng: random.Random) -> list[tuple[object, ...]]:
    """``count`` nodes named ``example-node-NNNN``, types drawn by weight."""
    types = [t[:4] for t in NODE_TYPES]
    weights = [t[4] for t in NODE_TYPES]
    rows = []
    for i in range(count):
        gpus, model, cpu, mem = rng.choices(types, weights)[0]
        rows.append((f"example-node-{i:04d}", cpu, mem, gpus, model))
    return rows


def pod_rows(count: int, rng: random.Random, models: list[str]) -> list[tuple[object, ...]]:
    """``count`` pods named ``example-pod-NNNN`` arriving over about a day, each living minutes to hours."""
    shapes = [s[:2] for s in POD_SHAPES]
    weights = [s[2] for s in POD_SHAPES]
    rows = []
    now = 0
    for i in range(count):
        num_gpu, kind = rng.choices(shapes, weights)[0]
        gpu_milli = {"whole": 1000, "none": 0}[kind] if kind != "share" else rng.choice(range(100, 1000, 50))
        cpu = rng.choice(CPU_CHOICES) * max(1, num_gpu // 2)
        memory = cpu // 1000 * rng.choice(MEMORY_PER_CPU_MIB)
        spec = rng.choice(models) if num_gpu and rng.random() < 0.1 else ""
        qos = "BE" if rng.random() < 0.4 else "LS"
        now += rng.randint(30, 600)
        deletion = now + rng.randint(300, 6 * 3600)
        rows.append((f"example-pod-{i:04d}", cpu, memory, num_gpu, gpu_milli, spec, qos, "Running", now, deletion, now))
    return rows


def write(path: Path, header: tuple[str, ...], rows: list[tuple[object, ...]]) -> None:
    """Write one CSV (LF line ends, as the public trace)."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> None:
    """Parse the options and write both files."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=24)
    parser.add_argument("--pods", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    nodes = node_rows(args.nodes, rng)
    models = sorted({str(n[4]) for n in nodes})
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write(args.out_dir / "example_node_list.csv", NODE_HEADER, nodes)
    write(args.out_dir / "example_pod_list.csv", POD_HEADER, pod_rows(args.pods, rng, models))


if __name__ == "__main__":
    main()
