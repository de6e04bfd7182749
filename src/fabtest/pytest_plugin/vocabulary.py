"""``fabtest steps``: the whole step vocabulary, built-in and the project's own, one example each.

The project's steps are whatever pytest-bdd sees, so the listing runs a pytest collection
(``--collect-only``) in-process and reads the step definitions it registered, from conftests,
``pytest_plugins`` and test modules alike. Built-in steps show the example below (a test checks
that every example is matched by its own step); a project step shows the first line of the
collected ``.feature`` files it matches, or the first Given/When/Then line of its docstring.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ["BUILTIN_EXAMPLES", "StepInfo", "collect_steps", "render_steps"]

#: One example per built-in step, keyed by the step function's name in ``pytest_plugin/steps.py``.
BUILTIN_EXAMPLES: dict[str, str] = {
    "_given_agent": 'Given the agent "venue_bot"',
    "_given_criterion": 'Given the criterion "friendly" means "The agent is warm and polite"',
    "_given_criterion_examples": 'Given the criterion "concise" means "At most three sentences" with examples:',
    "_given_criterion_doc": 'Given the criterion "concise" means:',
    "_given_criteria": "Given the criteria:",
    "_given_topics": "Given the topics:",
    "_given_goal": 'Given a simulated user with the goal "Book a room for 10 people in Berlin on 12 March"',
    "_given_persona": 'Given the persona "A busy office manager who answers briefly"',
    "_given_persona_doc": "Given the persona:",
    "_given_facts": "Given the simulated user knows:",
    "_given_rule": 'Given the simulated user should not "mention a budget unless asked"',
    "_given_max_turns": "Given the simulation takes at most 8 turns",
    "_given_stop_tool": 'Given the simulation stops when the agent calls "book_venue"',
    "_given_stop_topic": 'Given the simulation stops when the conversation reaches the topic "booking"',
    "_given_from_record": "Given a simulated user from the scenario",
    "_when_says": 'When the user says "Hi, I need a meeting room"',
    "_when_says_doc": "When the user says:",
    "_when_simulate": "When the simulated user talks to the agent",
    "_then_satisfy": 'Then the response should satisfy "friendly"',
    "_then_match": 'Then the response must not match "(?i)sorry"',
    "_then_call": 'Then the agent must call "check_availability"',
    "_then_call_with": 'Then the agent must call "check_availability" with:',
    "_then_include": 'Then the conversation must include a call to "search_venues"',
    "_then_turns": "Then the conversation must take at most 10 turns",
    "_then_transcript": 'Then the transcript must contain "Configuration saved"',
    "_then_file_exists": 'Then the file "fabric.yaml" must exist',
    "_then_file_contains": 'Then the file "fabric.yaml" must contain "vlan: 100"',
    "_then_grounded": 'Then the response should be grounded in "search_venues"',
    "_then_intent": 'Then the response should have the intent "gather requirements"',
    "_then_goal": "Then the goal must be achieved",
    "_then_reach": 'Then the conversation must reach the topic "presenting_results"',
    "_then_follow": 'Then the conversation should follow the topics "greeting, gathering_details, presenting_results"',
}

_BUILTIN_MODULE = "fabtest.pytest_plugin.steps"
_STEP_LINE = re.compile(r"^\s*(Given|When|Then|And|But)\s+(.*?)\s*$")
_KEYWORDS = {"given": "Given", "when": "When", "then": "Then"}


@dataclass(frozen=True)
class StepInfo:
    """One step definition: its keyword, pattern, where it is defined, and an example line."""

    keyword: str
    pattern: str
    builtin: bool
    where: str
    example: str
    function: str


class _Collector:
    """A pytest plugin that keeps the step definitions registered once collection is done."""

    def __init__(self) -> None:
        self.contexts: list[Any] = []
        self.feature_files: list[Path] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from pytest_bdd.compat import get_fixture_names
        from pytest_bdd.steps import StepNamePrefix, step_function_context_registry

        manager = session._fixturemanager  # noqa: SLF001 - pytest-bdd reads its steps the same way
        names = [n for n in get_fixture_names(manager) if n.startswith(StepNamePrefix.step_def.value)]
        seen: set[int] = set()
        for node in [session, *session.items]:  # a step in a sub-directory's conftest is visible to its items
            for name in names:
                for fixturedef in manager.getfixturedefs(name, node) or ():
                    context = step_function_context_registry.get(fixturedef.func)
                    module = getattr(getattr(context, "step_func", None), "__module__", "") or ""
                    if module.startswith("pytest_bdd"):
                        continue  # pytest-bdd's own debugging step ("trace"), not vocabulary
                    if context is not None and id(context) not in seen:
                        seen.add(id(context))
                        self.contexts.append(context)
        self.feature_files = sorted({Path(str(item.path)) for item in session.items if str(item.path).endswith(".feature")})


def collect_steps(paths: Sequence[str], *, extra_args: Sequence[str] = ()) -> tuple[list[StepInfo], int, str]:
    """The step definitions pytest sees when collecting ``paths``: ``(steps, exit code, pytest output)``."""
    collector = _Collector()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        args = ["--collect-only", "-q", "-p", "no:cacheprovider", "--fabtest-no-results", *extra_args, *paths]
        code = pytest.main(args, plugins=[collector])
    lines = _feature_lines(collector.feature_files)
    steps = [_info(context, lines) for context in collector.contexts]
    order = {"given": 0, "when": 1, "then": 2}
    position = {name: i for i, name in enumerate(BUILTIN_EXAMPLES)}
    steps.sort(key=lambda s: (not s.builtin, order.get(s.keyword.lower(), 3), position.get(s.function, 0), s.where))
    return steps, int(code), out.getvalue()


def _feature_lines(files: list[Path]) -> list[tuple[str, str]]:
    """``(keyword, text)`` of every step line; ``And``/``But`` take the keyword before them."""
    found: list[tuple[str, str]] = []
    for file in files:
        keyword = "Given"
        try:
            text = file.read_text(encoding="utf-8")
        except OSError:
            continue
        for line in text.splitlines():
            m = _STEP_LINE.match(line)
            if m is None:
                continue
            if m.group(1) not in ("And", "But"):
                keyword = m.group(1)
            found.append((keyword, m.group(2)))
    return found


def _info(context: Any, feature_lines: list[tuple[str, str]]) -> StepInfo:
    func = context.step_func
    keyword = _KEYWORDS.get(context.type or "", "Step")
    builtin = getattr(func, "__module__", "") == _BUILTIN_MODULE
    pattern = getattr(context.parser, "name", str(context.parser))
    code = getattr(func, "__code__", None)
    where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None and not builtin else "fabtest"
    if builtin:
        example = BUILTIN_EXAMPLES.get(func.__name__, "")
    else:
        example = _project_example(context, keyword, feature_lines)
    return StepInfo(keyword=keyword, pattern=pattern, builtin=builtin, where=_short(where), example=example,
                    function=getattr(func, "__name__", ""))


def _project_example(context: Any, keyword: str, feature_lines: list[tuple[str, str]]) -> str:
    for line_keyword, text in feature_lines:
        if context.type in (None, line_keyword.lower()) and context.parser.is_matching(text):
            return f"{line_keyword} {text}"
    doc = (getattr(context.step_func, "__doc__", None) or "").splitlines()
    return next((line.strip() for line in doc if _STEP_LINE.match(line)), "")


def _short(where: str) -> str:
    try:
        return str(Path(where).resolve().relative_to(Path.cwd()))
    except ValueError:
        return where


def render_steps(steps: Sequence[StepInfo]) -> str:
    """The listing printed by ``fabtest steps``: built-in steps, then the project's."""
    lines: list[str] = []
    for title, group in (("Built-in steps (fabtest)", [s for s in steps if s.builtin]),
                         ("Project steps", [s for s in steps if not s.builtin])):
        lines.append(f"{title}: {len(group)}")
        if not group:
            lines.append("  (none found: define pytest-bdd steps in a conftest.py; docs: 'Add your own steps')")
        for step in group:
            example = step.example or f"(no example: no collected feature uses it) {step.keyword} {step.pattern}"
            origin = "" if step.builtin else f"    [{step.where}]"
            lines.append(f"  {example}{origin}")
        lines.append("")
    lines.append("<mode> is should (soft) or must (hard); quoted values use double quotes.")
    return "\n".join(lines) + "\n"
