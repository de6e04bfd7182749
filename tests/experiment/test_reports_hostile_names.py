"""Every user-supplied string is escaped for the medium it is written to (issue 30, reports): no live
Markdown link or image in ``fabtest-compare --format markdown`` (a PR comment with a phishing link or
a tracking pixel), and no raw ANSI escape from a name on the terminal through ``fabtest-compare``,
``fabtest show`` or ``fabtest list``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.experiments import make_doc, make_result

from fabtest.cli import compare_main, main
from fabtest.experiment.export import write_document

LINK = "[Click to re-run](https://evil.example/login)"
PIXEL = "![](https://track.example/p.gif)"
BARE = "see https://evil.example/x and www.evil.example"
ANSI = "\x1b]0;pwned\x07\x1b[2Jcleared\x1b[31m"


@pytest.fixture
def results(tmp_path: Path) -> Path:
    names = [LINK, PIXEL, BARE, f"ansi {ANSI}"]
    base = [make_result(n, passed=True) for n in names]
    cur = [make_result(n, passed=False, failure_type="assertion") for n in names]
    write_document(make_doc("exp_base", base, name=f"base {LINK}"), tmp_path)
    write_document(make_doc("exp_cur", cur, name=f"cur {ANSI}"), tmp_path)
    return tmp_path


def test_markdown_has_no_live_link_image_or_autolink(results: Path, capsys) -> None:
    compare_main(["exp_base", "exp_cur", "--results-dir", str(results), "--format", "markdown"])
    md = capsys.readouterr().out
    assert "Click to re-run" in md and "track.example" in md  # the names are still there, as text
    assert not re.search(r"(?<!\\)\[[^\]]*(?<!\\)\]\(", md)  # no [text](url) nor ![](url)
    assert "https://" not in md and "www.evil" not in md  # no bare URL GitHub would autolink
    assert "\x1b" not in md


@pytest.mark.parametrize("command", [["compare", "exp_base", "exp_cur"], ["show", "exp_cur"], ["list"]])
def test_no_raw_escape_code_reaches_the_terminal(results: Path, capsys, command: list[str]) -> None:
    main([*command, "--results-dir", str(results)])
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "\\x1b" in out  # shown as text
