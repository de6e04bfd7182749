"""Which pyproject.toml files opt a project in to fabtest (issue 12 item 0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabtest.pytest_plugin.options import has_fabtest_table


@pytest.mark.parametrize(("text", "opted_in"), [
    ("[tool.fabtest]\n", True),
    ('[tool.fabtest.agents]\nbot = "m:build"\n', True),
    ('[tool.pytest.ini_options]\naddopts = "-q"\n', False),
    ('[project]\nname = "fabtest-fan"\n[tool.fabtestish]\n', False),
    ("[tool.fabtest]\nagent = \n", True),  # unparsable but spelled out: its TOML error must be reported
    ("this is = = not toml\n", False),
])
def test_pyproject_table_decides(tmp_path: Path, text: str, opted_in: bool) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(text, encoding="utf-8")
    assert has_fabtest_table(pyproject) is opted_in


def test_no_pyproject_is_not_opted_in(tmp_path: Path) -> None:
    assert has_fabtest_table(tmp_path / "pyproject.toml") is False
