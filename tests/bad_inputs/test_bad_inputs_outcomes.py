"""Right outcome, right exit code (issue 22 point 6; reliability round 2, item 6): a scenario skipped
before it ran is recorded with its reason, a hung ``metadata()`` is a timeout, a bad shard is refused
in every mode, and an interrupted run exits with pytest's "interrupted" code."""

from __future__ import annotations

import json

import pytest
from support.bad_inputs import BASE_ARGS, GOOD_AGENT, GOOD_PYPROJECT

TWO_SCENARIOS = '''
Feature: Two
  Scenario: Runs
    When the user says "hi"
    Then the response must match "hello"

  @skip
  Scenario: Tagged skip
    When the user says "hi"
    Then the response must match "hello"

  Scenario: Skipped by the conftest
    When the user says "hi"
    Then the response must match "hello"
'''

SKIPPING_CONFTEST = '''
import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "conftest" in item.name:
            item.add_marker(pytest.mark.skip(reason="flaky backend, see TICKET-12"))
'''


def _project(pytester: pytest.Pytester, agent: str = GOOD_AGENT) -> None:
    pytester.makepyfile(goodbot=agent)
    pytester.makefile(".toml", pyproject=GOOD_PYPROJECT)


def _doc(pytester: pytest.Pytester, exp_id: str) -> dict:
    return json.loads((pytester.path / "results" / f"{exp_id}.json").read_text(encoding="utf-8"))


def test_scenarios_skipped_at_collection_are_recorded_with_their_reason(pytester: pytest.Pytester) -> None:
    _project(pytester)
    pytester.makepyfile(conftest=SKIPPING_CONFTEST)
    pytester.makefile(".feature", two=TWO_SCENARIOS)
    result = pytester.runpytest(*BASE_ARGS, "-q", "--fabtest-experiment-id", "exp_skips")
    result.assert_outcomes(passed=1, skipped=2)
    doc = _doc(pytester, "exp_skips")
    assert doc["summary"]["skipped"] == 2, doc["summary"]
    by_name = {s["name"]: s for s in doc["scenario_results"]}
    assert by_name["Skipped by the conftest"]["skipped"] is True
    assert by_name["Skipped by the conftest"]["skip_reason"] == "flaky backend, see TICKET-12"
    assert by_name["Tagged skip"]["skipped"] is True and by_name["Runs"]["passed"] is True


HANGING_METADATA = '''
import threading
from fabtest import AgentResponse

STOP = threading.Event()


class Bot:
    def chat(self, messages):
        return AgentResponse(text="hello")

    def metadata(self):
        STOP.wait(30)  # "hangs" (bounded so the test process never keeps a thread for long)
        return {}


def build(context):
    return Bot()
'''


def test_a_hung_metadata_is_a_timeout_not_a_pass(pytester: pytest.Pytester) -> None:
    _project(pytester, HANGING_METADATA)
    pytester.makefile(".toml", pyproject=GOOD_PYPROJECT.replace('results_dir = "results"',
                                                                'results_dir = "results"\nagent_timeout = 0.5'))
    pytester.makefile(".feature", one='Feature: F\n  Scenario: S\n    When the user says "hi"\n'
                                      '    Then the response must match "hello"\n')
    result = pytester.runpytest_subprocess(*BASE_ARGS, "-q", "--fabtest-experiment-id", "exp_meta")
    output = result.stdout.str()
    assert result.ret == 1, output
    [scenario] = _doc(pytester, "exp_meta")["scenario_results"]
    assert scenario["passed"] is False and scenario["failure_type"] == "timeout"
    assert "metadata() did not answer within 0.5s" in scenario["failure_message"]


@pytest.mark.parametrize("mode", [[], ["--fabtest-no-results"]])
@pytest.mark.parametrize("shard", ["3/2", "0/2", "1/0", "a/b", "-1/3"])
def test_a_bad_shard_is_a_usage_error_in_every_mode(pytester: pytest.Pytester, shard: str, mode: list[str]) -> None:
    _project(pytester)
    pytester.makefile(".feature", one='Feature: F\n  Scenario: S\n    When the user says "hi"\n')
    result = pytester.runpytest(*BASE_ARGS, "-q", f"--fabtest-shard={shard}", *mode)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert "--fabtest-shard" in output


INTERRUPTING_CONFTEST = '''
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.pluginmanager.register(Interrupt(), "interrupt-late")


class Interrupt:
    """Ctrl-C while the run waits for the judge's last verdicts (after every scenario ran)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session):
        from fabtest.pytest_plugin.plugin import SESSION_KEY

        fabtest = session.config.stash[SESSION_KEY]

        def interrupted():
            raise KeyboardInterrupt

        fabtest.late.wait = interrupted
        return (yield)
'''


def test_ctrl_c_while_waiting_for_the_last_verdicts_exits_interrupted(pytester: pytest.Pytester) -> None:
    _project(pytester)
    pytester.makepyfile(conftest=INTERRUPTING_CONFTEST)
    pytester.makefile(".feature", one='Feature: F\n  Scenario: S\n    When the user says "hi"\n'
                                      '    Then the response must match "hello"\n')
    result = pytester.runpytest_subprocess(*BASE_ARGS, "-q", "--fabtest-experiment-id", "exp_int")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    assert _doc(pytester, "exp_int")["experiment"]["interrupted"] is True


ACP_FEATURE = '''
Feature: ACP updates
  Scenario: Malformed update
    When the user says "malformed"
    Then the response must match "something the agent never said"

  Scenario: Lone surrogate
    When the user says "surrogate"
    Then the response must match "a"
'''


def test_a_malformed_acp_update_is_the_agents_error_not_a_failed_check(pytester: pytest.Pytester) -> None:
    """The SDK logs and drops a session update it cannot read; the reply is then incomplete, and
    the scenario used to end as an ``assertion`` of the check that read it."""
    import sys

    from support.acp import ECHO as ECHO_ACP

    pytester.makefile(".toml", pyproject=(
        '[tool.fabtest]\nresults_dir = "results"\nagent_timeout = 120\n\n[tool.fabtest.agents]\n'
        f'echo = {{ acp = [{json.dumps(sys.executable)}, {json.dumps(ECHO_ACP)}], timeout = 60 }}\n'))
    pytester.makefile(".feature", acp=ACP_FEATURE.replace("Feature: ACP updates\n",
                                                          'Feature: ACP updates\n  Background:\n    Given the agent "echo"\n'))
    result = pytester.runpytest_subprocess(*BASE_ARGS, "-q", "--fabtest-experiment-id", "exp_acp")
    by_name = {s["name"]: s for s in _doc(pytester, "exp_acp")["scenario_results"]}
    malformed = by_name["Malformed update"]
    assert (malformed["passed"], malformed["failure_type"]) == (False, "error"), result.stdout.str()
    assert "malformed session update" in malformed["failure_message"]
    assert "agent_message_chunk.content: Input should be" in malformed["failure_message"]
    assert by_name["Lone surrogate"]["passed"] is True, by_name["Lone surrogate"]  # U+FFFD, not a crash
