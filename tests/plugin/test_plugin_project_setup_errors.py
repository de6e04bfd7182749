"""Behaviour a new user relies on: project modules import, CLI agents run in the scenario's
directory, around() failures and bad options are one-line errors."""

from __future__ import annotations

import subprocess
import sys


def test_agent_module_of_the_project_imports_with_plain_pytest(pytester):
    """`pytest` (unlike `python -m pytest`) does not put the project on sys.path; fabtest does."""
    pytester.makefile(".toml", pyproject='[tool.fabtest]\nagent = "myapp.bot:build"\n')
    pytester.mkpydir("myapp")
    pytester.path.joinpath("myapp", "bot.py").write_text("def build(context):\n    return lambda m: 'hello'\n")
    features = pytester.mkdir("features")
    features.joinpath("hello.feature").write_text(
        'Feature: F\n  Scenario: S\n    When the user says "hi"\n    Then the response must match "hello"\n')
    # -P: no current directory on sys.path, as with the `pytest` script
    proc = subprocess.run([sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "hello.feature",
                           "--fabtest-no-results"], cwd=features, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "1 passed" in proc.stdout


def test_cli_agent_runs_in_the_scenario_working_directory(project):
    project.pyproject('agent = "fabtest.demo.fake_cli:build_cli_agent"')
    project.feature("features/cli.feature", '''
        Feature: CLI
          Scenario: Booking writes a file where the file steps look
            When the user says "Berlin, 12 March, 10 people"
            And the user says "Spreeblick Loft"
            And the user says "yes"
            Then the agent must call "book_venue"
            And the file "booking.txt" must exist
            And the file "booking.txt" must contain "12 March"
    ''')
    result = project.run("features")
    result.assert_outcomes(passed=1)
    assert not (project.path / "booking.txt").exists()  # nothing written into the project


AROUND = '''
import contextlib

class Exits:
    def chat(self, messages, on_tool_call=None):
        return "hello"

    @contextlib.contextmanager
    def around(self):
        yield
        raise RuntimeError("rollback failed")

class Enters(Exits):
    def around(self):
        raise RuntimeError("db connection refused")
'''


def test_around_failures_are_one_line_errors(project):
    project.pyproject('agent = "mybot:Exits"', extra='[tool.fabtest.agents]\nenters = "mybot:Enters"\n')
    project.agent(AROUND)
    project.feature("features/around.feature", '''
        Feature: Around
          Scenario: Exit fails
            When the user says "hi"

          Scenario: Entry fails
            Given the agent "enters"
            When the user says "hi"
    ''')
    result = project.run("features")
    result.assert_outcomes(failed=2)
    out = project.output(result)
    assert "around() failed on exit: RuntimeError: rollback failed" in out
    assert "around() failed on entry: RuntimeError: db connection refused" in out
    assert "Traceback" not in out
    by_name = project.scenarios()
    assert by_name["Exit fails"]["failure_type"] == "error" and not by_name["Exit fails"]["passed"]
    assert by_name["Entry fails"]["failure_type"] == "error"


def test_bad_option_values_are_usage_errors(project):
    project.pyproject('agent = "mybot:Exits"')
    project.agent(AROUND)
    project.feature("features/f.feature", 'Feature: F\n  Scenario: S\n    When the user says "hi"\n')
    for args, message in ((("--fabtest-experiment-id", "../x"), "--fabtest-experiment-id '../x'"),
                          (("--fabtest-iterations", "0"), "--fabtest-iterations: expected 1 to 10,000 iterations, got 0"),
                          (("--fabtest-agent-timeout", "0"), "--fabtest-agent-timeout")):
        result = project.run("features", *args)
        assert result.ret == 4, args  # pytest's usage-error exit code
        assert message in project.output(result)


def test_unset_variable_in_an_agent_table_is_named(project, monkeypatch):
    monkeypatch.delenv("BOT_TOKEN", raising=False)
    project.pyproject('agent = { http = "http://127.0.0.1:9/chat", headers = { Authorization = "Bearer ${BOT_TOKEN}" } }')
    project.feature("features/f.feature", 'Feature: F\n  Scenario: S\n    When the user says "hi"\n')
    result = project.run("features", "--fabtest-no-preflight")  # the scenario's own guard (pre-flight: tests/preflight)
    result.assert_outcomes(failed=1)
    assert "${BOT_TOKEN}, which is not set" in project.output(result)


def test_reusing_an_experiment_id_says_it_replaces_the_old_file(project):
    project.pyproject('agent = "mybot:Exits"')
    project.agent(AROUND.replace("raise RuntimeError(\"rollback failed\")", "pass"))
    project.feature("features/f.feature", 'Feature: F\n  Scenario: S\n    When the user says "hi"\n')
    first = project.run("features", "--fabtest-experiment-id", "exp_again")
    assert "is replaced" not in project.output(first)
    second = project.run("features", "--fabtest-experiment-id", "exp_again")
    assert "experiment exp_again existed and is replaced by this run" in project.output(second)
