"""error_from_response picks the class by Status.reason, then by HTTP code (apimachinery's errors)."""

from __future__ import annotations

import json

import pytest

from app.client.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Expired,
    Gone,
    InternalError,
    NotFound,
    ServerTimeout,
    Timeout,
    error_from_response,
    error_from_status,
)
from tests.client.fake_apiserver import status


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (409, "AlreadyExists", AlreadyExists),
        (409, "Conflict", Conflict),
        (409, "", Conflict),
        (410, "Expired", Expired),
        (410, "Gone", Gone),
        (500, "ServerTimeout", ServerTimeout),
        (500, "InternalError", InternalError),
        (504, "Timeout", Timeout),
        (404, "NotFound", NotFound),
        (404, "SomethingNew", NotFound),  # an unknown reason falls back to the code
        (500, "NotFound", InternalError),  # a reason whose code disagrees does not win
        (418, "", ApiError),
    ],
)
def test_class_by_reason_then_code(code: int, reason: str, cls: type[ApiError]) -> None:
    err = error_from_response(code, json.dumps(status(code, reason, "m")).encode())
    assert type(err) is cls
    assert err.status == code and err.message == "m"
    assert err.reason == (reason or cls.default_reason)


def test_retry_after_from_details_or_header_and_non_json_bodies() -> None:
    body = status(429, "TooManyRequests", "slow down", {"retryAfterSeconds": 3})
    assert error_from_response(429, body).retry_after == 3.0
    assert error_from_response(429, body, "7").retry_after == 7.0, "the header wins"
    assert error_from_response(429, body, "Wed, 21 Oct 2015 07:28:00 GMT").retry_after == 3.0
    plain = error_from_response(502, b"<html>Bad Gateway</html>")
    assert type(plain) is ApiError and plain.status == 502 and str(plain) == "<html>Bad Gateway</html>"
    assert str(error_from_response(503, b"")) == "HTTP 503"


def test_error_from_status_of_a_watch_error_event() -> None:
    err = error_from_status(status(410, "Expired", "too old resource version: 5 (10)"))
    assert isinstance(err, Expired) and isinstance(err, Gone) and err.status == 410
    assert str(err) == "too old resource version: 5 (10)"
    assert type(error_from_status({"kind": "Status", "message": "x"})) is ApiError
