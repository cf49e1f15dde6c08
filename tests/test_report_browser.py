"""The HTML report from the stored H200 data, opened in a real browser (headless Chromium through
Playwright): no console errors, every figure loaded and non-empty, the verdict table with one row per
regime, every link inside the file resolving, and nothing fetched from the network.

Chromium comes from the OS packages (``apt-get install chromium``: .ci/run installs it), Playwright from
the test extra. Locally the test is skipped, saying why, where either is missing; where
SSMBENCH_REQUIRE_BROWSER=1 (CI sets it) a missing browser fails the test instead.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ssmbench.cli import main

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("SSMBENCH_CHROMIUM", "/usr/bin/chromium")


def _browser_or_skip() -> str:
    missing = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = "playwright is not installed (pip install -e '.[test]')"
    if missing is None and not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        missing = f"no Chromium at {CHROMIUM} (apt-get install chromium, or set SSMBENCH_CHROMIUM)"
    if missing:
        if os.environ.get("SSMBENCH_REQUIRE_BROWSER") == "1":
            pytest.fail(f"SSMBENCH_REQUIRE_BROWSER=1 but {missing}")
        pytest.skip(missing)
    return CHROMIUM


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    code = main(["report", "--results", str(REPO / "results" / "h200"), "--calibration",
                 str(REPO / "results" / "h200" / "2026-12-02" / "calibration" / "profile.json"), "--out", str(out)])
    assert code == 0
    return out


def test_report_in_chromium(report):
    exe = _browser_or_skip()  # skips (or fails under SSMBENCH_REQUIRE_BROWSER=1) before the import below
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1366, "height": 768})  # a laptop screen
        problems, requests = [], []
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(report.as_uri(), wait_until="load")
        images = page.evaluate("""() => [...document.images].map(i => ({alt: i.alt, complete: i.complete,
            w: i.naturalWidth, h: i.naturalHeight, src: i.src.slice(0, 22)}))""")
        regimes = page.evaluate("""() => [...document.querySelectorAll(
            'h2[id^="prefill-"], h2[id^="decode-"], h2[id^="training-"]')].map(h => h.id)""")
        rows = page.evaluate("() => [...document.querySelectorAll('#verdict-table tbody tr')].map(r => r.cells.length)")
        links = page.evaluate("""() => [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))""")
        missing = page.evaluate("""(hrefs) => hrefs.filter(h => !h.startsWith('#') ||
            !document.getElementById(decodeURIComponent(h.slice(1))))""", links)
        overflow = page.evaluate("() => document.querySelector('main').scrollWidth <= window.innerWidth")
        browser.close()
    assert not problems, problems
    assert images, "the report has figures"
    for im in images:
        assert im["complete"] and im["w"] > 0 and im["h"] > 0, im
        assert im["src"].startswith("data:image/png"), im  # embedded: no file or network needed
    assert regimes and len(rows) == len(regimes), (rows, regimes)
    assert links and not missing, missing
    assert all(u.startswith(("file:", "data:")) for u in requests), requests
    assert overflow, "the page is wider than a laptop screen (wide tables must scroll inside their box)"
