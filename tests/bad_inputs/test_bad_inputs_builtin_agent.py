"""Bad built-in and OpenAI chat agent tables: one line naming the step that built the agent, its table and the key.

Run through pytest on a throwaway project with no LLM key set, so a broken table is reported as
itself and not hidden behind "no key" (a good table without a key is a skip).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.bad_inputs import BASE_ARGS, write_file

# beside corpus/, whose every file test_bad_inputs.py expects in its own CASES
CORPUS = Path(__file__).parent / "corpus_builtin_agent"

CASES: dict[str, tuple[str, ...]] = {
    "unknown_key.toml": ("helper.feature:4", "[tool.fabtest.agents.helper]", "unknown key 'instrucions'"),
    "mcp_without_command.toml": ("helper.feature:4", "[tool.fabtest.agents.helper]", "mcp[1]", "give command ="),
    "missing_skill.toml": ("helper.feature:4", "skills[0]", "'skills/booking' has no SKILL.md"),
    "openai_agent_bad_url.toml": ("helper.feature:4", "[tool.fabtest.agents.helper]", "openai must be the endpoint's URL"),
}

FEATURE = '''
Feature: Helper
  Scenario: Uses the agent
    Given the agent "helper"
    When the user says "hi"
'''


def test_every_corpus_file_has_a_case() -> None:
    assert {p.name for p in CORPUS.iterdir()} == set(CASES)


@pytest.mark.parametrize("preflight", [True, False], ids=["before the run", "with --fabtest-no-preflight"])
@pytest.mark.parametrize("case", CASES)
def test_bad_agent_table_gives_one_line(case: str, preflight: bool, pytester: pytest.Pytester,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The pre-flight reports the table once before the run (exit 4); without it, the scenario that
    builds the agent fails with the same line and its step (exit 1)."""
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    root = pytester.path
    shutil.copy(CORPUS / case, root / "pyproject.toml")
    write_file(root, "helper.feature", FEATURE)
    result = pytester.runpytest(*BASE_ARGS, "-q", str(root), *([] if preflight else ["--fabtest-no-preflight"]))
    assert result.ret == (pytest.ExitCode.USAGE_ERROR if preflight else pytest.ExitCode.TESTS_FAILED)
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output, output
    expected = [text for text in CASES[case] if not (preflight and text.startswith("helper.feature"))]
    if preflight:
        expected = [text.replace("[tool.fabtest.agents.helper]", "[tool.fabtest.agents] helper") for text in expected]
        expected.append("fabtest pre-flight")
    lines = [line for line in output.splitlines() if all(text in line for text in expected)]
    assert lines, f"no single line holds all of {expected}:\n{output}"
