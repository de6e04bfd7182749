"""Screenshots of every page kind, made by the docs build from a real run, so they never go stale.

A MkDocs hook (``mkdocs.yml`` ``hooks:``). On each build it runs a small fabtest project (the venue
demo agent, ``fabtest.demo``) twice with pytest, as a user would: once with the friendly agent and
once with its curt variant, so the comparison has a regression to show. The simulated user and the
judge are the demo's heuristics served as a fake Gemini REST API on 127.0.0.1
(:func:`fabtest.demo.offline_llm.offline_gemini`): the real google-genai client path runs and
nothing reaches the internet. Then ``fabtest view`` is served on 127.0.0.1 and the system Chromium,
driven by Playwright (no browser download), screenshots the experiment list, an experiment page,
a conversation, the comparison, the review queue, the static HTML report (``fabtest report``) and
the console summary the second run printed. The files example (``examples/photo_claims``) is run
once more in a project and results directory of its own, served by a second ``fabtest view``, for
a conversation with a photo's thumbnail and a file's link.

The PNGs are added to the site as generated files under ``screenshots/`` (nothing is written into
``docs/`` or committed), so ``mkdocs build --strict`` validates every page's link to them. Without
Chromium or Playwright the build still passes: each image is a small placeholder and one info line
says how to get the real ones. ``FABTEST_DOCS_SCREENSHOTS=0`` skips the run (placeholders only).
A run that fails although Chromium is there leaves placeholders and an info line with the error:
a slow or flaky machine must not fail the whole docs build, and tests/docs/test_docs_screenshots.py
fails when a page kind no longer renders.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import zlib
from collections.abc import Callable
from html import escape
from pathlib import Path
from struct import pack
from typing import Any

log = logging.getLogger("mkdocs.hooks.screenshots")

#: every page kind shown in the docs: file name under screenshots/ -> what it shows
SHOTS = {
    "view-list.png": "fabtest view: the experiment list",
    "view-experiment.png": "fabtest view: one experiment",
    "view-conversation.png": "fabtest view: one conversation",
    "view-files.png": "fabtest view: a conversation with files (a photo's thumbnail, a file's link)",
    "view-compare.png": "fabtest view: the comparison of two experiments",
    "view-review.png": "fabtest view: the review queue of an experiment",
    "report.png": "fabtest report: the static HTML report",
    "console-summary.png": "the console summary at the end of a run",
}
OUT = "screenshots"
BASELINE, CURRENT = "exp_docs_v1", "exp_docs_v2"
#: the files example (examples/photo_claims), run in a project and results directory of its own so
#: the venue demo's pages (the experiment list, the comparison) stay as they are
FILES_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "photo_claims"
FILES_EXP = "exp_docs_files"
_WIDTH, _HEIGHT = 1280, 860

_PYPROJECT = """\
[tool.fabtest]
results_dir = "results"
agent = "{agent}"

[tool.fabtest.agents]
venue_bot = "{agent}"
"""

#: version 2 of the agent: curt in every other conversation (a partial regression, flaky scenarios)
_BOT = """\
import itertools

from fabtest.demo import VenueAgent

_conversations = itertools.count()


def build_agent(context=None):
    return VenueAgent(style="curt" if next(_conversations) % 2 else "friendly")
"""

_FEATURE = """\
Feature: Booking a venue
  The venue bot finds rooms, checks availability and books them.

  Background:
    Given the agent "venue_bot"
    And the criterion "friendly" means "The agent is warm and polite"
    And the criterion "concise" means "The reply has at most three sentences"

  Scenario: The agent asks for missing details
    When the user says "Hi, I need a meeting room"
    Then the response must match "(?i)which city"
    And the agent must not call "search_venues"
    And the response should satisfy "friendly"

  Scenario: The agent searches once it knows city, date and size
    When the user says "I need a room in Berlin for 10 people on 12 March"
    Then the agent must call "search_venues"
    And the response should match "€\\d+ per day"
    And the response should satisfy "concise"

  Scenario: A polite greeting
    When the user says "Hello!"
    Then the response must match "^Hello"
    And the response should satisfy "friendly"

  Scenario: An office manager books a room in Berlin
    Given a simulated user with the goal "Book a room for 10 people in Berlin on 12 March"
    And the persona "A busy office manager who answers briefly"
    And the simulation takes at most 8 turns
    And the simulation stops when the agent calls "book_venue"
    When the simulated user talks to the agent
    Then the conversation must include a call to "book_venue"
    And every response should satisfy "friendly"
    And the goal must be achieved
"""

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# -- the MkDocs hook ------------------------------------------------------------------------------------
_made: dict[str, Path] | None = None  # one run per process: `mkdocs serve` rebuilds reuse it
_tmp: tempfile.TemporaryDirectory[str] | None = None


def on_files(files: Any, config: Any) -> Any:
    """Add ``screenshots/*.png`` to the site (real ones when Chromium runs, placeholders otherwise)."""
    from mkdocs.structure.files import File

    global _made, _tmp
    if _made is None:
        _tmp = tempfile.TemporaryDirectory(prefix="fabtest-docs-shots-")
        _made = _screenshots(Path(_tmp.name))
    for name, path in _made.items():
        files.append(File.generated(config, f"{OUT}/{name}", abs_src_path=str(path)))
    return files


def _screenshots(out: Path) -> dict[str, Path]:
    """Real screenshots, or placeholders with an info line saying why (also when the run fails where
    Chromium is installed: the test of the generator is what fails then, not the docs build)."""
    started = time.monotonic()
    reason = (chromium_missing() if os.environ.get("FABTEST_DOCS_SCREENSHOTS", "1") != "0"
              else "FABTEST_DOCS_SCREENSHOTS=0")
    if reason is None:
        try:
            made = generate(out)
        except Exception as exc:
            log.info("screenshots: placeholders only: the run of the demo failed: %s: %s", type(exc).__name__, exc)
            return placeholders(out)
        log.info("screenshots: %d page kinds of a real run captured in %.1f s", len(made), time.monotonic() - started)
        return made
    log.info("screenshots: placeholders only (%s); install Chromium (apt-get install chromium) and playwright "
             "(pip install -e '.[dev]') and rebuild for real ones", reason)
    return placeholders(out)


# -- the run and the screenshots -------------------------------------------------------------------------
def chromium() -> str | None:
    """The system Chromium (the one tests/view uses), or None."""
    return next((p for p in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser"))
                 if p and os.path.exists(p)), None)


def chromium_missing() -> str | None:
    """Why real screenshots cannot be made here, or None when they can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed"
    return None if chromium() else "chromium is not installed"


def generate(out: Path) -> dict[str, Path]:
    """Run the demo project twice, then screenshot every page kind into ``out``; name -> PNG."""
    from playwright.sync_api import sync_playwright

    from fabtest.demo.offline_llm import offline_gemini

    out.mkdir(parents=True, exist_ok=True)
    project = out / "project"
    project.mkdir(exist_ok=True)
    (project / "features").mkdir(exist_ok=True)
    (project / "features" / "booking.feature").write_text(_FEATURE, encoding="utf-8")
    with offline_gemini() as fake:
        env = {**_clean_env(), **fake.env("offline")}
        _write_project(project, "fabtest.demo:build_agent")
        _pytest(project, env, BASELINE, "venue bot v1")
        (project / "bot.py").write_text(_BOT, encoding="utf-8")
        _write_project(project, "bot:build_agent")
        console = _pytest(project, env, CURRENT, "venue bot v2: terser prompt")
        files_results, files_run = _files_run(out / "files_project", env)
    report = project / "report.html"
    _fabtest(project, env, "report", f"results/{CURRENT}.json", "-o", str(report))

    from fabtest.view.layout import compare_path, conversation_path, experiment_path
    from fabtest.view.server import make_server

    server, files_server = make_server(project / "results"), make_server(files_results)
    for running in (server, files_server):
        threading.Thread(target=running.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    files_base = f"http://127.0.0.1:{files_server.server_address[1]}/"
    failing, labels = _failing_run(project / "results" / f"{CURRENT}.json")
    made: dict[str, Path] = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": _WIDTH, "height": _HEIGHT})
            for label in labels:  # a person's marks, posted as the conversation page's buttons post them
                answer = page.request.post(base + "label", data=label)
                if not answer.ok:
                    raise RuntimeError(f"POST /label answered {answer.status}: {answer.text()}")

            def shot(name: str, url: str, prepare: Callable[[Any], Any] | None = None, height: int = _HEIGHT) -> None:
                """The top ``height`` pixels of the page at ``url`` (or the element ``prepare`` picks)."""
                page.goto(url)
                target = prepare(page) if prepare else None
                path = out / name
                if target is not None:
                    target.screenshot(path=str(path))
                else:
                    page.screenshot(path=str(path), full_page=True,
                                    clip={"x": 0, "y": 0, "width": _WIDTH, "height": height})
                made[name] = path

            shot("view-list.png", base)
            shot("view-experiment.png", base + experiment_path(CURRENT))
            shot("view-conversation.png", base + conversation_path(CURRENT, *failing))
            shot("view-files.png", files_base + conversation_path(FILES_EXP, *files_run), _turn_with_files)
            shot("view-compare.png", base + compare_path(BASELINE, CURRENT), height=1700)  # the verdict, what changed
            shot("view-review.png", base + experiment_path(CURRENT), lambda pg: pg.locator("#review"))
            shot("report.png", report.as_uri())
            page.set_content(_console_page(console))
            page.locator("pre").screenshot(path=str(out / "console-summary.png"))
            made["console-summary.png"] = out / "console-summary.png"
            browser.close()
    finally:
        for running in (server, files_server):
            running.shutdown()
            running.server_close()
    return made


def _files_run(root: Path, env: dict[str, str]) -> tuple[Path, tuple[str, int]]:
    """examples/photo_claims copied to ``root`` and run once: its results directory and the run of
    the scenario that sends the photo (and gets a claim form back)."""
    import json

    shutil.copytree(FILES_EXAMPLE, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("results", "__pycache__"))
    _pytest(root, env, FILES_EXP, "photo claims")
    entries = json.loads((root / "results" / f"{FILES_EXP}.json").read_text(encoding="utf-8"))["scenario_results"]
    sent = next(x for x in entries if any(t.get("user_files") for t in x.get("transcript") or []))
    return root / "results", (str(sent["id"]), int(sent.get("iteration") or 1))


def _turn_with_files(page: Any) -> Any:
    """The turn that sent the photo, once every image (the lazy thumbnails) has loaded."""
    turn = page.locator("section.turn").first
    turn.scroll_into_view_if_needed()
    page.wait_for_function("[...document.images].every(i => i.complete && i.naturalWidth > 0)", timeout=10_000)
    return turn


def _write_project(root: Path, agent: str) -> None:
    (root / "pyproject.toml").write_text(_PYPROJECT.format(agent=agent), encoding="utf-8")


def _clean_env() -> dict[str, str]:
    """This process's environment without a real key or a user's fabtest settings."""
    drop = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "PYTEST_ADDOPTS")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("FABTEST_")}
    env["NO_COLOR"] = "1"
    return env


def _pytest(root: Path, env: dict[str, str], exp_id: str, name: str) -> str:
    """One experiment (2 iterations of every scenario); the console output of the run."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist",
         "--fabtest-experiment-id", exp_id, "--fabtest-experiment", name, "--fabtest-iterations", "2",
         "features"], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    if proc.returncode not in (0, 1) or not (root / "results" / f"{exp_id}.json").exists():
        raise RuntimeError(f"pytest exited {proc.returncode}: {(proc.stdout + proc.stderr)[-1500:]}")
    return _ANSI.sub("", proc.stdout)


def _fabtest(root: Path, env: dict[str, str], *args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "fabtest.cli", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"fabtest {args[0]} exited {proc.returncode}: {proc.stderr[-1000:]}")


def _failing_run(path: Path) -> tuple[tuple[str, int], list[dict[str, Any]]]:
    """A failed run of the current experiment (the conversation worth showing) and two labels on
    "friendly" checks the judge failed: one agreeing with it, one not (the review panel's kappa)."""
    import json

    from fabtest.view.labels import judged_checks

    entries = json.loads(path.read_text(encoding="utf-8"))["scenario_results"]
    failed = [x for x in entries if not x.get("passed")] or entries
    checks = [(x, i) for x in entries for i, c in judged_checks(x)
              if c.get("criterion") == "friendly" and c.get("status") == "failed"][:2]
    labels = [{"experiment": CURRENT, "scenario": x["id"], "iteration": x.get("iteration") or 1, "check": i,
               "verdict": verdict, "comment": comment}
              for (x, i), (verdict, comment) in zip(checks, (("right", ""), ("wrong", "terse, but not rude")),
                                                    strict=False)]
    return (str(failed[0]["id"]), int(failed[0].get("iteration") or 1)), labels


def _console_page(text: str) -> str:
    """The fabtest summary the run printed (from its first line on), as a terminal-looking page."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "fabtest" in line.lower() and "=" in line), 0)
    shown = "\n".join(lines[start:]).strip()
    return ('<!doctype html><meta charset="utf-8"><body style="margin:0;background:#1e1e1e">'
            '<pre style="margin:0;padding:16px 20px;color:#e6e6e6;font:13px/1.45 monospace;display:inline-block">'
            f"{escape(shown)}</pre></body>")


# -- placeholders --------------------------------------------------------------------------------------
def placeholders(out: Path) -> dict[str, Path]:
    """A small grey PNG per page kind (the docs build passes without Chromium)."""
    out.mkdir(parents=True, exist_ok=True)
    data = _png(320, 180, (0xE8, 0xEA, 0xED))
    made = {}
    for name in SHOTS:
        (out / name).write_bytes(data)
        made[name] = out / name
    return made


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return pack(">I", len(body)) + kind + body + pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    row = b"\x00" + bytes(rgb) * width
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(row * height, 9)) + chunk(b"IEND", b""))


if __name__ == "__main__":  # python docs_hooks/screenshots.py DIR: look at the images without building
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "screenshots")
    t0 = time.monotonic()
    print(textwrap.fill(", ".join(sorted(generate(target))), 100), f"\n{time.monotonic() - t0:.1f} s")
