"""The read-only page at ``/ui`` and its static files (``/ui/static/...``), shipped in the package.

Plain HTML, one vanilla JS file and one stylesheet from ``app/server/static`` (package data): no CDN and
no build step, so the page works on an air-gapped cluster. The script reads ``/apis/v1/overview``, the
ElasticQuota tree, DeviceShare's node summaries and ``POST /apis/v1/explain``; nothing on the page writes.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, RedirectResponse

#: Where the page's files live inside the package.
STATIC_DIR = Path(__file__).resolve().parent / "static"

#: The files served under ``/ui/static/`` and their content types (nothing else is served).
STATIC_FILES = {
    "ui.js": "text/javascript; charset=utf-8",
    "ui.css": "text/css; charset=utf-8",
}

router = APIRouter(include_in_schema=False)


@router.get("/ui")
async def ui_page() -> FileResponse:
    """The page (``static/index.html``)."""
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8")


@router.get("/ui/")
async def ui_slash() -> RedirectResponse:
    """``/ui/`` redirects to ``/ui`` (the page's relative links assume ``/ui``)."""
    return RedirectResponse("/ui", status_code=308)


@router.get("/ui/static/{name}")
async def ui_static(name: str) -> FileResponse:
    """One of :data:`STATIC_FILES`; 404 for any other name."""
    media_type = STATIC_FILES.get(name)
    if media_type is None:
        raise HTTPException(status_code=404, detail=f"no static file {name}")
    return FileResponse(STATIC_DIR / name, media_type=media_type)
