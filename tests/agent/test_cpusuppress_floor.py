"""BE suppression by cpuset on a 2-cpu node: the log says what is really applied (the 2-cpu floor = every cpu,
so BE is not squeezed) and later lines carry the current figures, not those of the mode change."""

from __future__ import annotations

import logging

import pytest

from agent.collectors.node import ProcessorInfo
from agent.qos.cpusuppress import STATUS_LOG_SECONDS, CPUSuppress


class _Ctx:
    def __init__(self, cpus: int) -> None:
        self.processors = [ProcessorInfo(i, i, 0, 0) for i in range(cpus)]


def test_cpuset_detail_states_the_floor_on_a_two_cpu_node() -> None:
    text = CPUSuppress.cpuset_detail(_Ctx(2), -539, 1.2, [0, 1])  # type: ignore[arg-type]
    assert "-539 milli-cores for BE" in text and "besteffort cpuset 0-1 (2 cpus)" in text
    assert "the floor of 2 cpus = every cpu of this 2-cpu node: BE is not squeezed by cpuset here" in text
    big = CPUSuppress.cpuset_detail(_Ctx(8), -539, 1.2, [0, 1])  # type: ignore[arg-type]
    assert "the floor of 2 cpus" in big and "every cpu" not in big
    assert "floor" not in CPUSuppress.cpuset_detail(_Ctx(8), 3500, 1.2, [0, 1, 2, 3])  # type: ignore[arg-type]


def test_current_figures_are_logged_again_not_only_at_the_mode_change(caplog: pytest.LogCaptureFixture) -> None:
    s = CPUSuppress()
    with caplog.at_level(logging.DEBUG, logger="agent"):
        s._enter("cpuset", "-539 milli-cores", 0.0)
        s._enter("cpuset", "-200 milli-cores", 1.0)  # too soon for another INFO line
        s._enter("cpuset", "-100 milli-cores", STATUS_LOG_SECONDS + 1)
        s._enter("cpuset", "-100 milli-cores", 2 * STATUS_LOG_SECONDS + 2)  # unchanged: nothing at INFO
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert infos == [
        "suppressBECPU: suppressing BE pods by cpuset (-539 milli-cores)",
        "suppressBECPU: still suppressing BE pods by cpuset (-100 milli-cores)",
    ]
    debugs = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert "suppressBECPU: cpuset: -200 milli-cores" in debugs
