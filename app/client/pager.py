"""Paginated LIST, as client-go's ``tools/pager.ListPager`` (with ``FullListIfExpired``).

The pager holds no connection: a client asks it for the next page's query parameters, sends the
request, and hands back the page or the error. Pages are requested with ``limit`` and the previous
page's ``continue`` token; when a continue token has expired (410 Gone / Expired) the list starts
over once without pagination, as client-go falls back to a full list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.client.errors import InvalidResponse

__all__ = ["DEFAULT_PAGE_SIZE", "ListResult", "Pager"]

#: client-go's ``pager.defaultPageSize``.
DEFAULT_PAGE_SIZE = 500


@dataclass
class ListResult:
    """Every item of a collection and the list's ``metadata.resourceVersion`` (None when absent).

    Items are the JSON objects as the server sent them (typed lists leave ``kind`` and
    ``apiVersion`` out of their items), or what a LIST's ``transform`` made of each.
    """

    items: list[Any] = field(default_factory=list)
    resource_version: str | None = None


class Pager:
    """The state of one paginated LIST (client-go ``ListPager.List``).

    Usage: ``while (q := pager.next_params()) is not None``: send the LIST with ``q`` added to the
    query; on success ``pager.add_page(body)``; on :class:`~app.client.errors.Gone` call
    ``pager.restart_if_expired()`` and re-raise when it answers False. Then ``pager.result``.

    Args:
        page_size: ``limit`` of each page; 0 or less lists in one request.
    """

    def __init__(self, page_size: int = DEFAULT_PAGE_SIZE) -> None:
        self.page_size = page_size
        self.paginated = page_size > 0
        self.result = ListResult()
        self._continue: str | None = None
        self._done = False

    def next_params(self) -> dict[str, str] | None:
        """Query parameters of the next page (``limit``, ``continue``), or None once the list is complete."""
        if self._done:
            return None
        params: dict[str, str] = {}
        if self.paginated:
            params["limit"] = str(self.page_size)
        if self._continue:
            params["continue"] = self._continue
        return params

    def add_page(self, body: dict[str, Any]) -> None:
        """Take one page: keep its items (items that are not objects are dropped), remember its continue
        token and resourceVersion.

        Raises:
            InvalidResponse: ``items`` is present and not a list, or ``metadata`` is not an object.
        """
        items = body.get("items")
        meta = body.get("metadata")
        if items is not None and not isinstance(items, list):
            raise InvalidResponse(f"LIST page: items is {type(items).__name__}, not a list", 200)
        if meta is not None and not isinstance(meta, dict):
            raise InvalidResponse(f"LIST page: metadata is {type(meta).__name__}, not an object", 200)
        self.result.items.extend(i for i in items or [] if isinstance(i, dict))
        meta = meta or {}
        rv = meta.get("resourceVersion")
        self.result.resource_version = str(rv) if rv else None
        cont = meta.get("continue")
        self._continue = str(cont) if cont else None
        self._done = self._continue is None

    def restart_if_expired(self) -> bool:
        """After a 410 answer: True when it refused a continue token, and the list starts over without
        pagination; False when it answered the first page (the caller re-raises the error)."""
        if self._continue is None:
            return False
        self.paginated = False
        self._continue = None
        self.result = ListResult()
        return True
