"""The /ui page in headless Chromium (Debian's /usr/bin/chromium driven by playwright; no browser download):
it loads from the embedded example, shows the hot node over its threshold and the quota tree, explains the
pending pod on a click, and its screenshot is not blank; with a Device object it draws each GPU's share.
Skips, saying why, without chromium or playwright."""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.sources.files import FileSource
from tests.conftest import EXAMPLE_CLUSTER, LiveServer

CHROMIUM = Path("/usr/bin/chromium")

if not CHROMIUM.exists():
    pytest.skip(f"no {CHROMIUM} (apt-get install -y chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")

#: Where the example's screenshot is copied when set (to look at it); it stays in a temporary folder otherwise.
SCREENSHOT = os.environ.get("KOORD_UI_SCREENSHOT")


def _colours(png: bytes) -> int:
    """How many distinct colours a PNG has (a blank page has one or two)."""
    pil = pytest.importorskip("PIL.Image", reason="Pillow (matplotlib's dependency) reads the screenshot")
    image = pil.open(io.BytesIO(png)).convert("RGB")
    return len(image.getcolors(maxcolors=image.width * image.height) or [])


@pytest.fixture
def browser_page() -> Iterator[Any]:
    """A fresh page of headless chromium; the test fails on any uncaught script error."""
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page
            assert errors == []
        finally:
            browser.close()


def test_example_cluster_in_headless_chromium(example_server: LiveServer, browser_page: Any, tmp_path: Path) -> None:
    page = browser_page
    page.goto(f"{example_server.url}/ui")
    hot = page.locator('tr[data-node="node-hot"]')
    hot.wait_for(timeout=15_000)
    assert "over threshold" in hot.inner_text()
    assert "80%" in hot.inner_text()
    assert page.locator("#nodes tr[data-node]").first.get_attribute("data-node") == "node-hot"  # most loaded first
    page.locator('tr[data-quota="koordinator-default-quota"]').wait_for(timeout=15_000)
    quotas = page.locator("#quotas").inner_text()
    assert "koordinator-root-quota" in quotas and "unlimited" in quotas
    assert "No node reports GPUs" in page.locator("#gpus").inner_text()
    page.get_by_role("button", name="explain").click()
    page.get_by_text("Why pod batch/batch-job-1 goes where").wait_for(timeout=15_000)
    assert "node(s) cpu usage exceed threshold" in page.locator("#explain").inner_text()
    png = page.screenshot(full_page=True)
    (tmp_path / "ui.png").write_bytes(png)
    if SCREENSHOT:
        shutil.copyfile(tmp_path / "ui.png", SCREENSHOT)
    assert len(png) > 20_000
    assert _colours(png) > 50


def test_gpu_shares_in_headless_chromium(tmp_path: Path, browser_page: Any) -> None:
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
        page = browser_page
        page.goto(f"{srv.url}/ui")
        page.locator("#gpus .gpu").first.wait_for(timeout=15_000)
        gpus = page.locator("#gpus").inner_text()
        assert "node-idle" in gpus
        assert "GPU 0: core 50%" in gpus and "GPU 1: core 0%" in gpus
        assert "memory 50%" in gpus
