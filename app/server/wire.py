"""Decoding request bodies and encoding answers for the JSON endpoints.

Malformed JSON, valid JSON of the wrong shape and malformed pods are all :class:`BadRequest`
(HTTP 400 with ``{"message": ...}``), never FastAPI's default 422.
"""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from fastapi import Response
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class BadRequest(Exception):
    """The request body is unusable; the message says why (answered as HTTP 400)."""


def describe_validation_error(exc: ValidationError) -> str:
    """First pydantic error as ``<field path>: <message>`` (e.g. ``NodeNames.2: Input should be a valid string``)."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ())) or "body"
    return f"{loc}: {err.get('msg', 'invalid')}"


def decode(body: bytes, model: type[M]) -> M:
    """Parse ``body`` as JSON and validate it against ``model``.

    Raises:
        BadRequest: empty body, invalid JSON, or a shape ``model`` rejects; the message names the field.
    """
    if not body:
        raise BadRequest(f"empty request body: expected a JSON {model.__name__}")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest(f"expected a JSON object ({model.__name__}), got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise BadRequest(f"invalid {model.__name__}: {describe_validation_error(exc)}") from None


def json_response(content: Any, status_code: int = 200) -> Response:
    """A JSON response encoded with orjson (numpy scalars included)."""
    return Response(
        content=orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY),
        status_code=status_code,
        media_type="application/json",
    )


def error_response(message: str, status_code: int = 400) -> Response:
    """``{"message": ...}`` with ``status_code``, the shape Koordinator's services answer errors with."""
    return json_response({"message": message}, status_code)
