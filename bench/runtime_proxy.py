"""Bench of koord runtime-proxy: what it adds to CRI calls, and its cpu while kubelet idles.

A fake containerd (tests/runtimeproxy/fakes.py, a gRPC server answering canned CRI messages) and the agent's
real hook server run in this process; ``koord runtime-proxy`` runs as a subprocess between them, as deployed.
Measured, over unix sockets under a temporary folder:

1. latency (ms, p50 / p99 over ``--calls``): ``Version`` and ``CreateContainer`` straight to the fake containerd,
   then through the proxy (CreateContainer calls the hook server: cpuset, GPU env);
2. the proxy's cpu (percent of one core, user + system of its process over wall time) and its context switches
   per second (all its threads, from ``/proc/<pid>/task/*/status``) while a kubelet-like client idles with
   ``--pods`` pods: ListPodSandbox and ListContainers every second (the PLEG relist), ListContainerStats every
   10 s, for ``--seconds``.

``--proxy-repo`` runs the proxy of another checkout (e.g. the main branch) in the same harness, to compare.
Prints JSON. Targets (issue 44): CreateContainer p50 through the proxy at most +50 ms; idle cpu < 1 % of a core.

    python bench/runtime_proxy.py [--calls 200] [--pods 20] [--seconds 30] [--proxy-repo PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent.cgroups import CgroupLayout  # noqa: E402
from agent.executor import CgroupExecutor  # noqa: E402
from agent.runtimehooks.server import HookServerOptions, RuntimeHookServer  # noqa: E402
from runtimeproxy.cri.v1 import api_pb2 as cri  # noqa: E402
from tests.runtimeproxy.fakes import RS, AgentEnv, FakeCRI, serve  # noqa: E402


def _ms(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"p50": round(statistics.median(s) * 1000, 3), "p99": round(s[int(len(s) * 0.99) - 1] * 1000, 3)}


def _time(call: grpc.UnaryUnaryMultiCallable, raw: bytes, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        call(raw, timeout=5)
        out.append(time.perf_counter() - t0)
    return out


def _wait_socket(path: Path, proc: subprocess.Popen[bytes], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"koord runtime-proxy did not start: {proc.stderr.read() if proc.stderr else ''!r}")
        time.sleep(0.05)


def _ctx_switches(pid: int) -> int:
    """Voluntary + involuntary context switches of every thread of ``pid`` so far."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            lines = (task / "status").read_text().splitlines()
        except OSError:
            continue  # a thread that ended meanwhile
        total += sum(int(line.split()[1]) for line in lines if "ctxt_switches" in line)
    return total


def main() -> None:
    """Run the bench and print the JSON result."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--pods", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--proxy-repo", type=Path, default=REPO, help="checkout whose runtimeproxy runs (default: this)")
    ap.add_argument("--proxy-env", action="append", default=[], help="KEY=VALUE set for the proxy process only")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rp-") as tmp:
        base = Path(tmp)
        backend = FakeCRI()
        backend.answers[RS + "ListPodSandbox"] = cri.ListPodSandboxResponse(
            items=[
                cri.PodSandbox(id=f"sb-{i}", metadata=cri.PodSandboxMetadata(name=f"p{i}", uid=f"u{i}", namespace="d"))
                for i in range(args.pods)
            ]
        ).SerializeToString()
        backend.answers[RS + "ListContainers"] = cri.ListContainersResponse(
            containers=[
                cri.Container(id=f"c-{i}", pod_sandbox_id=f"sb-{i}", metadata=cri.ContainerMetadata(name="main"))
                for i in range(args.pods)
            ]
        ).SerializeToString()
        backend.answers[RS + "ListContainerStats"] = cri.ListContainerStatsResponse().SerializeToString()
        cri_server = serve(backend, base / "cri.sock")
        root = base / "cg"
        for ctrl in ("cpu", "cpuset", "memory"):
            (root / ctrl / "kubepods").mkdir(parents=True)
        layout = CgroupLayout.detect(root, "kubepods")
        hooks = RuntimeHookServer(
            AgentEnv(layout),
            CgroupExecutor(layout),
            HookServerOptions(str(base / "k.sock"), str(base / "k.sock"), base / "hooks"),
        )
        hooks.start()
        env = {**os.environ, "PYTHONPATH": str(args.proxy_repo.resolve())}
        env.update(kv.split("=", 1) for kv in args.proxy_env)
        proxy = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "runtimeproxy",  # what `koord runtime-proxy` re-executes into
                f"--koord-runtimeproxy-endpoint={base / 'p.sock'}",
                f"--remote-runtime-service-endpoint={base / 'cri.sock'}",
                f"--runtime-hooks-config-path={base / 'hooks'}",
                "--log-level=warning",
            ],
            env=env,
            cwd=args.proxy_repo,
            stderr=subprocess.PIPE,
        )
        try:
            _wait_socket(base / "p.sock", proxy)
            direct = grpc.insecure_channel(f"unix://{base / 'cri.sock'}")
            via = grpc.insecure_channel(f"unix://{base / 'p.sock'}")
            version = cri.VersionRequest(version="v1").SerializeToString()
            sandbox = cri.PodSandboxConfig(
                metadata=cri.PodSandboxMetadata(name="gpu", uid="u-gpu", namespace="d"),
                labels={"koordinator.sh/qosClass": "LS"},
                annotations={"scheduling.koordinator.sh/device-allocated": '{"gpu":[{"minor":0,"id":"GPU-1"}]}'},
                linux=cri.LinuxPodSandboxConfig(cgroup_parent="/kubepods/burstable/podu-gpu"),
            )
            create = cri.CreateContainerRequest(
                pod_sandbox_id="sb-new",
                config=cri.ContainerConfig(metadata=cri.ContainerMetadata(name="main")),
                sandbox_config=sandbox,
            ).SerializeToString()
            for ch in (direct, via):  # warm both paths
                _time(ch.unary_unary(RS + "Version"), version, 20)
                _time(ch.unary_unary(RS + "CreateContainer"), create, 20)
            result: dict[str, object] = {
                "calls": args.calls,
                "version_direct_ms": _ms(_time(direct.unary_unary(RS + "Version"), version, args.calls)),
                "version_proxy_ms": _ms(_time(via.unary_unary(RS + "Version"), version, args.calls)),
                "create_direct_ms": _ms(_time(direct.unary_unary(RS + "CreateContainer"), create, args.calls)),
                "create_proxy_hooked_ms": _ms(_time(via.unary_unary(RS + "CreateContainer"), create, args.calls)),
            }
            sent = cri.CreateContainerRequest.FromString(backend.calls[-1][1])
            result["hooked_env"] = {e.key: e.value.decode() for e in sent.config.envs}
            ps = psutil.Process(proxy.pid)
            list_pods, list_ctrs = via.unary_unary(RS + "ListPodSandbox"), via.unary_unary(RS + "ListContainers")
            stats = via.unary_unary(RS + "ListContainerStats")
            t_cpu0, ctx0, t0 = ps.cpu_times(), _ctx_switches(proxy.pid), time.monotonic()
            tick = 0
            while time.monotonic() - t0 < args.seconds:
                list_pods(b"", timeout=5)
                list_ctrs(b"", timeout=5)
                if tick % 10 == 0:
                    stats(b"", timeout=5)
                tick += 1
                time.sleep(max(0.0, t0 + tick - time.monotonic()))
            t_cpu1, ctx1, wall = ps.cpu_times(), _ctx_switches(proxy.pid), time.monotonic() - t0
            used = (t_cpu1.user - t_cpu0.user) + (t_cpu1.system - t_cpu0.system)
            result["idle"] = {
                "pods": args.pods,
                "seconds": round(wall, 1),
                "proxy_cpu_percent": round(100 * used / wall, 3),
                "proxy_ctx_switches_per_s": round((ctx1 - ctx0) / wall, 1),
                "proxy_threads": len(list(Path(f"/proc/{proxy.pid}/task").iterdir())),
            }
            result["proxy_repo"] = str(args.proxy_repo)
            result["proxy_env"] = args.proxy_env
            result["proxy_rss_mb"] = round(ps.memory_info().rss / 2**20, 1)
            print(json.dumps(result))
        finally:
            proxy.terminate()
            proxy.wait(10)
            hooks.stop(0)
            cri_server.stop(0)


if __name__ == "__main__":
    main()
