"""Shared helpers for the fabtest plugin tests: a small project builder around ``pytester``.

Every test writes a throwaway project (``pyproject.toml`` with ``[tool.fabtest]``, an agent
module, ``.feature`` files) into the pytester directory and runs pytest on it, in-process unless
isolation requires a subprocess. Results go to ``<project>/results`` and are read back as JSON.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# pytester is enabled for the whole suite by `-p pytester` in pyproject addopts

# Plugins the inner runs do not need; ``unraisableexception`` runs gc.collect() five times per
# in-process run, which dominates the cost of a small project inside a big test process.
BASE_ARGS = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:unraisableexception",
             "-p", "no:hypothesispytest", "-p", "no:benchmark")


class Project:
    """A throwaway fabtest project inside ``pytester.path``."""

    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester
        self.path: Path = pytester.path
        self.results_dir = self.path / "results"

    # -- writing -----------------------------------------------------------------------------------
    def pyproject(self, fabtest: str = 'agent = "mybot:build"', extra: str = "") -> Path:
        """A pyproject.toml with ``[tool.fabtest]`` (body given) and ``pythonpath = ["."]``."""
        text = (
            "[tool.pytest.ini_options]\n"
            'pythonpath = ["."]\n\n'
            "[tool.fabtest]\n" + textwrap.dedent(fabtest).strip() + "\n"
        )
        if extra:
            text += "\n" + textwrap.dedent(extra).strip() + "\n"
        return self.write("pyproject.toml", text)

    def write(self, relative: str, text: str) -> Path:
        target = self.path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return target

    def agent(self, code: str, module: str = "mybot") -> Path:
        return self.write(f"{module}.py", code)

    def feature(self, relative: str, text: str) -> Path:
        return self.write(relative, text)

    # -- running -----------------------------------------------------------------------------------
    def args(self, *args: str) -> list[str]:
        return [*BASE_ARGS, "--fabtest-results-dir", str(self.results_dir), *args]

    def run(self, *args: str) -> pytest.RunResult:
        return self.pytester.runpytest(*self.args(*args))

    def run_subprocess(self, *args: str) -> pytest.RunResult:
        return self.pytester.runpytest_subprocess(*self.args(*args))

    @staticmethod
    def output(result: pytest.RunResult) -> str:
        """Everything the run printed, stdout and stderr."""
        return result.stdout.str() + "\n" + result.stderr.str()

    # -- reading results ----------------------------------------------------------------------------
    def experiment(self) -> dict[str, Any]:
        files = [p for p in self.results_dir.glob("*.json") if not p.name.startswith(".")]
        assert len(files) == 1, f"expected one experiment file, found {files}"
        return json.loads(files[0].read_text(encoding="utf-8"))

    def scenarios(self) -> dict[str, dict[str, Any]]:
        """``scenario_results`` keyed by scenario name (names are unique in these tests)."""
        results = self.experiment()["scenario_results"]
        by_name = {r["name"]: r for r in results}
        assert len(by_name) == len(results), "scenario names must be unique for this helper"
        return by_name

    @staticmethod
    def line_of(text: str, needle: str) -> int:
        """1-based line number of the first line of (dedented) ``text`` containing ``needle``."""
        for number, line in enumerate(textwrap.dedent(text).lstrip("\n").splitlines(), start=1):
            if needle in line:
                return number
        raise AssertionError(f"{needle!r} not in text")

    def log(self, name: str = "log.jsonl") -> list[dict[str, Any]]:
        """Lines an agent appended to ``<project>/<name>`` (works across processes)."""
        path = self.path / name
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass
class Run:
    """What one inner pytest run left behind, kept after its pytester directory is gone."""

    path: Path
    ret: int
    outcomes: dict[str, int]
    output: str
    stdout_lines: list[str]
    experiment: dict[str, Any] | None
    log: list[dict[str, Any]]

    @property
    def scenarios(self) -> dict[str, dict[str, Any]]:
        assert self.experiment is not None
        return {r["name"]: r for r in self.experiment["scenario_results"]}

    def assert_outcomes(self, **expected: int) -> None:
        keys = ("passed", "failed", "skipped", "errors", "xfailed", "xpassed", "deselected")
        got = {k: self.outcomes.get(k, 0) for k in keys}
        want = {k: expected.get(k, 0) for k in keys}
        assert got == want, self.output


_RUNS: dict[str, Run] = {}


@pytest.fixture
def shared_run(project: Project) -> Any:
    """``shared_run(key, setup, *args)``: run a project once per test process and reuse the outcome.

    Several tests inspect the same (deterministic) run from different angles; re-running the inner
    pytest for each of them would only cost time.
    """

    def run(key: str, setup: Any, *args: str) -> Run:
        if key not in _RUNS:
            setup(project)
            result = project.run(*args)
            files = [p for p in project.results_dir.glob("*.json") if not p.name.startswith(".")]
            _RUNS[key] = Run(
                path=project.path, ret=int(result.ret), outcomes=result.parseoutcomes(),
                output=project.output(result), stdout_lines=list(result.stdout.lines),
                experiment=json.loads(files[0].read_text(encoding="utf-8")) if len(files) == 1 else None,
                log=project.log(),
            )
        return _RUNS[key]

    return run


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Project:
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "FABTEST_AGENT", "FABTEST_RESULTS_DIR",
                "FABTEST_AGENT_TIMEOUT", "FABTEST_LLM_CACHE", "FABTEST_JUDGE_PROVIDER", "FABTEST_SIMULATOR_PROVIDER"):
        monkeypatch.delenv(var, raising=False)
    return Project(pytester)


