"""Pre-flight: a run whose agent does not import, whose HTTP agent is down or whose CLI is missing
stops before the first scenario with one line naming what and why (pytest exit 4, ``fabtest run``
exit 2), and spends nothing. The LLMs are probed through the real google-genai client against
FakeGemini, only when the run needs them and a key is set; under pytest beside the first scenario
(it does not delay it), and a failed probe stops the run the same way: no scenario starts after
it, no experiment is written.
"""

from __future__ import annotations

import json
import re
import socket
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fabtest.cli import main
from fabtest.llm.limits import PROBE_PROMPT
from fabtest.testing import FakeGemini
from fabtest.testing.fake_gemini import FakeRequest

ARGS = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:hypothesispytest", "-p", "no:benchmark")
BOTS = "def good(context):\n    return lambda messages: 'hello, happy to help'\n"
DETERMINISTIC = 'Feature: Pre-flight\n  Scenario: Plain\n    When the user says "hi"\n    Then the response must match "hello"\n'
JUDGED = ('Feature: Pre-flight\n  Scenario: Judged\n    When the user says "hi there"\n'
          '    Then the response should satisfy "The agent is polite"\n')
SIMULATED = ('\n  Scenario: Simulated\n    Given a simulated user with the goal "Say hello"\n'
             '    Given the simulation takes at most 1 turns\n    When the simulated user talks to the agent\n')


def _using(agent: str) -> str:
    """A feature whose scenario talks to the named agent (the pre-flight checks only agents in use)."""
    return DETERMINISTIC.replace("  Scenario: Plain\n", f'  Scenario: Plain\n    Given the agent "{agent}"\n')


_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "FABTEST_AGENT",
        "FABTEST_RESULTS_DIR", "FABTEST_LLM_CACHE", "FABTEST_JUDGE_PROVIDER", "FABTEST_SIMULATOR_PROVIDER",
        "FABTEST_JUDGE_MODEL", "FABTEST_SIMULATOR_MODEL", "FABTEST_PLAYBOOK_AGENT", "FABTEST_GEMINI_CLI")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


_CRITERION = re.compile(r"^\d+\. name: (.+)$", re.MULTILINE)


def _handler(request: FakeRequest) -> Any:
    """A judge that passes every criterion; a user who is done at once."""
    if "role-playing a HUMAN USER" in request.text:
        return {"message": "Thanks, bye.", "goal_complete": True}
    if "CRITERIA" in request.text:
        names = [n.strip() for n in _CRITERION.findall(request.prompt)]
        return {"verdicts": [{"criterion": n, "verdict": "passed", "reasoning": "fine"} for n in names]}
    return "OK"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    with FakeGemini(handler=_handler) as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        yield server


def _project(pytester: pytest.Pytester, feature: str = DETERMINISTIC, config: str = "") -> Path:
    pyproject = f'''
    [tool.pytest.ini_options]
    pythonpath = ["."]

    [tool.fabtest]
    agent = "bots:good"
    results_dir = "results"
    {textwrap.dedent(config).strip()}

    [tool.fabtest.judge]
    backoff = 0.01
    max_retries = 2
    '''
    pytester.makefile(".toml", pyproject=textwrap.dedent(pyproject))
    (pytester.path / "bots.py").write_text(BOTS, encoding="utf-8")
    (pytester.path / "features").mkdir(exist_ok=True)
    (pytester.path / "features" / "preflight.feature").write_text(feature, encoding="utf-8")
    return pytester.path


def _stopped(result: pytest.RunResult, *reason: str, probe: bool = False) -> str:
    """The run stopped as a usage error, before any scenario (a ``probe`` of an LLM: no experiment
    written, whatever ran beside the probe); returns the one pre-flight line."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    err = result.stderr.str()
    lines = [line for line in err.splitlines() if "pre-flight" in line]
    assert len(lines) == 1, err
    for text in reason:
        assert text in lines[0], lines[0]
    assert "--fabtest-no-preflight" in lines[0]
    assert "Traceback" not in err and "INTERNALERROR" not in result.stdout.str() + err
    if probe:
        assert not list(Path.cwd().glob("results/*.json")), "a run stopped by the pre-flight writes no experiment"
    else:
        assert not (result.stdout.str().count(" passed") or result.stdout.str().count(" failed"))
    return lines[0]


def _probes(fake: FakeGemini) -> list[str]:
    return [r.model for r in fake.requests if r.prompt == PROBE_PROMPT]


# -- agents ------------------------------------------------------------------------------------------
def test_an_agent_that_does_not_import_stops_the_run(pytester: pytest.Pytester) -> None:
    root = _project(pytester, config='agent = "nosuch_module:bot"'.replace("agent", "agent", 1))
    (root / "pyproject.toml").write_text((root / "pyproject.toml").read_text().replace(
        'agent = "bots:good"\n', ""), encoding="utf-8")
    result = pytester.runpytest(*ARGS, "features")
    _stopped(result, "[tool.fabtest] agent: agent 'nosuch_module:bot' does not import: ModuleNotFoundError")
    assert not (root / "results").exists()


def test_a_named_agent_with_a_missing_attribute_is_named(pytester: pytest.Pytester) -> None:
    _project(pytester, _using("helper"), config='[tool.fabtest.agents]\nhelper = "bots:missing"')
    _stopped(pytester.runpytest(*ARGS, "features"), "[tool.fabtest.agents] helper", "has no attribute 'missing'")


def test_agents_no_selected_scenario_uses_are_not_checked(pytester: pytest.Pytester) -> None:
    """An unused HTTP agent with an unset ${VAR} and a broken unused agent do not block a run (issue 18)."""
    _project(pytester, config='[tool.fabtest.agents]\nhelper = "bots:missing"\n'
                              'web = {http = "http://127.0.0.1:${AGENT_PORT_NOT_SET}/chat"}')
    pytester.runpytest(*ARGS, "features").assert_outcomes(passed=1)


def test_an_agent_a_feature_names_that_does_not_exist_is_named_before_the_run(pytester: pytest.Pytester) -> None:
    _project(pytester, _using("helpr"), config='[tool.fabtest.agents]\nhelper = "bots:good"')
    _stopped(pytester.runpytest(*ARGS, "features"), 'features/preflight.feature:3: Given the agent "helpr": unknown agent', "did you mean 'helper'")


def test_an_http_agent_that_is_down_is_named_without_its_secret(pytester: pytest.Pytester,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago and now refuses connections
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("BOT_TOKEN", "s3cr3t-token")
    _project(pytester, _using("web"),
             config=f'[tool.fabtest.agents]\nweb = {{http = "http://127.0.0.1:{port}/chat?t=${{BOT_TOKEN}}"}}')
    result = pytester.runpytest(*ARGS, "features")
    _stopped(result, "[tool.fabtest.agents] web", f"http://127.0.0.1:{port} does not accept connections")
    assert "s3cr3t-token" not in result.stdout.str() + result.stderr.str()


def test_an_http_agent_with_an_unset_variable_is_named(pytester: pytest.Pytester) -> None:
    _project(pytester, _using("web"),
             config='[tool.fabtest.agents]\nweb = {http = "http://127.0.0.1:9/chat?t=${NOT_SET_ANYWHERE}"}')
    _stopped(pytester.runpytest(*ARGS, "features"), "[tool.fabtest.agents] web", "${NOT_SET_ANYWHERE}, which is not set")


def test_an_http_agent_that_listens_passes(pytester: pytest.Pytester) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        _project(pytester, config=f'[tool.fabtest.agents]\nweb = {{http = "http://127.0.0.1:{port}/chat"}}')
        result = pytester.runpytest(*ARGS, "features")
    result.assert_outcomes(passed=1)


def test_a_missing_cli_executable_is_named(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABTEST_GEMINI_CLI", "/nonexistent/bin/gemini")
    _project(pytester, _using("cli"), config='[tool.fabtest.agents]\ncli = "fabtest.agents.cli_agent:gemini_cli"')
    _stopped(pytester.runpytest(*ARGS, "features"), "[tool.fabtest.agents] cli", "'/nonexistent/bin/gemini'",
             "not on PATH")


def test_no_preflight_skips_the_check_and_the_scenario_fails_alone(pytester: pytest.Pytester) -> None:
    _project(pytester, config='[tool.fabtest.agents]\nhelper = "bots:missing"')
    result = pytester.runpytest(*ARGS, "features", "--fabtest-no-preflight")
    result.assert_outcomes(passed=1)  # the broken named agent is never used by the scenario


def test_collect_only_does_not_check(pytester: pytest.Pytester) -> None:
    _project(pytester, config='[tool.fabtest.agents]\nhelper = "bots:missing"')
    assert pytester.runpytest(*ARGS, "features", "--collect-only").ret == pytest.ExitCode.OK


# -- LLMs --------------------------------------------------------------------------------------------
def test_a_rejected_key_stops_the_run(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    fake.add_fault(403, times=None)
    _project(pytester, JUDGED)
    line = _stopped(pytester.runpytest(*ARGS, "features"), "the judge LLM did not answer a pre-flight call",
                    "gemini gemini-2.5-flash", "HTTP 403", "check the API key", probe=True)
    assert "fake-gemini-key" not in line
    assert _probes(fake) == ["gemini-2.5-flash"]  # not retried


def test_an_unknown_model_is_named(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    fake.add_fault(404, times=None)
    _project(pytester, JUDGED, config="[tool.fabtest.simulator]\nmodel = 'gemini-9-nope'")
    _stopped(pytester.runpytest(*ARGS, "features"), "the judge LLM", "HTTP 404", probe=True)


def _slow_scenarios(request: FakeRequest) -> Any:
    time.sleep(1.0)  # the first scenario is still in flight when the probe's answer comes back
    return _handler(request)


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_a_failed_probe_starts_no_scenario_after_it(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                    concurrency: str) -> None:
    """The probe runs beside the first scenario(s); once it fails, nothing new starts."""
    with FakeGemini(handler=_slow_scenarios) as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        server.add_fault(403, times=None, pattern=re.escape(PROBE_PROMPT))
        judged = JUDGED.replace("should satisfy", "must satisfy")  # the scenario waits for its verdict
        _project(pytester, judged + "".join(judged.split("\n", 1)[1].replace("Judged", f"Judged {i}")
                                            for i in range(8)))
        result = pytester.runpytest(*ARGS, "features", "--fabtest-concurrency", concurrency)
        _stopped(result, "the judge LLM", "HTTP 403", probe=True)
        calls = [r for r in server.requests if r.prompt != PROBE_PROMPT]
    assert len(calls) <= int(concurrency), "no scenario starts once the probe has failed"


def test_the_probe_does_not_delay_the_first_scenario(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    """The probe's answer waits for the first scenario's judge call: only a probe sent beside the
    scenario (not before it) is answered with the scenario's call seen."""
    judged = threading.Event()
    seen: list[bool] = []

    def probe(request: FakeRequest) -> str:
        seen.append(judged.wait(timeout=20))
        return "OK"

    def judge(request: FakeRequest) -> Any:
        judged.set()
        return None  # on to the handler

    fake.add_rule(re.escape(PROBE_PROMPT), callback=probe)
    fake.add_rule("CRITERIA", callback=judge)
    _project(pytester, JUDGED)
    pytester.runpytest(*ARGS, "features").assert_outcomes(passed=1)
    assert seen == [True]


def test_a_healthy_judge_is_probed_once_then_the_run_goes_on(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    _project(pytester, JUDGED)
    result = pytester.runpytest(*ARGS, "features")
    result.assert_outcomes(passed=1)
    assert _probes(fake) == ["gemini-2.5-flash"]


def test_the_run_builds_one_client_per_role_and_no_sdk_client(pytester: pytest.Pytester, fake: FakeGemini,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up builds the run's own judge and simulator clients; the probe and the scenarios
    use them (no throwaway client to warm the SDK, none of the probe's own), and with a plain key
    they are fabtest's own HTTP clients: no google-genai client at all (llm/gemini_rest.py)."""
    from google import genai

    from fabtest.llm import gemini

    built: list[object] = []
    init = genai.Client.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        built.append(self)
        init(self, *args, **kwargs)

    direct: list[object] = []
    plain_direct = gemini.direct_transport

    def counting_direct(*args: Any, **kwargs: Any) -> Any:
        direct.append(plain_direct(*args, **kwargs))
        return direct[-1]

    monkeypatch.setattr(genai.Client, "__init__", counting)
    monkeypatch.setattr(gemini, "direct_transport", counting_direct)
    _project(pytester, JUDGED + SIMULATED)
    result = pytester.runpytest(*ARGS, "features", "--fabtest-no-results")
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    assert sorted(_probes(fake)) == ["gemini-2.5-flash"]  # judge and simulator share the endpoint
    assert any("role-playing a HUMAN USER" in r.text for r in fake.requests)
    assert len(direct) == 2 and all(d is not None for d in direct)
    assert built == []


def test_judge_and_simulator_on_different_models_are_probed_each(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    _project(pytester, JUDGED + SIMULATED, config="")
    pyproject = pytester.path / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n[tool.fabtest.simulator]\nmodel = 'gemini-sim'\n", encoding="utf-8")
    pytester.runpytest(*ARGS, "features", "--fabtest-no-results")
    assert sorted(_probes(fake)) == ["gemini-2.5-flash", "gemini-sim"]


def test_the_simulator_is_not_probed_when_no_scenario_simulates(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    _project(pytester, JUDGED)
    pyproject = pytester.path / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n[tool.fabtest.simulator]\nmodel = 'gemini-sim'\n", encoding="utf-8")
    pytester.runpytest(*ARGS, "features", "--fabtest-no-results")
    assert _probes(fake) == ["gemini-2.5-flash"]


def test_no_llm_step_means_no_probe(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    fake.add_fault(403, times=None)  # a broken key does not matter to a run that never asks
    _project(pytester, DETERMINISTIC)
    pytester.runpytest(*ARGS, "features").assert_outcomes(passed=1)
    assert fake.request_count == 0


def test_without_a_key_nothing_is_probed_and_llm_scenarios_skip(pytester: pytest.Pytester,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9")  # nothing listens: a call would fail
    _project(pytester, JUDGED.replace("should satisfy", "must satisfy"))
    pytester.runpytest(*ARGS, "features").assert_outcomes(skipped=1)


def test_replay_mode_probes_nothing(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    fake.add_fault(403, times=None)
    _project(pytester, JUDGED, config='llm_cache = "replay"')
    result = pytester.runpytest(*ARGS, "features", "--fabtest-no-results")
    assert result.ret != pytest.ExitCode.USAGE_ERROR
    assert _probes(fake) == []


def test_under_xdist_the_controller_probes_once(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    _project(pytester, JUDGED + JUDGED.split("\n", 1)[1].replace("Judged", "Judged again"))
    result = pytester.runpytest(*ARGS, "features", "-n", "2")
    result.assert_outcomes(passed=2)
    assert _probes(fake) == ["gemini-2.5-flash"]


def test_under_xdist_a_failure_stops_the_run(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    fake.add_fault(401, times=None)
    _project(pytester, JUDGED)
    result = pytester.runpytest(*ARGS, "features", "-n", "2")
    _stopped(result, "the judge LLM", "HTTP 401", probe=True)
    assert _probes(fake) == ["gemini-2.5-flash"]


# -- fabtest run ---------------------------------------------------------------------------------------
def _playbook_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.fabtest]\nresults_dir = 'results'\n[tool.fabtest.judge]\n"
                                             "backoff = 0.01\nmax_retries = 1\n", encoding="utf-8")
    playbook = {"name": "hello", "steps": [{"user_input": "Hi", "expected_outcome": "The agent is friendly"}]}
    (tmp_path / "hello.playbook.json").write_text(json.dumps(playbook), encoding="utf-8")
    monkeypatch.chdir(tmp_path)


def test_fabtest_run_stops_on_a_rejected_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeGemini,
                                              capfd: pytest.CaptureFixture[str]) -> None:
    _playbook_project(tmp_path, monkeypatch)
    fake.add_fault(403, times=None)
    code = main(["run", "hello.playbook.json", "--agent", "fabtest.demo:build_agent"])
    out, err = capfd.readouterr()
    assert code == 2
    assert err.count("\n") == 1, err  # judge and simulator share the endpoint: probed and named once
    assert err.startswith("fabtest run: error: fabtest pre-flight: the judge and simulator LLMs did not answer"), err
    assert "HTTP 403" in err and err.rstrip().endswith("(skip this check with --no-preflight)") and "[1/" not in out and fake.request_count == 1
    assert not (tmp_path / "results").exists()


def test_fabtest_run_names_a_missing_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capfd: pytest.CaptureFixture[str]) -> None:
    _playbook_project(tmp_path, monkeypatch)
    monkeypatch.setenv("FABTEST_GEMINI_CLI", "/nonexistent/gemini")
    code = main(["run", "hello.playbook.json"])  # the default agent: the Gemini CLI
    _, err = capfd.readouterr()
    assert code == 2 and "playbook agent" in err and "'/nonexistent/gemini', which is not on PATH" in err


def test_fabtest_run_no_preflight_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeGemini,
                                       capfd: pytest.CaptureFixture[str]) -> None:
    _playbook_project(tmp_path, monkeypatch)
    fake.add_fault(403, times=None)
    code = main(["run", "hello.playbook.json", "--agent", "fabtest.demo:build_agent", "--no-preflight"])
    out, _ = capfd.readouterr()
    assert code == 1 and "[1/1]" in out  # it ran, and the judge's 403 failed the playbook alone


STARTED_AGENT = """
import contextlib
import threading

from fabtest import AgentResponse

started = threading.Event()


class Agent:
    def __init__(self, context):
        pass

    @contextlib.contextmanager
    def around(self):
        started.set()  # an ACP agent's process starts here
        yield

    def chat(self, messages):
        return AgentResponse(text="Hello, happy to help!")
"""


def test_fabtest_run_starts_the_agent_while_the_llm_probe_is_answered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeGemini, capfd: pytest.CaptureFixture[str]) -> None:
    """The probe is a model call (seconds at a slow provider), the Gemini CLI's start seconds more: they
    overlap. The probe's answer here waits for the agent's start; were they in series it would wait 10 s."""
    _playbook_project(tmp_path, monkeypatch)
    (tmp_path / "started_agent.py").write_text(STARTED_AGENT, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import started_agent  # type: ignore[import-not-found]

    overlapped: list[bool] = []
    fake.add_rule(PROBE_PROMPT, callback=lambda request: overlapped.append(started_agent.started.wait(10)), times=1)
    code = main(["run", "hello.playbook.json", "--agent", "started_agent:Agent"])
    out, err = capfd.readouterr()
    assert code == 0, out + err
    assert overlapped == [True]
    assert out.index("[1/1] hello") < out.index("PASSED")


# -- agent tables: every problem of the agents in use, once, configuration before reachability ------------
TWO_AGENTS = ('Feature: Pre-flight\n  Scenario: One\n    Given the agent "helper"\n    When the user says "hi"\n'
              '  Scenario: Two\n    Given the agent "chat"\n    When the user says "hi"\n')


def _lines(result: pytest.RunResult) -> list[str]:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    assert " passed" not in result.stdout.str() and " failed" not in result.stdout.str()
    return [line for line in result.stderr.str().splitlines() if "pre-flight" in line]


def test_a_builtin_agent_table_is_checked_whole_with_did_you_mean(pytester: pytest.Pytester) -> None:
    _project(pytester, _using("helper"), config='[tool.fabtest.agents.helper]\ngemini = "gemini-2.5-flash"\n'
                                               'instuctions = "Be brief."\nmax_tool_rounds = "four"\n')
    line = _stopped(pytester.runpytest(*ARGS, "features"), "[tool.fabtest.agents] helper")
    assert "unknown key 'instuctions' (did you mean 'instructions'?)" in line
    assert "max_tool_rounds" in line and "'four'" in line


def test_an_acp_agent_table_is_checked_with_did_you_mean(pytester: pytest.Pytester) -> None:
    """An unknown key used to be ignored without a word (the agent ran with the default permission)."""
    _project(pytester, _using("helper"), config='[tool.fabtest.agents.helper]\nacp = ["my-acp-agent"]\n'
                                               'permision = "deny"\n')
    line = _stopped(pytester.runpytest(*ARGS, "features"), "[tool.fabtest.agents] helper")
    assert "unknown key 'permision' in an ACP agent table (did you mean 'permission'?)" in line


def test_builtin_tools_and_openai_variables_are_checked_before_the_run(pytester: pytest.Pytester) -> None:
    _project(pytester, TWO_AGENTS, config='[tool.fabtest.agents]\n'
             'helper = { gemini = "gemini-2.5-flash", tools = "nosuch_tools:TOOLS" }\n'
             'chat = { openai = "http://127.0.0.1:${OPENAI_AGENT_PORT_UNSET}/v1", model = "m" }\n')
    lines = _lines(pytester.runpytest(*ARGS, "features"))
    assert len(lines) == 2, lines
    assert "helper" in lines[0] and "'nosuch_tools:TOOLS' does not import" in lines[0]
    assert "chat" in lines[1] and "${OPENAI_AGENT_PORT_UNSET}, which is not set" in lines[1]


def test_configuration_problems_come_before_reachability(pytester: pytest.Pytester) -> None:
    """A typo in one agent's table is reported alone: no connection is tried to the other agent meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    _project(pytester, TWO_AGENTS.replace('"chat"', '"web"'), config='[tool.fabtest.agents]\n'
             'helper = { gemini = "gemini-2.5-flash", instuctions = "x" }\n'
             f'web = {{ http = "http://127.0.0.1:{port}/chat" }}\n')
    lines = _lines(pytester.runpytest(*ARGS, "features"))
    assert len(lines) == 1 and "instuctions" in lines[0], lines
