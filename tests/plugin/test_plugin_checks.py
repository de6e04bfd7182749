"""The scripted runner and the deterministic assertion steps, in both ``should`` and ``must`` forms."""

from __future__ import annotations

AGENT = '''
from pathlib import Path

from fabtest import AgentResponse, ToolCall

SEARCH = ToolCall("search_venues",
                  {"city": "Berlin", "capacity": 12, "budget": 450.5, "flexible": True, "date": "12 March",
                   "count": "7"},
                  result=[{"id": "ber-spree", "name": "Spreeblick Loft"}])


def build(context):
    workdir = Path(context["workdir"])

    def reply(messages):
        text = messages[-1].content
        if text.startswith("search"):
            return AgentResponse(text="Found 2 venues in Berlin", tool_calls=[SEARCH])
        if text == "stray":  # written to the process cwd, not to the scenario's working directory
            Path("stray.txt").write_text("lost", encoding="utf-8")
            return "Wrote stray.txt"
        if text.startswith("save"):
            target = workdir / "out" / "config.yaml"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("vlan: 100\\nname: core\\n", encoding="utf-8")
            return AgentResponse(text="Configuration saved",
                                 tool_calls=[ToolCall("write_file", {"path": "out/config.yaml"})])
        return "You said: " + text

    return reply
'''

PASSING = r'''
Feature: Deterministic checks that pass
  Scenario: Regex checks pass
    When the user says "hello there"
    Then the response must match "^You said: hello"
    And the response should match "(?i)HELLO"
    And the response must not match "(?i)sorry"
    And the response should not match "venues"
    And the agent must not call "search_venues"
    And the agent should not call "search_venues"

  Scenario: Tool call checks pass
    When the user says "search please"
    Then the agent must call "search_venues"
    And the agent should call "search_venues"
    And the agent must not call "book_venue"
    And the agent should not call "book_venue"
    And the agent must call "search_venues" with:
      | argument | value          |
      | city     | Berlin         |
      | date     | /^\d+ March$/  |
      | capacity | 12             |
      | capacity | >= 12          |
      | capacity | <= 12          |
      | capacity | > 11           |
      | capacity | < 13           |
      | budget   | > 450          |
      | budget   | 450.5          |
      | flexible | true           |
      | count    | >= 7           |
    And the agent should call "search_venues" with:
      | argument | value   |
      | city     | /^Ber/  |
      | capacity | >= 10   |
    And the agent must not call "search_venues" with:
      | argument | value  |
      | city     | Munich |

  Scenario: Conversation checks pass
    When the user says "hello"
    And the user says "search now"
    And the user says "thanks"
    Then the agent must not call "search_venues"
    And the conversation must include a call to "search_venues"
    And the conversation should include a call to "search_venues"
    And the conversation must not include a call to "book_venue"
    And the conversation should not include a call to "book_venue"
    And the conversation must take at most 3 turns
    And the conversation should take at most 5 turns
    And the transcript must contain "Found 2 venues in Berlin"
    And the transcript should contain "User: thanks"

  Scenario: File checks pass
    When the user says "save it"
    Then the file "out/config.yaml" must exist
    And the file "out/config.yaml" should exist
    And the file "out/config.yaml" must contain "vlan: 100"
    And the file "out/config.yaml" should contain "name: core"
'''


def test_every_passing_check_passes_in_both_forms(project):
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/pass.feature", PASSING)
    result = project.run("features", "-v")
    assert result.ret == 0, project.output(result)
    result.assert_outcomes(passed=4)
    by_name = project.scenarios()
    for name, entry in by_name.items():
        assert entry["passed"] and entry["failure_type"] is None, name
        statuses = {d["status"] for d in entry["evaluations"]["details"] + entry["expectations"]["details"]}
        assert statuses == {"passed"}, name
        assert all(d["mode"] == "should" for d in entry["evaluations"]["details"])
        assert all(d["mode"] == "must" for d in entry["expectations"]["details"])
    regex = by_name["Regex checks pass"]
    assert [d["type"] for d in regex["expectations"]["details"]] == ["match", "not_match", "not_call_tool"]
    assert [d["type"] for d in regex["evaluations"]["details"]] == ["match", "not_match", "not_call_tool"]
    assert regex["evaluations"]["total"] == 3 and regex["evaluations"]["rate"] == 1.0
    conv = by_name["Conversation checks pass"]
    assert conv["turns"] == 3
    assert [d["type"] for d in conv["expectations"]["details"]] == [
        "not_call_tool", "include_call", "not_include_call", "turn_count", "transcript_contains"]
    files = by_name["File checks pass"]
    assert [d["type"] for d in files["expectations"]["details"]] == ["file_exists", "file_contains"]


# Each scenario below must fail at its first `must` step; the step after it would pass, and must not run.
FAILING = r'''
Feature: Deterministic checks that fail
  Scenario: Must match fails
    When the user says "hello"
    Then the response must match "(?i)goodbye"
    And the response must match "You said"

  Scenario: Must not match fails
    When the user says "hello"
    Then the response must not match "You said"

  Scenario: Must call fails
    When the user says "hello"
    Then the agent must call "search_venues"

  Scenario: Must not call fails
    When the user says "search"
    Then the agent must not call "search_venues"

  Scenario: Must call fails in the latest turn only
    When the user says "search"
    And the user says "thanks"
    Then the agent must call "search_venues"

  Scenario: With exact value fails
    When the user says "search"
    Then the agent must call "search_venues" with:
      | argument | value  |
      | city     | Munich |

  Scenario: With regex fails
    When the user says "search"
    Then the agent must call "search_venues" with:
      | argument | value          |
      | date     | /^\d+ April$/  |

  Scenario: With missing argument fails
    When the user says "search"
    Then the agent must call "search_venues" with:
      | argument | value |
      | venue_id | x     |

  Scenario: With number on a text argument fails
    When the user says "search"
    Then the agent must call "search_venues" with:
      | argument | value |
      | city     | >= 1  |

  Scenario: Must not call with matching arguments fails
    When the user says "search"
    Then the agent must not call "search_venues" with:
      | argument | value  |
      | city     | Berlin |

  Scenario: Include fails
    When the user says "search"
    And the user says "thanks"
    Then the conversation must include a call to "book_venue"

  Scenario: Not include fails
    When the user says "search"
    And the user says "thanks"
    Then the conversation must not include a call to "search_venues"

  Scenario: Turn count fails
    When the user says "one"
    And the user says "two"
    Then the conversation must take at most 1 turn

  Scenario: Transcript fails
    When the user says "hello"
    Then the transcript must contain "Configuration saved"

  Scenario: File exist fails
    When the user says "hello"
    Then the file "out/config.yaml" must exist

  Scenario: File contain fails
    When the user says "save"
    Then the file "out/config.yaml" must contain "vlan: 200"

  Scenario: File outside the working directory is not found
    When the user says "stray"
    Then the file "stray.txt" must exist
'''

COMPARISONS = r'''
Feature: Comparisons
  Scenario Outline: A non-matching value fails (<value>)
    When the user says "search"
    Then the agent must call "search_venues" with:
      | argument | value   |
      | capacity | <value> |

    Examples:
      | value |
      | >= 13 |
      | <= 11 |
      | > 12  |
      | < 12  |
      | 13    |
'''


def test_every_failing_must_fails_its_scenario_and_says_why(project):
    """One run of FAILING: each scenario fails at once; its output and JSON say where and why."""
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/fail.feature", FAILING)
    result = project.run("features/fail.feature")
    by_name = project.scenarios()
    assert len(by_name) == FAILING.count("Scenario:")
    result.assert_outcomes(failed=len(by_name))
    for name, entry in by_name.items():
        assert entry["passed"] is False, name
        assert entry["failure_type"] == "assertion", name
        failed = [d for d in entry["expectations"]["details"] if d["status"] == "failed"]
        assert len(failed) == 1, name
        # the failing expectation is the last thing recorded: the scenario stops at once
        assert entry["expectations"]["details"][-1] == failed[0], name
    assert [d["status"] for d in by_name["Must match fails"]["expectations"]["details"]] == ["failed"]
    _failing_output(project, result)
    _failing_messages(project)


def test_a_non_matching_comparison_fails(project):
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/cmp.feature", COMPARISONS)
    result = project.run("features")
    result.assert_outcomes(failed=5)
    for entry in project.experiment()["scenario_results"]:
        assert entry["failure_type"] == "assertion"
        assert "called search_venues but not with capacity=" in entry["failure_message"]


def _failing_output(project, result):
    """A failing must prints the step location, the expectation, the reply and the tool calls."""
    out = project.output(result)
    line = project.line_of(FAILING, 'must not call "search_venues"')
    # where the step is, which step it is, what was expected, what the agent said and called
    assert f'features/fail.feature:{line}: Then the agent must not call "search_venues"' in out
    assert "expectation not_call_tool 'not_call_tool:search_venues' (must) failed" in out
    assert "agent said: 'Found 2 venues in Berlin'" in out
    assert 'agent called: search_venues(city="Berlin", capacity=12' in out
    line = project.line_of(FAILING, 'must match "(?i)goodbye"')
    assert f'features/fail.feature:{line}: Then the response must match "(?i)goodbye"' in out
    assert "no match for /(?i)goodbye/" in out
    assert "agent said: 'You said: hello'" in out
    assert "agent called: (no tool calls)" in out
    assert "Traceback" not in out


def _failing_messages(project):
    """The same information lands in the results JSON failure_message."""
    by_name = project.scenarios()
    line = project.line_of(FAILING, '"(?i)goodbye"')
    message = by_name["Must match fails"]["failure_message"]
    assert message.startswith(f'features/fail.feature:{line}: Then the response must match "(?i)goodbye"')
    assert "You said: hello" in message
    with_value = by_name["With exact value fails"]["failure_message"]
    assert "called search_venues but not with city=Munich" in with_value
    assert 'search_venues(city="Berlin"' in with_value
    latest = by_name["Must call fails in the latest turn only"]["failure_message"]
    assert "Turn 2" in latest and "You said: thanks" in latest
    assert "2 turns (max 1)" in by_name["Turn count fails"]["failure_message"]
    assert "does not exist" in by_name["File exist fails"]["failure_message"]
    assert "does not contain 'vlan: 200'" in by_name["File contain fails"]["failure_message"]
    # file paths are relative to the scenario's working directory (its tmp_path), not the cwd
    stray = by_name["File outside the working directory is not found"]["failure_message"]
    assert "stray.txt does not exist in " in stray
    assert (project.path / "stray.txt").exists()


SOFT = r'''
Feature: Soft evaluations
  Scenario: Failing shoulds never fail the scenario
    When the user says "search"
    And the user says "hello"
    Then the response should match "(?i)goodbye"
    And the response should not match "You said"
    And the agent should call "book_venue"
    And the agent should not call "nothing"
    And the agent should call "search_venues" with:
      | argument | value |
      | city     | Paris |
    And the conversation should include a call to "book_venue"
    And the conversation should not include a call to "search_venues"
    And the conversation should take at most 1 turn
    And the transcript should contain "Configuration saved"
    And the file "missing.txt" should exist
    And the file "missing.txt" should contain "x"
    And the response must match "You said: hello"
'''


def test_failing_should_leaves_the_scenario_passed_and_is_recorded(project):
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/soft.feature", SOFT)
    result = project.run("features")
    result.assert_outcomes(passed=1)
    entry = project.scenarios()["Failing shoulds never fail the scenario"]
    assert entry["passed"] is True and entry["failure_type"] is None
    details = entry["evaluations"]["details"]
    assert [(d["type"], d["status"]) for d in details] == [
        ("match", "failed"), ("not_match", "failed"), ("call_tool", "failed"), ("not_call_tool", "passed"),
        ("call_tool", "failed"), ("include_call", "failed"), ("not_include_call", "failed"),
        ("turn_count", "failed"), ("transcript_contains", "failed"), ("file_exists", "failed"),
        ("file_contains", "failed")]
    assert all(d["mode"] == "should" for d in details)
    assert entry["evaluations"]["failed"] == 10 and entry["evaluations"]["passed"] == 1
    assert [(d["type"], d["status"]) for d in entry["expectations"]["details"]] == [("match", "passed")]
    doc = project.experiment()
    assert doc["summary"]["passed"] == 1
    assert doc["summary"]["evaluation_rate"] == round(1 / 11, 4)
