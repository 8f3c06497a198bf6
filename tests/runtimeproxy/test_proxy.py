"""koord runtime-proxy between a fake kubelet (this test's client) and a fake containerd (FakeCRI), both over
unix sockets under tmp_path: pass-through is byte-identical, hooked calls carry the hook server's answer, and a
hook server that is down or slow changes nothing and is counted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from app.api.runtime.config import FailurePolicy, RuntimeHookType, hook_config_json
from runtimeproxy.cri.v1 import api_pb2 as cri
from runtimeproxy.options import Options
from runtimeproxy.server import RuntimeProxyServer
from tests.runtimeproxy.fakes import IS, RS, FakeCRI, FakeHookServer, hook_registrar, serve

ALL_HOOKS = list(RuntimeHookType)


@dataclass
class Rig:
    backend: FakeCRI
    proxy: RuntimeProxyServer
    channel: grpc.Channel
    hooks_dir: Path
    tmp: Path

    def call(self, method: str, raw: bytes, **kw: object) -> bytes:
        return self.channel.unary_unary(method)(raw, timeout=5, **kw)  # type: ignore[no-any-return]

    def register(self, endpoint: Path, policy: FailurePolicy = FailurePolicy.IGNORE) -> None:
        (self.hooks_dir / "koordlet.json").write_text(hook_config_json(str(endpoint), policy, ALL_HOOKS))


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    backend = FakeCRI()
    server = serve(backend, tmp_path / "cri.sock")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    opts = Options(
        runtime_proxy_endpoint=str(tmp_path / "proxy.sock"),
        remote_runtime_service_endpoint=str(tmp_path / "cri.sock"),
        runtime_hooks_config_path=hooks,
        hook_timeout=0.3,
    )
    proxy = RuntimeProxyServer(opts)
    proxy.dispatcher.configs.recheck = 0.0
    proxy.start(fail_over_timeout=2)
    channel = grpc.insecure_channel(f"unix://{tmp_path / 'proxy.sock'}")
    try:
        yield Rig(backend, proxy, channel, hooks, tmp_path)
    finally:
        channel.close()
        proxy.stop(0)
        server.stop(0)


def sandbox_config(labels: dict[str, str] | None = None) -> cri.PodSandboxConfig:
    return cri.PodSandboxConfig(
        metadata=cri.PodSandboxMetadata(name="half-gpu", uid="uid-1", namespace="default"),
        labels=labels or {"app": "train"},
        annotations={"scheduling.koordinator.sh/device-allocated": '{"gpu":[{"minor":0,"id":"GPU-aa"}]}'},
        linux=cri.LinuxPodSandboxConfig(cgroup_parent="/kubepods/burstable/poduid-1"),
    )


def create_request(labels: dict[str, str] | None = None) -> cri.CreateContainerRequest:
    return cri.CreateContainerRequest(
        pod_sandbox_id="sb-1",
        config=cri.ContainerConfig(
            metadata=cri.ContainerMetadata(name="train"),
            image=cri.ImageSpec(image="busybox"),
            envs=[cri.KeyValue(key="PATH", value=b"/bin"), cri.KeyValue(key="HOME", value=b"/root")],
            linux=cri.LinuxContainerConfig(resources=cri.LinuxContainerResources(cpu_shares=512, oom_score_adj=999)),
        ),
        sandbox_config=sandbox_config(labels),
    )


def test_other_calls_pass_through_byte_identical(rig: Rig) -> None:
    # a request with an unknown field (99) and fields out of canonical order: re-encoding would change it
    raw_version = b"\xfa\x06\x02hi" + cri.VersionRequest(version="v1").SerializeToString()
    assert rig.call(RS + "Version", raw_version, metadata=(("x-trace", "t1"),)) == rig.backend.answers[RS + "Version"]
    raw_img = cri.ListImagesRequest(filter=cri.ImageFilter(image=cri.ImageSpec(image="busybox"))).SerializeToString()
    rig.call(IS + "ListImages", raw_img)
    future = b"\x08\x01\x12\x02zz"
    assert rig.call(RS + "SomeFutureMethod", future) == b"\x0a\x03abc" + future  # unknown to our proto
    got = {m: raw for m, raw, _ in rig.backend.calls}
    assert got[RS + "Version"] == raw_version
    assert got[IS + "ListImages"] == raw_img
    assert got[RS + "SomeFutureMethod"] == future
    version_md = next(md for m, _, md in rig.backend.calls if m == RS + "Version")
    assert version_md.get("x-trace") == "t1"


def test_a_call_without_a_deadline_passes_through(rig: Rig) -> None:
    """kubelet sends ImageFsInfo (and streams) with no deadline: the backend answers, not an instant
    DEADLINE_EXCEEDED (gRPC reports "no deadline" as ~2^63 s remaining, which overflowed as a timeout)."""
    assert rig.channel.unary_unary(IS + "ImageFsInfo")(b"") == b"\x0a\x03abc"
    events = list(rig.channel.unary_stream(RS + "GetContainerEvents")(b""))
    assert len(events) == 3


def test_streams_and_errors_pass_through(rig: Rig) -> None:
    events = list(rig.channel.unary_stream(RS + "GetContainerEvents")(b"", timeout=5))
    assert [cri.ContainerEventResponse.FromString(e).container_id for e in events] == ["c0", "c1", "c2"]
    with pytest.raises(grpc.RpcError) as err:
        rig.call(RS + "RemoveContainer", cri.RemoveContainerRequest(container_id="ctr-9").SerializeToString())
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert err.value.details() == "container ctr-9 not found"
    assert ("why", "gone") in tuple(err.value.trailing_metadata() or ())


def test_hooked_create_container_carries_merged_env_and_resources(rig: Rig) -> None:
    hook = FakeHookServer({"NVIDIA_VISIBLE_DEVICES": "GPU-aa"}, shares=2, cpuset="0-1")
    hs = serve(hook_registrar(hook), rig.tmp / "hook.sock")
    try:
        rig.register(rig.tmp / "hook.sock")
        rig.call(RS + "RunPodSandbox", cri.RunPodSandboxRequest(config=sandbox_config()).SerializeToString())
        answer = rig.call(RS + "CreateContainer", create_request().SerializeToString())
        assert cri.CreateContainerResponse.FromString(answer).container_id == "ctr-1"
        sent = cri.CreateContainerRequest.FromString(rig.backend.calls[-1][1])
        assert [(e.key, e.value) for e in sent.config.envs] == [
            ("PATH", b"/bin"),
            ("HOME", b"/root"),
            ("NVIDIA_VISIBLE_DEVICES", b"GPU-aa"),
        ]
        res = sent.config.linux.resources
        assert (res.cpu_shares, res.cpuset_cpus, res.oom_score_adj) == (2, "0-1", 999)
        assert sent.config.image.image == "busybox"  # the rest is untouched
        # the hook server saw the pod's annotations (from RunPodSandbox, remembered by sandbox id)
        name, req = hook.seen[-1]
        assert name == "PreCreateContainerHook"
        assert req.pod_meta.uid == "uid-1" and "scheduling.koordinator.sh/device-allocated" in req.pod_annotations
        # StartContainer knows the container by id: pre and post hooks with the pod's metadata
        rig.call(RS + "StartContainer", cri.StartContainerRequest(container_id="ctr-1").SerializeToString())
        assert [n for n, _ in hook.seen[-2:]] == ["PreStartContainerHook", "PostStartContainerHook"]
        assert hook.seen[-1][1].container_meta.id == "ctr-1" and hook.seen[-1][1].pod_meta.name == "half-gpu"
        # UpdateContainerResources: the hook's answer replaces the update's cpuset
        upd = cri.UpdateContainerResourcesRequest(
            container_id="ctr-1", linux=cri.LinuxContainerResources(cpu_shares=1024, cpuset_cpus="0-3")
        )
        rig.call(RS + "UpdateContainerResources", upd.SerializeToString())
        sent_upd = cri.UpdateContainerResourcesRequest.FromString(rig.backend.calls[-1][1])
        assert (sent_upd.linux.cpu_shares, sent_upd.linux.cpuset_cpus) == (2, "0-1")
        assert rig.proxy.dispatcher.failures() == 0
    finally:
        hs.stop(0)


def test_hook_server_pod_is_never_hooked(rig: Rig) -> None:
    hook = FakeHookServer({"X": "1"})
    hs = serve(hook_registrar(hook), rig.tmp / "hook.sock")
    try:
        rig.register(rig.tmp / "hook.sock")
        raw = create_request({"runtimeproxy.koordinator.sh/skip-hookserver": "true"}).SerializeToString()
        rig.call(RS + "CreateContainer", raw)
        assert rig.backend.calls[-1][1] == raw and hook.seen == []
    finally:
        hs.stop(0)


def test_hook_server_down_sends_the_request_unchanged_and_counts(rig: Rig) -> None:
    rig.register(rig.tmp / "nobody.sock")
    raw = create_request().SerializeToString()
    t0 = time.monotonic()
    answer = rig.call(RS + "CreateContainer", raw)
    assert time.monotonic() - t0 < 1.0
    assert cri.CreateContainerResponse.FromString(answer).container_id == "ctr-1"
    assert rig.backend.calls[-1][1] == raw
    assert rig.proxy.dispatcher.failures() == 1
    sample = rig.proxy.dispatcher.registry.get_sample_value(
        "koord_runtime_proxy_hook_requests_total", {"hook": "PreCreateContainer", "result": "UNAVAILABLE"}
    )
    assert sample == 1


def test_slow_hook_server_times_out_and_the_request_goes_on(rig: Rig) -> None:
    hook = FakeHookServer({"LATE": "1"}, delay=0.8)
    hs = serve(hook_registrar(hook), rig.tmp / "hook.sock")
    try:
        rig.register(rig.tmp / "hook.sock")
        raw = create_request().SerializeToString()
        t0 = time.monotonic()
        rig.call(RS + "CreateContainer", raw)
        assert time.monotonic() - t0 < 0.75  # the 0.3 s hook timeout, not the hook's 0.8 s
        assert rig.backend.calls[-1][1] == raw
        assert (
            rig.proxy.dispatcher.registry.get_sample_value(
                "koord_runtime_proxy_hook_requests_total",
                {"hook": "PreCreateContainer", "result": "DEADLINE_EXCEEDED"},
            )
            == 1
        )
    finally:
        hs.stop(0)


def test_failure_policy_fail_returns_the_error(rig: Rig) -> None:
    rig.register(rig.tmp / "nobody.sock", FailurePolicy.FAIL)
    with pytest.raises(grpc.RpcError) as err:
        rig.call(RS + "CreateContainer", create_request().SerializeToString())
    assert "hook server err" in (err.value.details() or "")
    assert not any(m == RS + "CreateContainer" for m, _, _ in rig.backend.calls)


def test_no_registration_means_no_hook_and_identical_bytes(rig: Rig) -> None:
    raw = cri.RunPodSandboxRequest(config=sandbox_config()).SerializeToString()
    rig.call(RS + "RunPodSandbox", raw)
    assert rig.backend.calls[-1][1] == raw
    assert rig.proxy.proxy.store.sizes() == (1, 0)


def test_a_proxy_started_before_containerd_learns_its_pods_later(tmp_path: Path) -> None:
    opts = Options(
        runtime_proxy_endpoint=str(tmp_path / "proxy.sock"),
        remote_runtime_service_endpoint=str(tmp_path / "cri.sock"),
        runtime_hooks_config_path=tmp_path / "hooks",
    )
    proxy = RuntimeProxyServer(opts)
    proxy.start(fail_over_timeout=0.2, retry_every=0.05)  # containerd is not there yet
    backend = FakeCRI()
    backend.answers[RS + "ListPodSandbox"] = cri.ListPodSandboxResponse(
        items=[cri.PodSandbox(id="sb-7", metadata=cri.PodSandboxMetadata(name="p", uid="u7", namespace="d"))]
    ).SerializeToString()
    server = serve(backend, tmp_path / "cri.sock")
    try:
        deadline = time.monotonic() + 1.5
        while proxy.proxy.store.sizes() != (1, 0) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proxy.proxy.store.sizes() == (1, 0)
        assert proxy.proxy.store.pod("sb-7").pod_meta.uid == "u7"  # type: ignore[union-attr]
    finally:
        proxy.stop(0)
        server.stop(0)
