"""The README stays a front door: short, every link resolves, and its test command is the one CI runs.

`mkdocs build --strict` (in .ci/run) checks the links between pages of the site; this test also
covers the README, which is outside the site, and runs without MkDocs installed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
#: "at most about 250 lines" (issue 18): the rest belongs on the documentation site
README_MAX_LINES = 250

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^\s*```.*?^\s*```", re.DOTALL | re.MULTILINE)
_CODE = re.compile(r"`[^`\n]*`")


def _links(page: Path) -> list[str]:
    text = _CODE.sub("", _FENCE.sub("", page.read_text(encoding="utf-8")))
    return [target for target in _LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]


def _anchors(page: Path) -> set[str]:
    """The ids MkDocs gives the page's headings (Python-Markdown's default slugify)."""
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    slugs = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
        slugs.add(re.sub(r"[-\s]+", "-", slug))
    # mkdocstrings: a ``::: fabtest.Name`` line renders a heading with the id ``fabtest.Name``
    slugs.update(re.findall(r"^:::\s+([\w.]+)\s*$", text, re.MULTILINE))
    return slugs


def test_the_readme_is_a_front_door() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES}): move details to docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no file {resolved.relative_to(ROOT) if resolved.is_relative_to(ROOT) else resolved}")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading with the id #{anchor} in {resolved.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: broken links: {broken}"


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    readme = README.read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    install = re.search(r"^pip install -e '(\.\[dev\])'", readme, re.MULTILINE)
    command = re.search(r"^pytest (tests features -n 2)\b", readme, re.MULTILINE)
    assert install and command, "README.md: the 'Working on fabtest' commands are missing"
    assert f"python -m pytest {command.group(1)}" in ci, ".ci/run does not run the README's test command"
    assert re.search(r"pip install .*-e '\.\[dev[],]", ci), ".ci/run does not install the README's extra"
