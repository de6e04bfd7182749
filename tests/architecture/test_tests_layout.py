"""The test suite's own layout holds: every path the slow list names exists (a moved or renamed
test module would otherwise silently turn quick, and the inner loop of docs/development.md slow)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from support.slow import SLOW_DIRS, SLOW_MODULES, SLOW_TESTS

TESTS = Path(__file__).resolve().parents[1]


def _missing(dirs: Iterable[str], modules: Iterable[str], tests: Iterable[str]) -> list[str]:
    missing = [d for d in dirs if not (TESTS / d).is_dir()]
    missing += [m for m in modules if not (TESTS / m).is_file()]
    for name in tests:
        module, function = name.split("::")
        path = TESTS / module
        if not path.is_file() or not re.search(rf"^(?:async )?def {re.escape(function)}\(", path.read_text(), re.M):
            missing.append(name)
    return missing


def test_every_folder_module_and_test_the_slow_list_names_exists() -> None:
    assert _missing(SLOW_DIRS, SLOW_MODULES, SLOW_TESTS) == []


def test_a_moved_module_or_a_renamed_test_is_reported() -> None:
    moved = "experiment/test_gate_family.py"  # now compare/test_gate_family.py
    renamed = "architecture/test_tests_layout.py::test_that_never_was"
    assert _missing(["no_such_folder"], [moved], [renamed]) == ["no_such_folder", moved, renamed]
