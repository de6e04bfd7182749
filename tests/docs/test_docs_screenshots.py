"""The docs build's screenshots (docs_hooks/screenshots.py): every page kind is captured from a real run
of the demo, and every one is shown on some page of the docs."""

from __future__ import annotations

import importlib.util
import re
import struct
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_screenshots", ROOT / "docs_hooks" / "screenshots.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOK = _hook()


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path.name} is not a PNG"
    return struct.unpack(">II", data[16:24])


def test_every_page_kind_is_shown_in_the_docs() -> None:
    shown = {m for page in (ROOT / "docs").rglob("*.md")
             for m in re.findall(r"!\[[^\]]*\]\((?:\.\./)*screenshots/([\w.-]+\.png)\)", page.read_text("utf-8"))}
    assert set(HOOK.SHOTS) <= shown, f"not shown on any page: {sorted(set(HOOK.SHOTS) - shown)}"
    assert shown <= set(HOOK.SHOTS), f"pages show screenshots the hook does not make: {sorted(shown - set(HOOK.SHOTS))}"


def test_placeholders_without_chromium_are_valid_pngs(tmp_path: Path) -> None:
    made = HOOK.placeholders(tmp_path)
    assert set(made) == set(HOOK.SHOTS)
    assert all(_png_size(p) == (320, 180) for p in made.values())


@pytest.mark.skipif(HOOK.chromium_missing() is not None,
                    reason=f"{HOOK.chromium_missing()}: apt-get install chromium; pip install -e '.[dev]'")
def test_a_real_run_gives_a_real_screenshot_of_every_page_kind(tmp_path: Path) -> None:
    made = HOOK.generate(tmp_path)
    assert set(made) == set(HOOK.SHOTS)
    for name, path in made.items():
        width, height = _png_size(path)
        # a page, not a blank or an error text: wide, tall, and more than a few kilobytes of detail
        assert width >= 600 and height >= 100, (name, width, height)
        assert path.stat().st_size > 10_000, (name, path.stat().st_size)
    # the run really was two experiments of the demo, and a person's labels reached the results directory
    results = tmp_path / "project" / "results"
    assert (results / f"{HOOK.BASELINE}.json").exists() and (results / f"{HOOK.CURRENT}.json").exists()
    assert "verdict: failed" in (results / f"{HOOK.CURRENT}.labels.yaml").read_text()


def test_the_files_shot_is_of_a_conversation_with_a_thumbnail_and_a_file_link(tmp_path: Path) -> None:
    """Without a browser: the files example the hook runs apart (its own results directory, so the
    venue demo's pages are unchanged) gives a conversation page with the photo's thumbnail and the
    claim form's link, the page the view-files.png shot captures."""
    import threading
    from urllib.request import urlopen

    from fabtest.view.layout import conversation_path
    from fabtest.view.server import make_server

    results, run = HOOK._files_run(tmp_path / "files_project", HOOK._clean_env())
    assert [p.name for p in results.glob("*.json")] == [f"{HOOK.FILES_EXP}.json"]
    server = make_server(results)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        with urlopen(base + conversation_path(HOOK.FILES_EXP, *run), timeout=10) as answer:
            page = answer.read().decode("utf-8")
        thumb = re.search(r'<img class="thumb" src="([^"]+)" alt="lamp.png"', page)
        assert thumb and 'download>📎 claim-1.txt' in page
        with urlopen(base + thumb.group(1).removeprefix("../../"), timeout=10) as image:
            assert image.read() == (HOOK.FILES_EXAMPLE / "features" / "files" / "lamp.png").read_bytes()
    finally:
        server.shutdown()
        server.server_close()
