"""One public face (issue 37): what ``import fabtest`` exports is what docs/reference/api.md
documents, name for name (as httpx's tests/test_exported_members.py keeps ``__all__`` and its
public names in step), and no internal package offers a face of its own."""

from __future__ import annotations

import re
from pathlib import Path

import fabtest
import fabtest.testing

ROOT = Path(__file__).resolve().parents[2]
API = (ROOT / "docs" / "reference" / "api.md").read_text(encoding="utf-8")


def test_every_exported_name_is_documented_and_every_documented_name_exported() -> None:
    rendered = set(re.findall(r"^::: fabtest\.(\w+)$", API, re.M))  # each rendered from its docstring
    tabled = set(re.findall(r"\[`(\w+)`\]\(#fabtest\.\1\)", API))  # and named in the table of what it is for
    exported = set(fabtest.__all__)
    assert sorted(exported - rendered) == [] and sorted(rendered - exported) == []
    assert sorted(exported - tabled) == [] and sorted(tabled - exported) == []


def test_every_exported_name_is_defined() -> None:
    assert [name for name in [*fabtest.__all__, *fabtest.testing.__all__]
            if not hasattr(fabtest, name) and not hasattr(fabtest.testing, name)] == []
    assert sorted(fabtest.__all__) == list(fabtest.__all__)  # one order, so a new name lands in one place


def test_the_testing_package_is_named_on_the_page() -> None:
    assert "`fabtest.testing`" in API and all(name in API for name in ("FakeLLM", "FakeGemini"))


def test_no_internal_package_offers_a_lazy_face() -> None:
    """A module ``__getattr__`` in a package ``__init__`` is a second public face (and hides where a
    name lives): import from the module that defines it."""
    faces = [str(init.relative_to(ROOT)) for init in sorted((ROOT / "src" / "fabtest").rglob("__init__.py"))
             if "__getattr__" in init.read_text(encoding="utf-8")]
    assert faces == []
