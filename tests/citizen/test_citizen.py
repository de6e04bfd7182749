"""fabtest is a good citizen: a plain pytest-bdd project runs as if fabtest were not installed.

Each project under ``projects/`` has no ``[tool.fabtest]`` table. It is copied to a temporary
directory and run twice in a subprocess, with fabtest installed and with ``-p no:fabtest`` (as if
it were not): the per-test outcomes, their messages, the counts and the exit code must be
identical, and the run with fabtest must print nothing of fabtest's and write no results.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.child import child_env

PROJECTS = Path(__file__).parent / "projects"
_OUTCOME_LINE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) ")
_DURATION = re.compile(r" in [0-9.]+s( \([0-9:]+\))?")


@dataclass
class Outcome:
    returncode: int
    tests: list[str]  # sorted "-rA" lines: outcome, node id and message
    counts: str  # the last line, without its duration
    output: str


def _run(project: Path, *args: str) -> Outcome:
    env = child_env("FABTEST_")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:randomly", "-p", "no:cacheprovider", *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    output = proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    return Outcome(
        returncode=proc.returncode,
        tests=sorted(line for line in lines if _OUTCOME_LINE.match(line)),
        counts=_DURATION.sub("", lines[-1]) if lines else "",
        output=output,
    )


@pytest.fixture
def copy_project(tmp_path: Path):
    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(PROJECTS / name, target)
        return target

    return copy


@pytest.mark.parametrize("name", ["module_steps", "decorator_steps", "xdist_project"])
def test_plain_pytest_bdd_project_runs_as_without_fabtest(copy_project, name: str) -> None:
    project = copy_project(name)
    without = _run(project, "-p", "no:fabtest")
    with_fabtest = _run(project)

    assert without.tests, without.output  # the project really ran tests
    assert with_fabtest.returncode == without.returncode, with_fabtest.output
    assert with_fabtest.tests == without.tests, with_fabtest.output
    assert with_fabtest.counts == without.counts, with_fabtest.output
    assert "fabtest" not in with_fabtest.output.lower(), with_fabtest.output
    assert not (project / "results").exists()


def test_the_comparison_can_fail_when_fabtest_is_enabled(copy_project) -> None:
    """The same project opted in with --fabtest does differ: the test above is not vacuous."""
    project = copy_project("module_steps")
    without = _run(project, "-p", "no:fabtest")
    # its steps are the test module's, which the features fabtest collects cannot see: collection
    # says so (a collection error per feature); going on past it, the scenarios run and fail
    enabled = _run(project, "--fabtest", "--continue-on-collection-errors")
    assert enabled.tests != without.tests  # fabtest collects the .feature files itself
    assert "fabtest experiment" in enabled.output
    assert (project / "results").is_dir()


def test_a_pyproject_table_opts_in(copy_project) -> None:
    project = copy_project("module_steps")
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text(encoding="utf-8") + "\n[tool.fabtest]\n", encoding="utf-8")
    enabled = _run(project)
    # collected by fabtest, which finds at collection that its one step is defined where it cannot be seen
    assert ("features/unbound.feature:3: no step definition matches this step (Given an empty cart); the step "
            "defined in test_cart matches it, but only that module's tests see it: move it to a conftest.py") \
        in enabled.output, enabled.output
    assert enabled.returncode == 2  # nothing ran (the run with --fabtest above goes past it and writes results)


def test_dash_p_fabtest_opts_in(copy_project) -> None:
    project = copy_project("module_steps")
    enabled = _run(project, "-p", "fabtest", "features/unbound.feature")
    assert "ERROR collecting features/unbound.feature" in enabled.output, enabled.output  # collected by fabtest


def test_naming_a_feature_file_while_dormant_says_how_to_opt_in(copy_project) -> None:
    project = copy_project("module_steps")
    dormant = _run(project, "features/unbound.feature")
    hints = [line for line in dormant.output.splitlines() if "fabtest" in line]
    assert hints == ["fabtest is installed but not enabled for this project, so .feature files are not collected "
                     "by it: add a [tool.fabtest] table to pyproject.toml or run with --fabtest"], dormant.output
    assert not (project / "results").exists()
