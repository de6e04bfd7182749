"""Whether the Gemini CLI speaks ACP is asked once per installed CLI (``gemini --help``: a whole CLI
start), and remembered across runs until the CLI's file changes. A fake CLI counts its ``--help``s."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from fabtest.agents import gemini_probe
from fabtest.agents.gemini_probe import cache_file, gemini_supports_acp

CLI = """#!{python}
import sys
with open({count!r}, "a") as fh:
    fh.write("help\\n")
print("Usage: gemini [options]\\n  -p, --prompt  Prompt{acp}")
"""


def _cli(tmp_path: Path, *, acp: bool) -> tuple[str, Path]:
    count = tmp_path / "helps.txt"
    program = tmp_path / "bin" / "gemini"
    program.parent.mkdir(exist_ok=True)
    program.write_text(CLI.format(python=sys.executable, count=str(count), acp="\\n  --acp  Starts the agent in ACP mode"
                                  if acp else ""))
    program.chmod(0o755)
    return str(program), count


def _helps(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0


@pytest.fixture(autouse=True)
def new_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A cache of our own, and no answer remembered in this process yet (as in a new run)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(gemini_probe, "_SUPPORTS", {})


def test_the_answer_is_asked_once_and_kept_across_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    program, count = _cli(tmp_path, acp=True)
    assert gemini_supports_acp(program) is True
    assert gemini_supports_acp(program) is True  # the same run: not asked again
    monkeypatch.setattr(gemini_probe, "_SUPPORTS", {})  # the next run
    assert gemini_supports_acp(program) is True
    assert _helps(count) == 1
    assert cache_file() == tmp_path / "cache" / "fabtest" / "gemini-cli.json" and cache_file().exists()


def test_a_reinstalled_cli_is_asked_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    program, count = _cli(tmp_path, acp=True)
    assert gemini_supports_acp(program) is True
    _cli(tmp_path, acp=False)  # "downgraded": the file changes
    monkeypatch.setattr(gemini_probe, "_SUPPORTS", {})
    assert gemini_supports_acp(program) is False
    assert _helps(count) == 2
    monkeypatch.setattr(gemini_probe, "_SUPPORTS", {})
    assert gemini_supports_acp(program) is False  # a "no" is kept too
    assert _helps(count) == 2
    assert len(cache_file().read_text().splitlines()) == 3  # one entry per program: the old one replaced


def test_a_cache_that_cannot_be_written_only_costs_the_question(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    program, count = _cli(tmp_path, acp=True)
    (tmp_path / "not-a-dir").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-dir"))
    for _ in range(2):
        monkeypatch.setattr(gemini_probe, "_SUPPORTS", {})
        assert gemini_supports_acp(program) is True
    assert _helps(count) == 2


def test_a_missing_cli_is_not_remembered(tmp_path: Path) -> None:
    assert gemini_supports_acp(str(tmp_path / "nowhere" / "gemini")) is False
    assert not cache_file().exists()


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_a_link_to_the_cli_shares_its_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """npm installs ``gemini`` as a link to the package's script: the key is the file it points at."""
    program, count = _cli(tmp_path, acp=True)
    link = tmp_path / "gemini-link"
    link.symlink_to(program)
    assert gemini_supports_acp(program) is True
    monkeypatch.setattr(gemini_probe, "_SUPPORTS", {})
    assert gemini_supports_acp(str(link)) is True
    assert _helps(count) == 1
