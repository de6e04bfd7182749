"""Unbounded work and unclear errors (issue 22, reliability round 2, items 5 and 7): huge repeat
counts, huge messages and huge iteration counts are refused or cut with a message; settings and
options of the wrong type are one line naming the key or option."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from support.bad_inputs import BASE_ARGS, GOOD_AGENT, GOOD_PYPROJECT, run_inline_feature

from fabtest.config.settings import Settings
from fabtest.engine.patterns import MAX_REPEAT, PatternError, compile_pattern
from fabtest.errors import MAX_MESSAGE_CHARS, UsageError
from fabtest.experiment.model import ScenarioResult

HUGE_PATTERNS = ["a{1000000000}", "a{100001}", "(?:a{10000}){10000}", "(a{1000}b){1000}", "x{,200000}",
                 "((a{100}){100}){100}", "[abc]{999999}", r"\d{4}(?:-\d{1000}){1000}", "(?i)a{2000000}"]
FINE_PATTERNS = [r"\d{4}-\d{2}", r"\{1000000\}", "[{1000000}]", "(a{300}b){300}", "x{2,}", r"(?:\w{1,100}\s){1,50}",
                 "a{100000}", "{", "a{,}", r"[\]{1000000}]"]


@pytest.mark.parametrize("pattern", HUGE_PATTERNS)
def test_a_huge_repeat_count_is_refused_at_compile(pattern: str) -> None:
    with pytest.raises(PatternError, match=f"at most {MAX_REPEAT:,}"):
        compile_pattern(pattern)


@pytest.mark.parametrize("pattern", FINE_PATTERNS)
def test_ordinary_repeat_counts_still_compile(pattern: str) -> None:
    compile_pattern(pattern)


def test_a_huge_repeat_count_in_a_feature_is_one_line(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    output = run_inline_feature(pytester, monkeypatch, 'Feature: R\n  Scenario: R\n    When the user says "hi"\n'
                                                      '    Then the response must match "a{1000000000}"\n')
    assert "bad.feature:4" in output and "repetitions (at most 100,000" in output


@pytest.mark.parametrize("size", [MAX_MESSAGE_CHARS + 1, 1_000_000, 20_000_000])
def test_a_huge_failure_message_is_kept_as_an_excerpt_that_says_so(size: int) -> None:
    message = "S" + "x" * (size - 2) + "E"
    result = ScenarioResult(id="f:000000000001", name="n", passed=False, failure_message=message)
    kept = result.failure_message or ""
    assert len(kept) < MAX_MESSAGE_CHARS + 200
    assert kept.startswith("S") and kept.endswith("E") and f"the message had {size:,} characters" in kept


def test_a_short_failure_message_is_unchanged() -> None:
    assert ScenarioResult(id="f:1", name="n", passed=False, failure_message="boom").failure_message == "boom"


RAISES_HUGE = '''
def build(context):
    def chat(messages):
        raise RuntimeError("x" * 5_000_000)
    return chat
'''


def test_an_agent_raising_a_huge_message_makes_a_small_experiment(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(goodbot=RAISES_HUGE)
    pytester.makefile(".toml", pyproject=GOOD_PYPROJECT)
    pytester.makefile(".feature", one='Feature: F\n  Scenario: S\n    When the user says "hi"\n')
    result = pytester.runpytest(*BASE_ARGS, "-q", "--fabtest-experiment-id", "exp_huge")
    assert result.ret == 1
    assert (pytester.path / "results" / "exp_huge.json").stat().st_size < 200_000
    assert len(result.stdout.str()) < 200_000


@pytest.mark.parametrize(("value", "expected"), [("0", "got 0"), ("-3", "got -3"), ("10001", "got 10,001"),
                                                 ("1000000000000", "1,000,000,000,000"), ("many", "whole number")])
def test_iterations_out_of_bounds_is_one_line_naming_the_option(pytester: pytest.Pytester, value: str,
                                                                 expected: str) -> None:
    pytester.makepyfile(goodbot=GOOD_AGENT)
    pytester.makefile(".toml", pyproject=GOOD_PYPROJECT)
    result = pytester.runpytest(*BASE_ARGS, "-q", f"--fabtest-iterations={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--fabtest-iterations" in err and expected in err, err


@pytest.mark.parametrize(("option", "value"), [("--fabtest-judge-temperature", "nan"),
                                               ("--fabtest-judge-temperature", "inf"),
                                               ("--fabtest-simulator-temperature", "nan"),
                                               ("--fabtest-agent-timeout", "nan"),
                                               ("--fabtest-agent-timeout", "-1"),
                                               ("--fabtest-scenario-timeout", "inf"),
                                               ("--fabtest-retry-budget", "-0.5")])
def test_a_bad_option_value_names_the_whole_option(pytester: pytest.Pytester, option: str, value: str) -> None:
    pytester.makepyfile(goodbot=GOOD_AGENT)
    pytester.makefile(".toml", pyproject=GOOD_PYPROJECT)
    pytester.makefile(".feature", one='Feature: F\n  Scenario: S\n    When the user says "hi"\n')
    result = pytester.runpytest(*BASE_ARGS, "-q", f"{option}={value}")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert f"{option}:" in output and "Traceback" not in output, output


WRONG_TYPES = [
    ('collect_features = "yes"', "collect_features: expected true or false, got str ('yes')"),
    ('collect_features = 1', "collect_features: expected true or false, got int (1)"),
    ('agent_timeout = "soon"', "agent_timeout: expected a number, got str ('soon')"),
    ('agent_timeout = "30"', "agent_timeout: expected a number, got str ('30')"),
    ('agent_timeout = true', "agent_timeout: expected a number, got bool (True)"),
    ('scenario_timeout = "1m"', "scenario_timeout: expected a number, got str ('1m')"),
    ('max_concurrency = 2.5', "max_concurrency: expected a whole number, got float (2.5)"),
    ('max_concurrency = "4"', "max_concurrency: expected a whole number, got str ('4')"),
    ('retry_budget = "0.1"', "retry_budget: expected a number, got str ('0.1')"),
    ('results_dir = 3', "results_dir: expected a string, got int (3)"),
    ('scenarios_dir = false', "scenarios_dir: expected a string, got bool (False)"),
    ('playbooks = 1.5', "playbooks: expected a string, got float (1.5)"),
]


@pytest.mark.parametrize(("line", "expected"), WRONG_TYPES)
def test_a_setting_of_the_wrong_type_is_one_line_naming_the_key(tmp_path: Path, line: str, expected: str) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.fabtest]\n{line}\n", encoding="utf-8")
    with pytest.raises(UsageError) as info:
        Settings.load(tmp_path, environ={})
    assert str(info.value) == f"{tmp_path / 'pyproject.toml'} [tool.fabtest]: {expected}"


def test_environment_variables_are_still_converted(tmp_path: Path) -> None:
    settings = Settings.load(tmp_path, environ={"FABTEST_AGENT_TIMEOUT": "30", "FABTEST_MAX_CONCURRENCY": "3"})
    assert settings.agent_timeout == 30.0 and settings.max_concurrency == 3


@pytest.mark.parametrize("timeout", ["-1", "0", "inf", "nan", '"soon"', "true"])
def test_an_http_agent_timeout_that_is_not_a_positive_number_is_one_line(timeout: str) -> None:
    from fabtest.agents.registry import make_agent

    if timeout == "nan":
        value: object = math.nan
    elif timeout == "inf":
        value = math.inf
    else:
        import tomllib

        value = tomllib.loads(f"v = {timeout}")["v"]
    with pytest.raises(UsageError) as info:
        make_agent({"http": "http://127.0.0.1:9/chat", "timeout": value}, {}, where="pyproject.toml [tool.fabtest] agent")
    message = str(info.value)
    assert "\n" not in message and "timeout: expected a positive, finite number of seconds" in message
