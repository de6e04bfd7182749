"""The Then steps fabtest score checks are worded as the pytest plugin's steps: each production pattern,
on an example, is also a step of the plugin's vocabulary (a feature reads the same under both)."""

from __future__ import annotations

import re

import pytest

from fabtest.production.vocabulary import STEPS, matching
from fabtest.pytest_plugin import steps, tool_steps

EXAMPLES = [
    'the conversation should satisfy "polite"', 'every response must satisfy "concise"',
    'the response should satisfy "The agent answers the question"',
    'the response must not match "(?i)sorry"', 'the response should match "BK-\\d+"',
    'the agent must call "book_venue"', 'the agent must not call "delete_account"',
    'the agent must call "book_venue" with:',
    'the conversation must not include a call to "delete_account"',
    'the conversation should include a call to "search_venues"',
    "the conversation should take at most 6 turns", "the conversation must cost less than $0.05",
    "every response should take less than 3 seconds", "the response must take less than 2.5 seconds",
    'the transcript should contain "Booked"', 'the response must be grounded in "search_venues"',
    'the response should have the intent "offer alternatives"',
    'the agent must call "search_venues" before "book_venue"',
    'the conversation should call the tools in order:', 'the agent must call "book_venue" at most 1 time',
    'the conversation must only call tools from: "search_venues, book_venue"',
]


def _plugin_patterns() -> list[re.Pattern[str]]:
    prefix = "pytestbdd_stepdef_then_"
    return [re.compile(name[len(prefix):]) for module in (steps, tool_steps) for name in vars(module)
            if name.startswith(prefix)]


@pytest.mark.parametrize("text", EXAMPLES)
def test_every_production_step_is_a_step_of_the_plugin(text: str) -> None:
    assert matching(text) is not None, text
    assert any(p.fullmatch(text) for p in _plugin_patterns()), f"not a pytest step: {text}"


def test_every_production_pattern_has_an_example() -> None:
    for pattern, _check in STEPS:
        assert any(pattern.fullmatch(text) for text in EXAMPLES), pattern.pattern


def test_the_cli_reference_names_every_option_of_score_and_import() -> None:
    import argparse
    from pathlib import Path

    from fabtest.cli import import_conversation, score

    reference = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md").read_text()
    sub = argparse.ArgumentParser().add_subparsers()
    for module in (score, import_conversation):
        module.register(sub)
    for name, parser in sub.choices.items():
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help", "--results-dir"):
                    assert option in reference, f"fabtest {name} {option} is not in docs/reference/cli.md"
