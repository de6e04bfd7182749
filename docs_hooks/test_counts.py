"""docs/development.md's test counts, counted on each ``mkdocs build`` instead of written by hand.

``pytest --collect-only -q tests`` lists every test; ``tests/support/slow.py`` (the one list
``tests/conftest.py`` marks ``slow`` from) says which are slow. The page holds each number between
``<!-- count:all -->`` / ``<!-- count:fast -->`` / ``<!-- count:slow -->`` and ``<!-- /count -->``;
the build writes the counted one there. ``mkdocs serve`` leaves the numbers as written: collecting
the suite takes most of a minute, too long for every save.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_SPAN = re.compile(r"<!-- count:(all|fast|slow) -->[^<]*<!-- /count -->")
_state: dict[str, Any] = {"build": False, "counts": None}


def on_startup(command: str, dirty: bool) -> None:
    _state["build"] = command == "build"


def counts(root: Path = ROOT) -> dict[str, int]:
    """Every collected test of ``root/tests``, and how many of them tests/support/slow.py makes slow."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", "tests"],
                          cwd=root, capture_output=True, text=True, timeout=900)
    ids = [line for line in proc.stdout.splitlines() if "::" in line and not line.startswith(" ")]
    if proc.returncode != 0 or not ids:
        raise RuntimeError(f"docs_hooks/test_counts.py: pytest --collect-only tests failed (exit {proc.returncode}):\n"
                           + "\n".join(proc.stdout.splitlines()[-5:]))
    sys.path.insert(0, str(root / "tests"))
    from support.slow import is_slow

    slow = 0
    for node in ids:
        path, _, rest = node.partition("::")
        slow += is_slow(path.removeprefix("tests/"), rest.split("::")[-1].split("[")[0])
    return {"all": len(ids), "fast": len(ids) - slow, "slow": slow}


def fill(markdown: str, numbers: dict[str, int]) -> str:
    """Each ``<!-- count:NAME -->...<!-- /count -->`` span with its number (1,093)."""
    return _SPAN.sub(lambda m: f"<!-- count:{m.group(1)} -->{numbers[m.group(1)]:,}<!-- /count -->", markdown)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri != "development.md" or not _state["build"] or not _SPAN.search(markdown):
        return markdown
    if _state["counts"] is None:
        _state["counts"] = counts()
    return fill(markdown, _state["counts"])
