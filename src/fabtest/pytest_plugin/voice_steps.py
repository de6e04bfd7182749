"""The steps of voice scenarios (docs/how-to/voice.md): barge-in, silence and the time to first audio.

A barge-in is decided before the turn it cuts: ``When the user interrupts after 1000 ms with "..."``
stops the agent's reply to the step before it, so the plugin tells each step what the next one is
(:data:`NEXT_STEP_KEY`) and the step that speaks reads :func:`interruption_ahead` to take the reply
only up to that point and close the agent's stream there.
"""

from __future__ import annotations

import re

import pytest
from pytest_bdd import parsers, then, when

from fabtest.engine.scenario import ScenarioState
from fabtest.errors import UsageError

__all__ = ["NEXT_STEP_KEY", "interruption_ahead"]

MODE = r"(?P<mode>should|must)"
INTERRUPT = re.compile(r'the user interrupts after (?P<ms>\d+(?:\.\d+)?) ?ms with "(?P<text>.*)"')

#: the text of the step after the one running now ("" at the last step); set by the plugin
NEXT_STEP_KEY = pytest.StashKey[str]()


def interruption_ahead(request: pytest.FixtureRequest) -> float | None:
    """The milliseconds after which the next step interrupts the reply about to be taken, if it does."""
    match = INTERRUPT.fullmatch(request.node.stash.get(NEXT_STEP_KEY, ""))
    return float(match.group("ms")) if match else None


@when(parsers.re(INTERRUPT.pattern))
def _when_interrupts(request: pytest.FixtureRequest, fabtest_scenario: ScenarioState, ms: str, text: str) -> None:
    if not fabtest_scenario.conversation.turns:
        raise UsageError(f"{fabtest_scenario.where}: the user interrupts: there is no reply to interrupt yet; "
                         'put a When the user says "..." step before it')
    fabtest_scenario.user_says(text.replace('\\"', '"'), interrupt_after_ms=interruption_ahead(request))


@when(parsers.re(r"the user stays silent for (?P<seconds>\d+(?:\.\d+)?) seconds?"))
def _when_silent(fabtest_scenario: ScenarioState, seconds: str) -> None:
    if float(seconds) <= 0 or float(seconds) > 600:
        raise UsageError(f"{fabtest_scenario.where}: the user stays silent for {seconds} seconds: expected more than "
                         "0 and at most 600 seconds")
    fabtest_scenario.stays_silent(float(seconds))


@then(parsers.re(r"the agent " + MODE + r" start speaking within (?P<ms>\d+(?:\.\d+)?) ?ms"))
def _then_first_audio(fabtest_scenario: ScenarioState, mode: str, ms: str) -> None:
    fabtest_scenario.check_first_audio(float(ms), "must" if mode == "must" else "should")
