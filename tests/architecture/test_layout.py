"""The house's rules hold (docs/explanation/architecture.md): a small top level, every folder in a
layer, and the paths of modules that moved in 0.2 still importable, with a warning naming the new one."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from fabtest._internal.moved import MOVED

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


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_import_path_still_works_and_says_where_the_module_went(old: str) -> None:
    code = ("import importlib, warnings\n"
            "warnings.simplefilter('always')\n"
            "with warnings.catch_warnings(record=True) as seen:\n"
            f"    old = importlib.import_module({old!r})\n"
            f"new = importlib.import_module({MOVED[old]!r})\n"
            "assert old is new, (old, new)\n"
            "print([str(w.message) for w in seen if w.category is DeprecationWarning])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"{old} moved to {MOVED[old]}" in proc.stdout


def test_the_new_paths_import_without_any_warning() -> None:
    code = ("import importlib, warnings\nwarnings.filterwarnings('error', message='.* moved to ', category=DeprecationWarning)\n"
            f"for name in {sorted(set(MOVED.values()))!r}:\n    importlib.import_module(name)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_a_name_that_never_existed_is_still_an_import_error() -> None:
    with pytest.raises(ModuleNotFoundError):
        __import__("fabtest.no_such_module")


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
