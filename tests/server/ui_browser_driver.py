"""Drives /ui in headless chromium, in a process of its own (tests/server/test_ui_browser.py runs it), so
playwright's driver and greenlets never live in the pytest process.

``python ui_browser_driver.py URL WAIT_SELECTOR SCREENSHOT [--explain]``: loads URL in
/usr/bin/chromium, waits for WAIT_SELECTOR and the quota tree, optionally clicks the first ``explain``
and waits for its table, saves a full-page screenshot and prints JSON: each section's text, the
nodes in drawn order and the page's uncaught script errors.
"""

from __future__ import annotations

import json
import sys

from playwright.sync_api import sync_playwright


def main(url: str, wait_for: str, screenshot: str, explain: bool) -> None:
    """Load the page, act, print what it shows as JSON."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(url)
            page.locator(wait_for).first.wait_for(timeout=15_000)
            page.locator("#quotas tr[data-quota]").first.wait_for(timeout=15_000)
            if explain:
                page.get_by_role("button", name="explain").first.click()
                page.locator("#explain table").wait_for(timeout=15_000)
            page.screenshot(path=screenshot, full_page=True)
            out = {
                section: page.locator(f"#{section}").inner_text() for section in ("nodes", "quotas", "gpus", "explain")
            }
            out["nodeOrder"] = page.locator("#nodes tr[data-node]").evaluate_all(
                "rows => rows.map(r => r.dataset.node)"
            )
            out["errors"] = errors
        finally:
            browser.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], "--explain" in sys.argv[4:])
