"""The /ui page in headless Chromium (Debian's /usr/bin/chromium driven by playwright; no browser download):
it loads from the embedded example, shows the hot node over its threshold and the quota tree, explains the
pending pod on a click, and its screenshot is not blank; with a Device object it draws each GPU's share.
The browser is driven from a process of its own (ui_browser_driver.py). Skips, saying why, without
chromium or playwright."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.sources.files import FileSource
from tests.conftest import EXAMPLE_CLUSTER, LiveServer

CHROMIUM = Path("/usr/bin/chromium")
DRIVER = Path(__file__).with_name("ui_browser_driver.py")

if not CHROMIUM.exists():
    pytest.skip(f"no {CHROMIUM} (apt-get install -y chromium)", allow_module_level=True)
if importlib.util.find_spec("playwright") is None:
    pytest.skip("playwright is not installed (pip install playwright)", allow_module_level=True)

#: Where the example's screenshot is copied when set (to look at it); it stays in a temporary folder otherwise.
SCREENSHOT = os.environ.get("KOORD_UI_SCREENSHOT")


def _colours(png: bytes) -> int:
    """How many distinct colours a PNG has (a blank page has one or two)."""
    pil = pytest.importorskip("PIL.Image", reason="Pillow (matplotlib's dependency) reads the screenshot")
    image = pil.open(io.BytesIO(png)).convert("RGB")
    return len(image.getcolors(maxcolors=image.width * image.height) or [])


def _show(url: str, wait_for: str, screenshot: Path, explain: bool = False) -> dict[str, Any]:
    """What the page at ``url`` shows (see ui_browser_driver.py); fails on any uncaught script error."""
    args = [sys.executable, str(DRIVER), url, wait_for, str(screenshot), *(["--explain"] if explain else [])]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    assert shown["errors"] == []
    return shown


def test_example_cluster_in_headless_chromium(example_server: LiveServer, tmp_path: Path) -> None:
    png_path = tmp_path / "ui.png"
    shown = _show(f"{example_server.url}/ui", 'tr[data-node="node-hot"]', png_path, explain=True)
    assert shown["nodeOrder"][0] == "node-hot"  # most loaded first
    hot_row = next(line for line in shown["nodes"].splitlines() if line.startswith("node-hot"))
    assert "over threshold" in hot_row
    assert "80%" in shown["nodes"]
    assert "koordinator-root-quota" in shown["quotas"] and "koordinator-default-quota" in shown["quotas"]
    assert "unlimited" in shown["quotas"]
    assert "No node reports GPUs" in shown["gpus"]
    assert "Why pod batch/batch-job-1 goes where" in shown["explain"]
    assert "node(s) cpu usage exceed threshold" in shown["explain"]
    if SCREENSHOT:
        shutil.copyfile(png_path, SCREENSHOT)
    png = png_path.read_bytes()
    assert len(png) > 20_000
    assert _colours(png) > 50


def test_gpu_shares_in_headless_chromium(tmp_path: Path) -> None:
    """node-idle with two GPUs, half of GPU 0 taken by a bound pod: the page shows 50 % and 0 %."""
    cluster = tmp_path / "cluster"
    shutil.copytree(EXAMPLE_CLUSTER, cluster)
    core, ratio = "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory-ratio"
    gpu = {core: "100", ratio: "100", "koordinator.sh/gpu-memory": "16Gi"}
    device = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": "node-idle"},
        "spec": {
            "devices": [{"type": "gpu", "id": f"GPU-{m}", "minor": m, "health": True, "resources": gpu} for m in (0, 1)]
        },
    }
    allocated = {"gpu": [{"minor": 0, "resources": {core: "50", ratio: "50"}}]}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-1",
            "namespace": "default",
            "annotations": {"scheduling.koordinator.sh/device-allocated": json.dumps(allocated)},
        },
        "spec": {
            "nodeName": "node-idle",
            "containers": [{"name": "c", "resources": {"requests": {core: "50", ratio: "50"}}}],
        },
        "status": {"phase": "Running"},
    }
    (cluster / "devices.yaml").write_text(yaml.safe_dump_all([device, pod]))
    with LiveServer(FileSource(cluster, poll_interval=0)) as srv:
        gpus = _show(f"{srv.url}/ui", "#gpus .gpu", tmp_path / "gpu.png")["gpus"]
    assert "node-idle" in gpus
    assert "GPU 0: core 50%" in gpus and "GPU 1: core 0%" in gpus
    assert "memory 50%" in gpus
