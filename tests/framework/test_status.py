"""Status codes print as kube-scheduler prints them (framework.Code.String()), and each code answers exactly
one of success / skip / wait / rejected (error: none), however the status was built (the predicates compare
against module constants and SUCCESS's falsy 0, issue 29)."""

from __future__ import annotations

import pytest

from app.framework.status import SKIP, SUCCESS, Code, Status

EXPECTED = {
    Code.SUCCESS: (True, False, False, False),
    Code.ERROR: (False, False, False, False),
    Code.UNSCHEDULABLE: (False, False, False, True),
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: (False, False, False, True),
    Code.WAIT: (False, False, True, False),
    Code.SKIP: (False, True, False, False),
}


def test_every_code_has_kube_schedulers_label() -> None:
    assert {c: c.label for c in Code} == {
        Code.SUCCESS: "Success",
        Code.ERROR: "Error",
        Code.UNSCHEDULABLE: "Unschedulable",
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
        Code.WAIT: "Wait",
        Code.SKIP: "Skip",
    }


@pytest.mark.parametrize("code", list(Code))
def test_each_code_answers_one_predicate(code: Code) -> None:
    for status in (Status(code), Status(code, ("why",), "P"), Status(Code(int(code)))):
        assert (status.is_success(), status.is_skip(), status.is_wait(), status.is_rejected()) == EXPECTED[code]


def test_shared_statuses_and_builders() -> None:
    assert SUCCESS.is_success() and not SKIP.is_success() and SKIP.is_skip()
    assert Status.unschedulable("x").is_rejected() and Status.unresolvable("x").is_rejected()
    assert not Status.error("x").is_success() and not Status.error("x").is_rejected()
    assert Status.wait("x").is_wait() and Status.skip("P").is_skip()
