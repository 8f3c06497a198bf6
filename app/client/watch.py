"""Watch events as the API server streams them (``?watch=true``): one JSON object per line,
``{"type": "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR", "object": {...}}``.

Follows k8s.io/apimachinery ``watch.Event`` and client-go's ``StreamWatcher``: an ``ERROR`` event
carries a ``Status`` (turn it into the typed error with :func:`app.client.errors.error_from_status`);
a line that cannot be decoded ends the stream with an error, as client-go's decoder does.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson

from app.client.errors import InvalidResponse

__all__ = ["WatchEvent", "decode_event", "decode_stream", "watch_params"]


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event.

    Attributes:
        type: ``ADDED``, ``MODIFIED``, ``DELETED``, ``BOOKMARK`` or ``ERROR`` (other values are passed on
            as the server sent them).
        object: the object (a ``Status`` for ``ERROR``; only ``metadata.resourceVersion`` for ``BOOKMARK``).
    """

    type: str
    object: dict[str, Any]


def decode_event(line: str | bytes) -> WatchEvent:
    """Decode one line of a watch stream.

    Raises:
        InvalidResponse: the line is not JSON, or not an object with a string ``type`` and an object
            ``object`` (status 200: the stream itself was accepted).
    """
    try:
        ev = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise InvalidResponse(f"unable to decode an event from the watch stream: {exc}", 200) from None
    if not isinstance(ev, dict) or not isinstance(ev.get("type"), str) or not isinstance(ev.get("object"), dict):
        text = line[:120] if isinstance(line, str) else bytes(line[:120]).decode("utf-8", "replace")
        raise InvalidResponse(f"unable to decode an event from the watch stream: {text!r}", 200)
    return WatchEvent(ev["type"], ev["object"])


async def decode_stream(pieces: AsyncIterable[bytes]) -> AsyncIterator[WatchEvent]:
    """The events of a watch stream's body, given in pieces as they arrive: the bytes are split into
    lines (blank lines skipped) and each line is decoded once (:func:`decode_event`); a last line
    without a newline is decoded when the stream ends.

    Raises:
        InvalidResponse: a line cannot be decoded. Whatever iterating ``pieces`` raises.
    """
    rest = b""
    async for piece in pieces:
        if b"\n" not in piece:
            rest += piece
            continue
        lines = (rest + piece).split(b"\n")
        rest = lines.pop()
        for line in lines:
            # blank: empty or ASCII whitespace only (what bytes.strip() removes), tested without the copy
            # of a 2-5 KB event line that strip() makes (issue 29)
            if line and not line.isspace():
                yield decode_event(line)
    if rest and not rest.isspace():
        yield decode_event(rest)


def watch_params(
    resource_version: str | None, timeout_seconds: int, params: dict[str, str] | None = None
) -> dict[str, str]:
    """Query parameters of a watch from ``resource_version`` (None: from now) with bookmarks, ending
    server-side after ``timeout_seconds`` (client-go's Reflector sends the same)."""
    out = dict(params or {})
    out["watch"] = "true"
    if resource_version:
        out["resourceVersion"] = resource_version
    out["allowWatchBookmarks"] = "true"
    out["timeoutSeconds"] = str(int(timeout_seconds))
    return out
