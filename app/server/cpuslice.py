"""The time slice the serving thread asks of Linux's fair scheduler (EEVDF), so that its bursts of work preempt
a shared control plane's threads less (issue 47; off by default).

Since Linux 6.6 the fair class is EEVDF: a thread that wakes up preempts the running one when its virtual
deadline, its eligible time plus its slice, comes first, and a running thread is not preempted before its slice
is used. Since 6.12 a thread may ask for its own slice, between 0.1 and 100 ms, in ``sched_attr.sched_runtime``
of ``sched_setattr(2)`` under ``SCHED_OTHER`` or ``SCHED_BATCH``; threads it starts later get the same. The
kernel's own is a base scaled by the CPU count's log (1.4 ms on the two-CPU rig). No privilege is needed; a
kernel without custom slices ignores or refuses the request, and the service goes on either way. The ask orders
the thread among those it shares a runqueue with: every process on the rig (one cgroup, as on a host without
per-pod cgroups); inside a container its own threads, and beyond them as far as the kernel carries a group's
slice from its tasks'.

The service does its work in bursts on one thread: a ``/filter`` answer, then the ``/prioritize`` answer worked
out ahead, a chunk of watch events, a binding and its answer. On a control plane that shares its CPUs with
kube-scheduler and kube-apiserver, a short slice lets each wake-up cut into kube-scheduler's parallel Filter and
Score; a longer one lets the burst finish and the others run theirs. Measured on ``../shared/rig`` (two CPUs,
``docs/performance.md`` round 21): against the Go no-op at 500 nodes, 3 ms was ahead of the kernel's 1.4 ms in
six of eight rotations (+0.07 to +0.25), level in one, behind in one (-0.03); at 1,000 nodes behind in one of
three (-0.09) and level in two; a 0.2 ms slice was worse than the kernel's (round 20). Two runs of one
configuration differ by as much, so it is not asked by default: ``koord scheduler --cpu-slice-ms 3`` asks it,
0 (the default) keeps the kernel's.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

__all__ = ["DEFAULT_SLICE_MS", "MAX_SLICE_MS", "MIN_SLICE_MS", "request_slice"]

#: What ``koord scheduler`` asks for unless ``--cpu-slice-ms`` says otherwise (milliseconds): 0, the kernel's slice
#: (round 21: 3 ms was ahead at 500 nodes in six of eight rotations, not at 1,000 nodes).
DEFAULT_SLICE_MS = 0.0
#: The range Linux accepts for a fair thread's slice (milliseconds); it clamps what lies outside.
MIN_SLICE_MS, MAX_SLICE_MS = 0.1, 100.0

#: ``sched_setattr``'s number per machine (``uname -m``): it has no libc wrapper.
_SYSCALL = {"x86_64": 314, "aarch64": 274, "ppc64le": 355, "s390x": 345, "riscv64": 274}
#: ``struct sched_attr`` as of Linux 4.13 (SCHED_ATTR_SIZE_VER1): size, policy, flags, nice, priority, runtime,
#: deadline, period, util_min, util_max.
_ATTR = struct.Struct("IIQiIQQQII")


def request_slice(slice_ms: float) -> str | None:
    """Ask Linux for a fair-class slice of ``slice_ms`` milliseconds for the calling thread (and the threads it
    starts from now on). Its policy (``SCHED_OTHER`` or ``SCHED_BATCH``) and nice value are kept.

    Returns:
        None when the kernel took the request (a kernel before 6.12 takes it and ignores the slice), else why
        nothing was asked: not Linux, a machine whose syscall number is unknown, a real-time or idle policy
        (left as it is), or the kernel's refusal (its errno's text).

    Raises:
        ValueError: ``slice_ms`` is outside 0.1-100 ms.
    """
    if not MIN_SLICE_MS <= slice_ms <= MAX_SLICE_MS:
        raise ValueError(f"a CPU slice is {MIN_SLICE_MS:g} to {MAX_SLICE_MS:g} ms, got {slice_ms:g}")
    if not sys.platform.startswith("linux"):
        return f"not Linux ({sys.platform})"
    number = _SYSCALL.get(platform.machine())
    if number is None:
        return f"sched_setattr's number on {platform.machine()} is not known"
    policy = os.sched_getscheduler(0)
    if policy not in (os.SCHED_OTHER, os.SCHED_BATCH):
        return f"the thread runs under policy {policy}, not SCHED_OTHER or SCHED_BATCH: left as it is"
    nice = os.getpriority(os.PRIO_PROCESS, 0)  # on Linux, the calling thread's
    attr = ctypes.create_string_buffer(_ATTR.pack(_ATTR.size, policy, 0, nice, 0, int(slice_ms * 1e6), 0, 0, 0, 0))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, 0, attr, 0) != 0:
        return f"sched_setattr: {os.strerror(ctypes.get_errno())}"
    return None
