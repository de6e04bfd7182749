"""The house's rules hold (docs/explanation/architecture.md): a small top level, every folder in a
layer, and every path the architecture page names exists."""

from __future__ import annotations

import tomllib
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "fabtest"
PYPROJECT = SRC.parents[1] / "pyproject.toml"


def test_the_top_level_holds_only_the_public_face() -> None:
    loose = sorted(p.name for p in SRC.glob("*.py"))
    assert len(loose) <= 6, loose


def test_every_top_level_folder_and_module_sits_in_a_layer() -> None:
    config = tomllib.loads(PYPROJECT.read_text())
    layers = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")["layers"]
    named = {name.strip() for layer in layers for name in layer.replace("|", ":").split(":")}
    tops = {f"fabtest.{p.stem}" for p in SRC.glob("*.py") if p.stem != "__init__"}
    tops |= {f"fabtest.{p.parent.name}" for p in SRC.glob("*/__init__.py")}
    assert sorted(tops - named) == []


def test_every_path_the_architecture_page_names_exists() -> None:
    """The "where to look" table and the layers table stay true when modules move
    (``src/fabtest/x.py``, ``engine/y.py``, ``compare/``: each a file or folder under src/fabtest)."""
    import re

    page = (SRC.parents[1] / "docs" / "explanation" / "architecture.md").read_text()
    folders = {p.name for p in SRC.iterdir() if p.is_dir()}
    named = set(re.findall(r"`(?:src/fabtest/)?((?:[a-z_]+/)+(?:[a-z_]+\.py)?|[a-z_]+\.py)`", page))
    missing = []
    for path in sorted(named):
        top = path.split("/", 1)[0]
        if "/" in path and top not in folders:
            continue  # not a path under src/fabtest (e.g. results/)
        if not (SRC / path).exists() and not any((SRC / folder / path).exists() for folder in folders):
            missing.append(path)
    assert len(named) > 40 and missing == []
