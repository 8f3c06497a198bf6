"""Check the agent's GPU discovery and the manager's node resources against ``nvidia-smi`` on a GPU machine.

Runs the agent's discovery (NVML through nvidia-ml-py, sysfs for NUMA / PCIe root / RDMA NICs), prints as
JSON the Device object the agent would write, the node resources and labels the manager would set from it,
what ``nvidia-smi --query-gpu=index,uuid,name,pci.bus_id,memory.total,driver_version
--format=csv,noheader,nounits`` reports, and every mismatch between the two. Per GPU it compares the UUID,
the PCI bus id, the memory total (MiB, as nvidia-smi rounds it), the model label (the normalised name) and
the driver version label; for the node, ``koordinator.sh/gpu-core`` and ``gpu-memory-ratio`` = 100 per GPU
and ``gpu-memory`` = the sum of the totals. ``discovery_ms`` says how long one discovery round took.

Exit codes: 0 everything matches; 1 a mismatch (listed in ``mismatches``); 3 no GPU to check (nvidia-ml-py
missing, no driver, NVML sees no GPU, or no ``nvidia-smi``), with the reason on stderr; 2 bad arguments.

    python bench/gpu_node_check.py [--node-name NAME] [--sys-root /sys]
    python bench/gpu_node_check.py --nvml-capture nvml.json --smi-csv smi.csv   # replay a capture
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent.collectors.gpu import GPUCollector, GPUInfo  # noqa: E402
from agent.collectors.nvml import NVML, RecordedNVML, load_nvml  # noqa: E402
from agent.collectors.pci import sysfs_bus_id  # noqa: E402
from agent.collectors.rdma import discover_rdma  # noqa: E402
from agent.states.device import device_object  # noqa: E402
from app.api import devicenames as dn  # noqa: E402
from app.api.quantity import format_resource  # noqa: E402
from app.manager.deviceresource import device_resources  # noqa: E402

EXIT_MATCH, EXIT_MISMATCH, EXIT_USAGE, EXIT_NO_GPU = 0, 1, 2, 3
MIB = 1 << 20
SMI_FIELDS = "index,uuid,name,pci.bus_id,memory.total,driver_version"


class NoGPU(Exception):
    """Nothing to check on this machine; the message says why."""


def smi_rows(text: str) -> list[dict[str, str]]:
    """Rows of ``nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits``.

    Raises:
        ValueError: a line without the six fields.
    """
    keys = SMI_FIELDS.split(",")
    rows = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(keys):
            raise ValueError(f"nvidia-smi line {n}: expected {len(keys)} fields, got {len(parts)}: {line!r}")
        rows.append(dict(zip(keys, parts, strict=True)))
    return rows


def run_smi() -> str:
    """The query's output from ``nvidia-smi``.

    Raises:
        NoGPU: no nvidia-smi, or it failed.
    """
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise NoGPU("nvidia-smi is not on PATH")
    proc = subprocess.run(
        [exe, f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode != 0:
        raise NoGPU(f"nvidia-smi failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def compare(
    gpus: list[GPUInfo], labels: dict[str, str], resources: dict[str, int | None], rows: list[dict[str, str]]
) -> list[str]:
    """Every difference between the discovered GPUs, the Device labels, the node resources and nvidia-smi's
    rows, as sentences (empty: they match)."""
    out: list[str] = []
    by_uuid = {g.uuid: g for g in gpus}
    if len(gpus) != len(rows):
        out.append(f"the agent found {len(gpus)} GPUs, nvidia-smi lists {len(rows)}")
    total = 0
    for row in rows:
        total += int(row["memory.total"]) * MIB
        gpu = by_uuid.get(row["uuid"])
        if gpu is None:
            out.append(f"GPU {row['uuid']} (nvidia-smi index {row['index']}) was not discovered")
            continue
        if not gpu.healthy:
            out.append(f"GPU {gpu.uuid} is unhealthy: {gpu.reason} {gpu.message}".rstrip())
        if gpu.memory_total // MIB != int(row["memory.total"]):
            out.append(f"GPU {gpu.uuid}: memory {gpu.memory_total // MIB} MiB, nvidia-smi {row['memory.total']} MiB")
        try:
            smi_bus = sysfs_bus_id(row["pci.bus_id"])
        except ValueError:
            smi_bus = row["pci.bus_id"]
        if gpu.bus_id != smi_bus:
            out.append(f"GPU {gpu.uuid}: bus id {gpu.bus_id}, nvidia-smi {smi_bus}")
        if labels.get(dn.LABEL_GPU_MODEL) != dn.gpu_model_label(row["name"]):
            out.append(f"model label {labels.get(dn.LABEL_GPU_MODEL)!r}, nvidia-smi name {row['name']!r}")
        if labels.get(dn.LABEL_GPU_DRIVER_VERSION) != row["driver_version"]:
            out.append(f"driver label {labels.get(dn.LABEL_GPU_DRIVER_VERSION)!r}, nvidia-smi {row['driver_version']}")
    want = {
        dn.RESOURCE_GPU_CORE: 100 * len(rows),
        dn.RESOURCE_GPU_MEMORY_RATIO: 100 * len(rows),
        dn.RESOURCE_GPU: 100 * len(rows),
    }
    for name, value in want.items():
        if resources.get(name) != value:
            out.append(f"node {name} would be {resources.get(name)}, nvidia-smi implies {value}")
    memory = resources.get(dn.RESOURCE_GPU_MEMORY) or 0
    if memory != sum(g.memory_total for g in gpus) or sum(g.memory_total // MIB for g in gpus) * MIB != total:
        out.append(f"node {dn.RESOURCE_GPU_MEMORY} would be {memory} bytes, nvidia-smi's totals sum to {total}")
    return out


def discover(nvml: NVML, node_name: str, sys_root: Path) -> tuple[list[GPUInfo], dict[str, Any]]:
    """The agent's discovery: GPUs and the Device object it would write."""
    collector = GPUCollector(nvml, sys_root=sys_root)
    gpus = collector.discover()
    return gpus, device_object(node_name, None, gpus, discover_rdma(sys_root), collector.driver_version)


def main(argv: list[str] | None = None) -> int:
    """Run the check, print the JSON report; returns the exit code (see the module docstring)."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--node-name", default=socket.gethostname())
    ap.add_argument("--sys-root", type=Path, default=Path("/sys"), help="sysfs mount (default /sys)")
    ap.add_argument("--nvml-capture", type=Path, help="answer NVML from this capture (nvml.json) instead of the driver")
    ap.add_argument("--smi-csv", type=Path, help="read nvidia-smi's query output from this file instead of running it")
    args = ap.parse_args(argv)
    try:
        nvml: NVML | None
        if args.nvml_capture is not None:
            nvml, why = RecordedNVML.from_file(args.nvml_capture), ""
        else:
            nvml, why = load_nvml()
        if nvml is None:
            raise NoGPU(why)
        t0 = time.perf_counter()
        gpus, device = discover(nvml, args.node_name, args.sys_root)
        discovery_ms = round((time.perf_counter() - t0) * 1000, 3)
        if not gpus:
            raise NoGPU("NVML answers but found no GPU")
        smi_text = args.smi_csv.read_text() if args.smi_csv is not None else run_smi()
        rows = smi_rows(smi_text)
    except NoGPU as exc:
        print(f"gpu_node_check: no GPU to check on this machine: {exc}", file=sys.stderr)
        return EXIT_NO_GPU
    except (OSError, ValueError) as exc:
        print(f"gpu_node_check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    planned = device_resources(device)
    resources = {k: v for k, v in planned.resources.items() if v is not None}
    mismatches = compare(gpus, device["metadata"].get("labels") or {}, resources, rows)
    report = {
        "device": device,
        "nodeResources": {k: format_resource(k, v) for k, v in sorted(resources.items())},
        "nodeLabels": planned.labels,
        "nvidiaSmi": rows,
        "mismatches": mismatches,
        "match": not mismatches,
        "discovery_ms": discovery_ms,
    }
    print(json.dumps(report, indent=2))
    return EXIT_MATCH if not mismatches else EXIT_MISMATCH


if __name__ == "__main__":
    sys.exit(main())
