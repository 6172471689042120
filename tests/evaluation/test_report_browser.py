"""The HTML report in a real headless Chromium (the Debian package; scripts/test installs it):
it renders, its charts load (every ``img`` has a natural width), and nothing reaches the
console (no script errors, no resource that failed to load)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gemgym.cli import main
from helpers.extras import skip_without
from helpers.scripted_server import ScriptedChatServer

needs_openai = skip_without("openai")  # the chat agent's HTTP client

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs chromium (apt-get install chromium; scripts/test does)"
)
CHECK = """<script>
window.addEventListener("load", () => {
  const imgs = [...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight]);
  document.body.setAttribute("data-check", JSON.stringify({
    imgs, tables: document.querySelectorAll("table").length, title: document.title}));
});
</script>"""


def _chromium(page: Path, tmp: Path) -> tuple[str, list[str]]:
    """The DOM after load, and the console lines Chromium logged."""
    assert CHROMIUM is not None
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={tmp / 'profile'}", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [x for x in proc.stderr.splitlines() if ":CONSOLE" in x]
    return proc.stdout, console


def test_console_errors_are_caught(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><body><img src='missing.png'>"
                    "<script>console.error('boom')</script></body></html>")  # fmt: skip
    _, console = _chromium(page, tmp_path)
    assert any("boom" in x for x in console)


@needs_openai
def test_the_html_report_renders_with_its_charts(tmp_path: Path) -> None:
    """A run with failed episodes (30 % of requests answer HTTP 500, no retries)."""
    run = tmp_path / "run"
    with ScriptedChatServer(lambda b: f"\\boxed{{{b['seed'] % 10}}}", fail_rate=0.3) as server:
        status = main(
            ["eval", "game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0-hard",
             "game:Hangman-v0-easy", "--model", "m", "--base-url", server.url, "--tasks", "6",
             "--n", "2", "--k", "1", "--k", "2", "--max-retries", "0", "--quiet",
             "--out", str(run)]
        )  # fmt: skip
    assert status == 1  # some episodes failed; the report lists them
    report = run / "report.html"
    html = report.read_text()
    assert "src='http" not in html and 'src="http' not in html  # self-contained

    dom, console = _chromium(report, tmp_path)
    assert console == [], console
    assert "gemgym eval report" in dom and "game:Hangman-v0-easy" in dom
    assert "Errors (examples)" in dom and "HTTP 500" in dom

    checked = tmp_path / "checked.html"
    checked.write_text(html.replace("</body>", CHECK + "</body>"))
    dom, console = _chromium(checked, tmp_path)
    assert console == [], console
    match = re.search(r'data-check="([^"]*)"', dom)
    assert match, "the page did not finish loading"
    result = json.loads(match.group(1).replace("&quot;", '"'))
    assert result["title"] == "gemgym eval report"
    assert result["tables"] == 2  # per env; per difficulty: GuessTheNumber easy and hard
    assert len(result["imgs"]) == 3  # success per env, per difficulty, latency
    assert all(done and w > 0 and h > 0 for done, w, h in result["imgs"]), result["imgs"]
