"""The allocation curve as the authors' merge_alloc_discrete.py computes it."""

from __future__ import annotations

import pytest

from app.sim.curve import allocation_curve


def test_each_percent_is_the_mean_over_the_arrivals_rounding_to_it() -> None:
    # capacity 1000 milli: arrived 4, 6, 14, 16 milli are 0.4 %, 0.6 %, 1.4 %, 1.6 %
    curve = allocation_curve([4, 6, 14, 16], [4, 6, 10, 16], 1000)
    assert curve == [pytest.approx(0.4), pytest.approx((0.6 + 1.0) / 2), pytest.approx(1.6)]


def test_half_rounds_to_even_as_python_round() -> None:
    # 0.5 % rounds to 0, 1.5 % to 2, 2.5 % to 2
    curve = allocation_curve([5, 15, 25], [1, 2, 3], 1000)
    assert curve == [pytest.approx(0.1), pytest.approx(0.2), pytest.approx(0.25)]


def test_a_percent_without_arrivals_takes_its_neighbours_then_the_previous_value() -> None:
    # a jump from 0 % to 5 %: 1 % takes the 0 % arrival (0..2); 2 and 3 have none within 1: previous; 4 takes 5 %
    curve = allocation_curve([0, 50], [0, 40], 1000)
    assert curve[0] == 0.0 and curve[1] == 0.0 and curve[2] == 0.0 and curve[3] == 0.0
    assert curve[4] == pytest.approx(4.0) and curve[5] == pytest.approx(4.0)
    assert allocation_curve([], [], 1000) == []


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="2 arrived samples but 1 allocated samples"):
        allocation_curve([1, 2], [1], 1000)
    with pytest.raises(ValueError, match="capacity must be positive, got 0"):
        allocation_curve([1], [1], 0)
