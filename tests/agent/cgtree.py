"""A throw-away kubepods-like cgroup v1 subtree with real processes, for the agent tests and the bench.

``CgroupTree`` creates ``<root>/<controller>/kubepods-test-<id>/{burstable,besteffort}`` in the cpu,
cpuacct, cpuset and memory controllers, pod and container dirs on demand, starts processes in them,
and ``cleanup()`` kills every process and removes the dirs leaf-first (also after failures).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory")
ROOT = Path("/sys/fs/cgroup")

BUSY = "import sys\nsys.stdin.readline()\nwhile True: pass\n"
ALLOC = (
    "import sys, time\nsys.stdin.readline()\nn = int(sys.argv[1])\nb = b'\\x01' * n\n"
    "sys.stdout.write('ok\\n'); sys.stdout.flush()\ntime.sleep(3600)\n"
)
SLEEP = "import sys, time\nsys.stdin.readline()\ntime.sleep(3600)\n"


def writable_reason(root: Path = ROOT) -> str | None:
    """None when v1 cgroups under ``root`` can be created here, else why not."""
    if os.geteuid() != 0:
        return "cgroup tests need root"
    for c in CONTROLLERS:
        if not (root / c).is_dir():
            return f"no cgroup v1 {c} controller at {root / c}"
    probe = root / "cpu" / f"koord-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        return f"cgroups not writable: {exc}"
    return None


class CgroupTree:
    """A unique kubepods subtree; see the module docstring."""

    def __init__(self, root: Path = ROOT) -> None:
        self.root = root
        self.kubepods = f"kubepods-test-{uuid.uuid4().hex[:10]}"
        self.dirs: list[str] = []
        self.procs: list[subprocess.Popen[bytes]] = []
        for rel in (self.kubepods, f"{self.kubepods}/burstable", f"{self.kubepods}/besteffort"):
            self.mkdir(rel)

    def mkdir(self, rel: str) -> None:
        """Create ``rel`` in every controller (cpuset gets its parent's cpus and mems)."""
        for c in CONTROLLERS:
            path = self.root / c / rel
            path.mkdir(exist_ok=True)
            if c == "cpuset":
                parent = path.parent
                for f in ("cpuset.cpus", "cpuset.mems"):
                    (path / f).write_text((parent / f).read_text().strip() or "0")
        if rel not in self.dirs:
            self.dirs.append(rel)

    def pod(self, uid: str, qos: str = "besteffort", containers: tuple[str, ...] = ()) -> str:
        """Create a pod dir (``besteffort``, ``burstable`` or ``guaranteed``) and its container dirs."""
        rel = f"{self.kubepods}/pod{uid}" if qos == "guaranteed" else f"{self.kubepods}/{qos}/pod{uid}"
        self.mkdir(rel)
        for cid in containers:
            self.mkdir(f"{rel}/{cid}")
        return rel

    def start(self, rel: str, script: str = BUSY, *args: str) -> subprocess.Popen[bytes]:
        """Start ``script`` (which waits for one stdin line), move it into ``rel`` in every controller, release it."""
        proc = subprocess.Popen(
            [sys.executable, "-S", "-c", script, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.procs.append(proc)
        for c in CONTROLLERS:
            (self.root / c / rel / "cgroup.procs").write_text(str(proc.pid))
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        return proc

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        """Kill one process and reap it."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def cpu_ns(self, rel: str) -> int:
        """``cpuacct.usage`` of ``rel``."""
        return int((self.root / "cpuacct" / rel / "cpuacct.usage").read_text())

    def cpu_cores(self, rel: str, seconds: float) -> float:
        """Measured cpu of ``rel`` over the next ``seconds``, in cores."""
        a, t = self.cpu_ns(rel), time.monotonic()
        time.sleep(seconds)
        return (self.cpu_ns(rel) - a) / 1e9 / (time.monotonic() - t)

    def read(self, controller: str, rel: str, name: str) -> str:
        """A cgroup file's content."""
        return (self.root / controller / rel / name).read_text().strip()

    def cleanup(self) -> None:
        """Kill every process, then remove the dirs deepest first in every controller."""
        for proc in self.procs:
            with contextlib.suppress(Exception):
                self.stop(proc)
        for rel in sorted(self.dirs, key=lambda d: d.count("/"), reverse=True):
            for c in CONTROLLERS:
                path = self.root / c / rel
                for _ in range(50):
                    try:
                        if path.exists():
                            path.rmdir()
                        break
                    except OSError:
                        time.sleep(0.05)
