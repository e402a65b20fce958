"""The report rendered in headless Debian Chromium: tables and images show, no JS or console errors.

Chromium is driven over the DevTools protocol on a pipe (tests/chromium.py). A negative control
page with a broken image and a throwing script proves the checks catch what they look for.
"""

from __future__ import annotations

import pytest

from mascot_eval.reports.html import render_report as build_report
from tests.chromium import Chromium, chromium_path
from tests.reportfactory import build_report_run

pytestmark = pytest.mark.chromium

GOOD_PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    binary = chromium_path()
    if binary is None:
        pytest.fail("Chromium not found (set MASCOT_CHROMIUM or run `make chromium`, which installs Debian's chromium)")
    b = Chromium(binary, tmp_path_factory.mktemp("chromium") / "profile")
    try:
        yield b
    finally:
        b.close()


def test_report_renders_tables_and_images_without_errors(browser, tmp_path):
    rd = build_report_run(tmp_path)
    path = build_report([rd], rd.report_path, n_boot=200)
    page = browser.render(path)
    assert page.errors == [], page.errors
    st = page.state
    assert st["title"].startswith("mascot-eval report")
    assert st["sections"] == [
        "overview",
        "leaderboard",
        "comparisons",
        "charts",
        "drift",
        "redundancy",
        "judges",
        "threeway",
        "figures",
        "training",
        "transcripts",
    ]
    visible = [t for t in st["tables"] if t["visible"]]
    by_section = {s: [t for t in visible if t["section"] == s] for s in st["sections"]}
    assert any("Contribution" in t["header"] and t["rows"] == 4 for t in by_section["leaderboard"])  # header + 3 systems
    assert any("p_holm" in t["header"] for t in by_section["comparisons"])
    assert any("statistic" in t["header"] for t in by_section["judges"])
    assert any("BT rank" in t["header"] for t in by_section["threeway"])
    imgs = st["images"]
    assert len(imgs) == 14 and {i["scheme"] for i in imgs} == {"data"}
    assert page.broken_images == [], page.broken_images
    shown = [i for i in imgs if not i["inDetails"]]
    assert all(i["visible"] and i["naturalWidth"] > 100 for i in shown)
    # the transcript filter works and throws nothing
    n = browser.evaluate("document.querySelectorAll('details.transcript').length")
    assert n == 36
    shown_after = browser.evaluate(
        "(() => { const b = document.getElementById('tfilter'); b.value = 'zero-shot'; b.dispatchEvent(new Event('input'));"
        " return [Array.from(document.querySelectorAll('details.transcript')).filter(d => d.style.display !== 'none').length,"
        " document.getElementById('tcount').textContent]; })()"
    )
    assert shown_after == [12, "12 shown"]
    browser.collect(page, browser.session)
    assert page.errors == []


def test_checks_catch_a_broken_image_and_a_throwing_script(browser, tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!DOCTYPE html><html><head><title>bad</title></head><body><table><tr><td>x</td></tr></table>"
        f'<img alt="good" src="{GOOD_PNG}"><img alt="broken" src="data:image/png;base64,AAAAAAAA">'
        '<img alt="missing" src="missing.png">'
        "<script>console.error('bad console'); throw new Error('boom');</script></body></html>",
        encoding="utf-8",
    )
    page = browser.render(bad)
    assert any("boom" in e for e in page.exceptions), page.errors
    assert any("bad console" in e for e in page.console_errors), page.errors
    assert sorted(i["alt"] for i in page.broken_images) == ["broken", "missing"]
    good = next(i for i in page.state["images"] if i["alt"] == "good")
    assert good["naturalWidth"] == 1 and good["complete"]
