"""koord device-daemon: every label from the H200 capture and the 8-GPU fake node, ``--oneshot`` against the
fake API server over real HTTP, the node-feature-discovery feature file, ``--no-timestamp``, the loop."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent.collectors.gpu import GPUCollector
from agent.devicedaemon import (
    DaemonConfig,
    DeviceDaemon,
    FeatureFileWriter,
    collect,
    manager_map,
)
from agent.devicedaemon.nvidia import NVIDIAManager
from agent.devicedaemon.writer import FEATURE_FILE_HEADER, label_patch
from app.cli.main import cli
from tests.agent.fake_nvml import (
    H200,
    H200_UUID,
    FakeNVML,
    eight_gpu_capture,
    eight_gpu_sys,
    h200_capture,
    h200_sys,
)
from tests.client.conftest import TOKEN, write_kubeconfig
from tests.client.fake_apiserver import FakeAPIServer

NOW = 1_796_000_000
TS = "node.koordinator.sh/device-daemon-timestamp"

H200_LABELS = {
    "node.koordinator.sh/gpu-vendor": "nvidia",
    "node.koordinator.sh/gpu-model": "H200",
    "node.koordinator.sh/gpu-count": "1",
    "node.koordinator.sh/gpu-memory": "143771Mi",  # 150,754,820,096 bytes, nvidia-smi's 143771 MiB
    "node.koordinator.sh/gpu-driver-version": "580.159.04",
    "node.koordinator.sh/gpu-cuda-version": "13.0",
}
EIGHT_GPU_LABELS = {
    "node.koordinator.sh/gpu-vendor": "nvidia",
    "node.koordinator.sh/gpu-model": "A100-SXM4-80GB",
    "node.koordinator.sh/gpu-count": "8",
    "node.koordinator.sh/gpu-memory": "80Gi",
    "node.koordinator.sh/gpu-driver-version": "535.129.03",
    "node.koordinator.sh/gpu-cuda-version": "12.2",
    "node.koordinator.sh/rdma-count": "4",
}
#: One line of a node-feature-discovery feature file: ``[<ns>/]<name>[=<value>]`` with a valid label name
#: and value, or a ``#`` comment.
NFD_LINE = re.compile(
    r"^(?:#.*|(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
    r"(?:=(?:[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?)?)$"
)


def parse_feature_file(text: str) -> dict[str, str]:
    """Read a feature file as nfd-worker's local source does: skip comments, ``name`` alone means ``true``."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        assert NFD_LINE.match(line), f"not an NFD feature line: {line!r}"
        if line.startswith("#") or not line:
            continue
        key, _, value = line.partition("=")
        out[key] = value if "=" in line else "true"
    return out


# -- labels ------------------------------------------------------------------------------------------


def test_h200_capture_makes_every_label(tmp_path: Path) -> None:
    managers = manager_map(nvml=FakeNVML(h200_capture()), sys_root=h200_sys(tmp_path).root)
    prints = collect(managers, NOW)
    assert prints.labels == {**H200_LABELS, TS: str(NOW)}
    assert list(prints.labels) == sorted(prints.labels)
    [gpu] = prints.devices
    assert gpu.to_json() == {
        "vendor": "nvidia",
        "model": "H200",
        "uuid": H200_UUID,
        "minor": "0",
        "resources": {
            "koordinator.sh/gpu-core": "100",
            "koordinator.sh/gpu-memory": "143771Mi",
            "koordinator.sh/gpu-memory-ratio": "100",
        },
        # numa_node -1 on that VM: no nodeID, as the agent leaves the Device topology out
        "topology": {"pcieID": "pci0000:00", "busID": "0000:00:06.0"},
        "status": {"healthy": True},
    }


def test_eight_gpu_node_makes_every_label_and_prints_sorted_by_minor(tmp_path: Path) -> None:
    managers = manager_map(nvml=FakeNVML(eight_gpu_capture()), sys_root=eight_gpu_sys(tmp_path).root)
    assert list(managers) == ["nvidia", "rdma"]
    prints = collect(managers, None)
    assert prints.labels == EIGHT_GPU_LABELS
    gpus = [d for d in prints.devices if d.vendor == "nvidia"]
    nics = [d for d in prints.devices if d.vendor == "rdma"]
    assert [g.minor for g in gpus] == [str(m) for m in range(8)]
    assert {g.topology.node_id for g in gpus if g.topology} == {"0", "1"}  # from sysfs, NVML said NotSupported
    assert [(n.uuid, n.model, n.healthy) for n in nics] == [
        ("0000:1c:00.0", "mlx5", True),
        ("0000:3f:00.0", "mlx5", True),
        ("0000:62:00.0", "mlx5", True),
        ("0000:85:00.0", "mlx5", False),  # mlx5_3's port is DOWN
    ]
    assert nics[1].resources == {"koordinator.sh/rdma": "100"}


def test_unhealthy_gpu_is_printed_with_its_reason_and_still_counted(tmp_path: Path) -> None:
    nvml = FakeNVML(eight_gpu_capture())
    manager = NVIDIAManager(GPUCollector(nvml, sys_root=eight_gpu_sys(tmp_path).root))
    manager.devices()
    nvml.failing.add(0)  # NVML index 0 is minor 7
    devices = manager.devices()
    assert (devices[7].minor, devices[7].healthy, devices[7].err_code) == ("7", False, "NVMLError")
    assert manager.labels(devices)["node.koordinator.sh/gpu-count"] == "8"


def test_no_gpu_and_no_nic_makes_no_device_label(tmp_path: Path) -> None:
    prints = collect(manager_map(nvml=None, sys_root=tmp_path), NOW)
    assert prints.devices == [] and prints.labels == {TS: str(NOW)}


def test_a_model_that_is_no_label_value_is_left_out(tmp_path: Path) -> None:
    capture = h200_capture()
    capture["devices"][0]["name"] = "NVIDIA H200 (prototype)"
    prints = collect(manager_map(nvml=FakeNVML(capture), sys_root=h200_sys(tmp_path).root), None)
    assert "node.koordinator.sh/gpu-model" not in prints.labels
    assert prints.labels["node.koordinator.sh/gpu-count"] == "1"


def test_label_patch_sets_changes_and_removes_only_owned_stale_labels() -> None:
    current = {"team": "a", "node.koordinator.sh/gpu-count": "2", "node.koordinator.sh/rdma-count": "1", TS: "1"}
    assert label_patch(current, {"node.koordinator.sh/gpu-count": "2"}) == {
        "node.koordinator.sh/rdma-count": None,
        TS: None,
    }
    assert label_patch({"node.koordinator.sh/gpu-count": "2"}, {"node.koordinator.sh/gpu-count": "2"}) == {}


# -- --oneshot against the fake API server ------------------------------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeAPIServer]:
    f = FakeAPIServer(tokens={TOKEN})
    yield f
    f.close()


def seed_node(fake: FakeAPIServer, labels: dict[str, str]) -> None:
    fake.seed("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1", "labels": labels}})


def node_labels(fake: FakeAPIServer) -> dict[str, str]:
    labels: dict[str, str] = fake.store["/api/v1/nodes"]["gpu-1"]["metadata"]["labels"]
    return dict(labels)


def run(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(cli, ["device-daemon", *args], env=env)


def test_oneshot_labels_the_node_on_the_api_server_and_exits_0(fake: FakeAPIServer, tmp_path: Path) -> None:
    seed_node(fake, {"team": "ml", "node.koordinator.sh/rdma-count": "9", "node.koordinator.sh/gpu-count": "3"})
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake.url)
    capture = tmp_path / "nvml.json"
    capture.write_text(json.dumps(eight_gpu_capture()))
    sys_root = eight_gpu_sys(tmp_path / "sys").root
    args = ["--oneshot", "--node-name", "gpu-1", "--kubeconfig", kubeconfig, "--nvml-capture", str(capture)]
    result = run(*args, "--sys-root", str(sys_root))
    assert result.exit_code == 0, result.output
    labels = node_labels(fake)
    stamp = labels.pop(TS)
    assert stamp.isdigit()
    assert labels == {"team": "ml", **EIGHT_GPU_LABELS}
    [patch] = fake.calls("PATCH")
    assert patch.headers["content-type"] == "application/merge-patch+json"
    assert patch.path == "/api/v1/nodes/gpu-1"

    # the same round again with --no-timestamp: the timestamp label is removed, nothing else sent
    result = run(*args, "--sys-root", str(sys_root), "--no-timestamp")
    assert result.exit_code == 0, result.output
    assert node_labels(fake) == {"team": "ml", **EIGHT_GPU_LABELS}
    assert fake.calls("PATCH")[-1].body == {"metadata": {"labels": {TS: None}}}

    # a third identical round writes nothing
    assert run(*args, "--sys-root", str(sys_root), "--no-timestamp").exit_code == 0
    assert len(fake.calls("PATCH")) == 2


def test_oneshot_with_the_h200_capture_and_no_timestamp_from_the_environment(
    fake: FakeAPIServer, tmp_path: Path
) -> None:
    seed_node(fake, {})
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake.url)
    env = {"KDD_ONESHOT": "true", "KDD_NO_TIMESTAMP": "true", "NODE_NAME": "gpu-1"}
    sys_root = h200_sys(tmp_path / "sys").root
    result = run(
        "--kubeconfig", kubeconfig, "--nvml-capture", str(H200 / "nvml.json"), "--sys-root", str(sys_root), env=env
    )
    assert result.exit_code == 0, result.output
    assert node_labels(fake) == H200_LABELS


def test_oneshot_on_a_missing_node_exits_1_naming_it(fake: FakeAPIServer, tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake.url)
    result = run(
        "--oneshot", "--node-name", "nope", "--kubeconfig", kubeconfig, "--no-gpu", "--sys-root", "/nonexistent"
    )
    assert result.exit_code == 1
    assert "node nope not found" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sleep-interval", "soon"], "--sleep-interval: invalid duration 'soon'"),
        (["--sleep-interval", "0s"], "--sleep-interval must be > 0"),
        (["--oneshot"], "--node-name (or NODE_NAME) is required"),
        (["--oneshot", "--nvml-capture", "/nonexistent/nvml.json", "--node-name", "n"], "--nvml-capture"),
    ],
)
def test_bad_flags_exit_2_with_a_clear_error(args: list[str], message: str) -> None:
    result = run(*args, "--no-gpu")
    assert result.exit_code == 2
    assert message in result.output


# -- the feature file ---------------------------------------------------------------------------------


def test_feature_file_is_nfd_format_with_every_label(tmp_path: Path) -> None:
    out = tmp_path / "features.d" / "koord-device"
    sys_root = h200_sys(tmp_path / "sys").root
    result = run("--oneshot", "--nvml-capture", str(H200 / "nvml.json"), "--sys-root", str(sys_root),
                 "--prints-output-file", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert text.endswith("\n") and text.splitlines()[0] == FEATURE_FILE_HEADER
    features = parse_feature_file(text)
    assert features.pop(TS).isdigit()
    assert features == H200_LABELS
    keys = [line.partition("=")[0] for line in text.splitlines()[1:]]
    assert keys == sorted(keys)
    assert oct(out.stat().st_mode & 0o777) == "0o644"
    assert not [p for p in out.parent.iterdir() if p != out]  # no temporary file left behind

    assert run("--oneshot", "--nvml-capture", str(H200 / "nvml.json"), "--sys-root", str(sys_root),
               "--prints-output-file", str(out), "--no-timestamp").exit_code == 0  # fmt: skip
    assert parse_feature_file(out.read_text()) == H200_LABELS


def test_feature_file_path_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    result = run("--oneshot", "--no-gpu", "--prints-output-file", str(tmp_path))
    assert result.exit_code == 2
    assert "is a directory" in result.output


# -- the loop -----------------------------------------------------------------------------------------


class CountingWriter(FeatureFileWriter):
    """A feature-file writer that stops the daemon after ``rounds`` writes."""

    def __init__(self, path: Path, stop: threading.Event, rounds: int) -> None:
        super().__init__(path)
        self.stop, self.left, self.seen = stop, rounds, []

    def output(self, labels: dict[str, str]) -> bool:
        self.seen.append(dict(labels))
        self.left -= 1
        if self.left == 0:
            self.stop.set()
        return super().output(labels)


def test_loop_rescans_every_interval_and_removes_its_file_on_stop(tmp_path: Path) -> None:
    stop = threading.Event()
    nvml = FakeNVML(h200_capture())
    writer = CountingWriter(tmp_path / "koord-device", stop, 3)
    ticks = iter(range(NOW, NOW + 10))
    daemon = DeviceDaemon(
        manager_map(nvml=nvml, sys_root=h200_sys(tmp_path / "sys").root),
        writer,
        DaemonConfig(sleep_interval=0.01),
        clock=lambda: next(ticks),
    )
    daemon.run(stop)
    assert daemon.rounds == 3
    assert [s[TS] for s in writer.seen] == [str(NOW), str(NOW + 1), str(NOW + 2)]
    assert not writer.path.exists()


def test_sleep_interval_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sleep interval must be > 0"):
        DeviceDaemon({}, FeatureFileWriter(tmp_path / "f"), DaemonConfig(sleep_interval=0))
