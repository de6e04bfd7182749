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
