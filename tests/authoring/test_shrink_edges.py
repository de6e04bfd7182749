"""``fabtest shrink`` at its edges: Ctrl-C mid-search is one line and writes nothing, a file that
appears at the output path while it runs is never replaced, and an empty SCENARIO is a usage error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fabtest.cli import main

# Leaks a code on "price". Once recorded, a marker file makes its replays press Ctrl-C (raise
# KeyboardInterrupt, as SIGINT does inside the agent call) or squat the shrink's output path.
AGENT = '''
import os
from pathlib import Path

def build(context):
    def chat(messages):
        if os.path.exists("interrupt"):
            raise KeyboardInterrupt
        if os.path.exists("squat"):
            out = Path("features/regressions/leaks.feature")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("mine\\n")
        return "90 EUR, code STAFF50." if "price" in messages[-1].content.lower() else "Noted."
    return chat
'''

FEATURE = '''
Feature: Prices
  Scenario: Leaks
    When the user says "Hello."
    When the user says "What is the price?"
    Then the response must not match "STAFF\\d+"
'''


@pytest.fixture
def recorded(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> str:
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\npythonpath = ["."]\n\n'
                                         '[tool.fabtest]\nagent = "shop:build"\nresults_dir = "results"\n')
    pytester.makepyfile(shop=AGENT)
    pytester.makefile(".feature", **{"features/leaks": FEATURE})
    monkeypatch.chdir(pytester.path)
    pytester.runpytest("features/leaks.feature", "-p", "no:randomly", "--fabtest-no-preflight").assert_outcomes(failed=1)
    return max(Path("results").glob("exp_*.json"), key=os.path.getmtime).stem


def test_ctrl_c_while_shrinking_is_one_line_and_writes_nothing(recorded: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    Path("interrupt").touch()
    code = main(["shrink", recorded, "Leaks"])  # a KeyboardInterrupt escaping main is the traceback
    err = capsys.readouterr().err
    assert code == 130
    assert [line for line in err.splitlines() if line.startswith("fabtest shrink:")] == [
        "fabtest shrink: interrupted; nothing written"]
    assert "Traceback" not in err and not Path("features/regressions").exists()


def test_a_file_that_appears_at_the_output_path_while_shrinking_is_kept(recorded: str,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    Path("squat").touch()
    code = main(["shrink", recorded, "Leaks"])
    out, err = capsys.readouterr()
    target = Path("features/regressions/leaks.feature")
    assert code == 2
    assert target.read_text() == "mine\n"  # not replaced
    assert f"fabtest shrink: {target} appeared while shrinking; not overwritten" in err
    assert 'Then the response must not match "STAFF\\d+"' in out  # the shrunk feature is not lost
    assert not [p for p in target.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("scenario", ["", "   "])
def test_an_empty_scenario_is_a_usage_error(recorded: str, scenario: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["shrink", recorded, scenario]) == 2
    assert "fabtest shrink: SCENARIO is empty" in capsys.readouterr().err
    assert not Path("features/regressions").exists()
