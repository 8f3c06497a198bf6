"""Status codes print as kube-scheduler prints them (framework.Code.String())."""

from __future__ import annotations

from app.framework.status import Code


def test_every_code_has_kube_schedulers_label() -> None:
    assert {c: c.label for c in Code} == {
        Code.SUCCESS: "Success",
        Code.ERROR: "Error",
        Code.UNSCHEDULABLE: "Unschedulable",
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
        Code.WAIT: "Wait",
        Code.SKIP: "Skip",
    }
