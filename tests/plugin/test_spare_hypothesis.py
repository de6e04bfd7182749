"""A fabtest run in an environment that has hypothesis installed (this repository's) does not
import it: hypothesis's pytest plugin would, at the end of every process, for its summary
(fabtest.pytest_plugin.spare_hypothesis). Checked in a subprocess without this suite's conftest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FEATURE = 'Feature: Plain\n  Scenario: Hello\n    When the user says "hi"\n    Then the response must match "hello"\n'
CONFTEST = '''
import sys


def pytest_unconfigure(config):
    with open("loaded.txt", "a", encoding="utf-8") as fh:
        fh.write(f"{'hypothesis' in sys.modules}\\n")
'''
HYPOTHESIS_TEST = '''
from hypothesis import given, strategies as st


@given(st.integers())
def test_integers(n):
    assert isinstance(n, int)
'''


def _project(root: Path) -> None:
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n\n'
                                         '[tool.fabtest]\nagent = "bots:good"\nresults_dir = "results"\n',
                                         encoding="utf-8")
    (root / "bots.py").write_text("def good(context):\n    return lambda messages: 'hello'\n", encoding="utf-8")
    (root / "features").mkdir()
    (root / "features" / "plain.feature").write_text(FEATURE, encoding="utf-8")
    (root / "conftest.py").write_text(CONFTEST, encoding="utf-8")


def _run(root: Path, *args: str) -> tuple[list[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "FABTEST_"))}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
                          cwd=root, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return (root / "loaded.txt").read_text(encoding="utf-8").split(), proc.stdout


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["sequential", "xdist"])
def test_a_fabtest_run_does_not_import_hypothesis(tmp_path: Path, workers: list[str]) -> None:
    pytest.importorskip("_hypothesis_pytestplugin")  # the plugin that would import it is installed
    _project(tmp_path)
    loaded, _ = _run(tmp_path, "features", *workers)
    assert loaded == ["False"] * (3 if workers else 1)  # the controller and each worker


def test_a_run_with_hypothesis_tests_keeps_its_summary(tmp_path: Path) -> None:
    pytest.importorskip("_hypothesis_pytestplugin")
    _project(tmp_path)
    (tmp_path / "test_props.py").write_text(HYPOTHESIS_TEST, encoding="utf-8")
    loaded, out = _run(tmp_path, "features", "test_props.py", "--hypothesis-show-statistics")
    assert loaded == ["True"]
    assert "Hypothesis Statistics" in out and "test_integers" in out
