"""Never green by accident: scenarios skipped because an LLM is not configured make the run fail
with exit status 6 and say so first, unless the user allowed that kind of skip (issue 18, point 2).
"""

from __future__ import annotations

import textwrap

import pytest

from fabtest.pytest_plugin.not_run import EXIT_NOT_RUN

ARGS = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:hypothesispytest", "-p", "no:benchmark")
FEATURE = textwrap.dedent('''\
    Feature: Needs a judge
      Scenario: Plain
        When the user says "hi"
        Then the response must match "hello"
      Scenario: Judged
        When the user says "hi"
        Then the response must satisfy "The agent is polite"
    ''')



def _project(pytester: pytest.Pytester, config: str = "", feature: str = FEATURE) -> None:
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\npythonpath = ["."]\n\n[tool.fabtest]\n'
                                         f'agent = "bots:good"\n{config}\n')
    (pytester.path / "bots.py").write_text("def good(messages):\n    return 'hello, happy to help'\n", encoding="utf-8")
    (pytester.path / "features").mkdir()
    (pytester.path / "features" / "judge.feature").write_text(feature, encoding="utf-8")


def _first_fabtest_line(result: pytest.RunResult) -> str:
    return next(line for line in result.outlines if line.startswith("fabtest"))


def test_a_run_whose_llm_scenarios_were_skipped_fails_with_its_own_exit_status(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest(*ARGS, "features")
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == EXIT_NOT_RUN == 6
    first = _first_fabtest_line(result)
    assert "1 scenario(s) did not run" in first and "exit status 6" in first and "--fabtest-allow-skip=llm" in first


def test_under_xdist_the_controller_fails_the_run(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest_subprocess(*ARGS, "-n", "2", "features")
    assert result.ret == EXIT_NOT_RUN, result.stdout.str()
    assert "did not run" in result.stdout.str()


@pytest.mark.parametrize("how", ["option", "setting"])
def test_allowed_skips_keep_the_run_green_and_are_still_named(pytester: pytest.Pytester, how: str) -> None:
    _project(pytester, config='allow_skip = ["llm"]' if how == "setting" else "")
    result = pytester.runpytest(*ARGS, "features", *(["--fabtest-allow-skip=llm"] if how == "option" else []))
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == pytest.ExitCode.OK
    assert "allowed" in _first_fabtest_line(result)


def test_failures_keep_exit_status_1(pytester: pytest.Pytester) -> None:
    _project(pytester, feature=FEATURE.replace('must match "hello"', 'must match "goodbye"'))
    result = pytester.runpytest(*ARGS, "features")
    result.assert_outcomes(failed=1, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_an_unknown_kind_of_skip_is_a_usage_error(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest(*ARGS, "features", "--fabtest-allow-skip=lmm")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "'lmm': unknown kind of skip; known: llm" in result.stderr.str()


def test_an_offline_script_runs_the_scenario_instead(pytester: pytest.Pytester) -> None:
    _project(pytester, config='offline_llm = "offline.yaml"')
    (pytester.path / "offline.yaml").write_text("verdicts:\n  default: passed\n", encoding="utf-8")
    result = pytester.runpytest(*ARGS, "features")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
