"""docs/development.md's test counts are filled in by docs_hooks/test_counts.py on each build, not
kept by hand (issue 37: the page said "about 800" of a suite with 1,119 quick tests)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("test_counts_hook", ROOT / "docs_hooks" / "test_counts.py")
assert _spec is not None and _spec.loader is not None
hook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hook)


def test_the_page_marks_every_count_the_build_fills() -> None:
    page = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    assert sorted(m.group(1) for m in hook._SPAN.finditer(page)) == ["all", "fast", "slow"]


def test_the_build_writes_the_counted_numbers() -> None:
    page = "<!-- count:fast -->800<!-- /count --> of <!-- count:all -->9<!-- /count -->"
    assert hook.fill(page, {"all": 2182, "fast": 1119, "slow": 1063}) == (
        "<!-- count:fast -->1,119<!-- /count --> of <!-- count:all -->2,182<!-- /count -->")
