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

__all__ = ["BUILTIN_EXAMPLES", "BUILTIN_VARIANTS", "StepInfo", "collect_steps", "collection_errors", "readable_pattern",
           "render_steps"]

#: One example per built-in step, keyed by the step function's name in ``pytest_plugin/steps.py``.
BUILTIN_EXAMPLES: dict[str, str] = {
    "_given_agent": 'Given the agent "venue_bot"',
    "_given_purpose": 'Given the agent\'s purpose is "Books venues for events; nothing else"',
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
    "_given_attack": 'Given an adversarial user "prompt_injection"',
    "_given_record_attack": "Given an adversarial user from the scenario",
    "_when_says": 'When the user says "Hi, I need a meeting room"',
    "_when_says_doc": "When the user says:",
    "_when_says_exactly": r'When the user says exactly "  line one\rline two"',
    "_when_simulate": "When the simulated user talks to the agent",
    "_then_hold": "Then the agent must hold against the attack",
    "_then_satisfy": 'Then the response should satisfy "friendly"',
    "_then_match": 'Then the response must not match "(?i)sorry"',
    "_then_call": 'Then the agent must call "check_availability"',
    "_then_call_with": 'Then the agent must call "check_availability" with:',
    "_then_include": 'Then the conversation must include a call to "search_venues"',
    "_then_turns": "Then the conversation must take at most 10 turns",
    "_then_cost": "Then the conversation must cost less than $0.05",
    "_then_latency": "Then every response should take less than 3 seconds",
    "_then_transcript": 'Then the transcript must contain "Configuration saved"',
    "_then_file_exists": 'Then the file "fabric.yaml" must exist',
    "_then_file_contains": 'Then the file "fabric.yaml" must contain "vlan: 100"',
    "_then_grounded": 'Then the response should be grounded in "search_venues"',
    "_then_intent": 'Then the response should have the intent "gather requirements"',
    "_then_goal": "Then the goal must be achieved",
    "_then_reach": 'Then the conversation must reach the topic "presenting_results"',
    "_then_follow": 'Then the conversation should follow the topics "greeting, gathering_details, presenting_results"',
}

#: The other forms one built-in step takes (scope, must/should, not), listed under its example: a user
#: who sees only ``the response should satisfy`` would not guess ``every response must satisfy``.
BUILTIN_VARIANTS: dict[str, list[str]] = {
    "_given_rule": ['Given the simulated user should "answer in one or two sentences"'],
    "_then_satisfy": ['Then every response must satisfy "concise"',
                      'Then the conversation should satisfy "The agent never asks the same question twice"'],
    "_then_match": ['Then the response should match "€\\d+ per day"'],
    "_then_call": ['Then the agent must not call "book_venue"', 'Then the agent should call "search_venues"'],
    "_then_call_with": ['Then the agent should not call "book_venue" with:'],
    "_then_include": ['Then the conversation must not include a call to "book_venue"'],
    "_then_turns": ["Then the conversation should take at most 3 turns"],
    "_then_transcript": ['Then the transcript should contain "Booked"'],
    "_then_file_exists": ['Then the file "draft.yaml" should exist'],
    "_then_file_contains": ['Then the file "fabric.yaml" should contain "mtu: 9000"'],
    "_then_grounded": ['Then the response must be grounded in "check_availability"'],
    "_then_intent": ['Then the response must have the intent "confirm the booking"'],
    "_then_goal": ["Then the goal should be achieved"],
    "_then_reach": ['Then the conversation should reach the topic "booking"'],
    "_then_follow": ['Then the conversation must follow the topics "gathering_details, booking"'],
}

#: The steps of ``pytest_plugin/tool_steps.py`` (trajectories, stubs, seeded history, end state).
BUILTIN_EXAMPLES |= {
    "_then_call_before": 'Then the agent must call "lookup_account" before "change_plan"',
    "_then_call_sequence": "Then the agent must call the tools in order:",
    "_then_call_count": 'Then the conversation must call "change_plan" at most 1 time',
    "_then_only_tools": 'Then the agent must only call tools from: "lookup_account, list_plans, change_plan"',
    "_given_tool_returns": 'Given the tool "lookup_account" returns:',
    "_given_tool_fails": 'Given the tool "list_plans" fails with "503 Service Unavailable"',
    "_given_tool_takes": 'Given the tool "change_plan" takes 5 seconds',
    "_given_tool_simulated": 'Given the tool "search_flights" is simulated as "flights over Lufthansa\'s schedule; '
                             'none on Sundays"',
    "_given_history": "Given the conversation so far:",
    "_then_state": 'Then the state "account.plan" must be "unlimited"',
    "_then_state_include": "Then the state must include:",
    "_when_mentions": 'When the response mentions "booking (B-\\d+)" as "ref"',
    "_when_mentions_judged": 'When the response mentions a booking reference as "ref"',
}
BUILTIN_VARIANTS |= {
    "_then_call_before": ['Then the conversation should call "lookup_account" before "change_plan"'],
    "_then_call_sequence": ["Then the conversation must call the tools in exact order:",
                            "Then the agent should call the tools in any order:"],
    "_then_call_count": ['Then the agent should call "lookup_account" exactly 1 time',
                         'Then the conversation must call "list_plans" at least 2 times'],
    "_then_only_tools": ['Then the conversation should only call tools from: "lookup_account, list_plans"'],
    "_then_state": ['Then the state "orders.0.total" should be ">= 100"'],
    "_then_state_include": ["Then the state should include:"],
}

#: The steps of ``pytest_plugin/file_steps.py`` (files in the conversation, docs/how-to/files.md).
BUILTIN_EXAMPLES |= {
    "_when_sends": 'When the user sends "files/lamp.png" and "files/policy.pdf" with "Is this covered by my policy?"',
    "_when_sends_table": 'When the user sends these files with "Here are both":',
    "_given_has_files": 'Given the user has the files "receipt.jpg", "invoice.pdf"',
    "_then_reply_file": 'Then the agent must reply with a file matching "*.pdf"',
    "_then_file_text": 'Then the agent\'s file "*.pdf" must contain "Total"',
}
BUILTIN_VARIANTS |= {
    "_when_sends": ['When the user sends "files/lamp.png" with "Is this covered?"'],
    "_then_reply_file": ["Then the agent must reply with a file", "Then the agent should reply with an image",
                         "Then the agent must not reply with a file"],
    "_then_file_text": ['Then the agent\'s file "report.txt" should match "\\d+ EUR"'],
}

#: The steps of ``pytest_plugin/pause_steps.py`` (approvals, interrupts, questions: docs/how-to/approvals.md).
BUILTIN_EXAMPLES |= {
    "_then_ask_approval": 'Then the agent must ask for approval of "refund"',
    "_then_ask_approval_with": 'Then the agent must ask for approval of "refund" with:',
    "_then_not_ask_approval": "Then the agent must not ask for approval",
    "_when_approves": "When the user approves",
    "_when_approves_because": 'When the user approves with "the receipt is attached"',
    "_when_rejects": "When the user rejects",
    "_when_rejects_because": 'When the user rejects with "no receipt"',
    "_when_answers": 'When the user answers "Size M, please"',
    "_when_approves_edited": "When the user approves with:",
    "_given_decision_rule": "Given the user approves refunds under 50 euros",
}
BUILTIN_VARIANTS |= {
    "_then_ask_approval": ['Then the agent should ask for approval of "refund"'],
    "_then_not_ask_approval": ['Then the agent must not ask for approval of "refund"'],
    "_given_decision_rule": ["Given the user rejects refunds without a receipt"],
}

#: The steps of ``pytest_plugin/voice_steps.py`` (voice scenarios, docs/how-to/voice.md).
BUILTIN_EXAMPLES |= {
    "_when_interrupts": 'When the user interrupts after 1000 ms with "Sorry, just the vegan menu"',
    "_when_silent": "When the user stays silent for 5 seconds",
    "_then_first_audio": "Then the agent must start speaking within 800 ms",
}

#: the modules of the built-in steps (``tool_steps`` holds the steps about tools, history and state,
#: ``file_steps`` those about files, ``pause_steps`` those about approvals and questions)
BUILTIN_MODULES = ("fabtest.pytest_plugin.steps", "fabtest.pytest_plugin.tool_steps",
                   "fabtest.pytest_plugin.file_steps", "fabtest.pytest_plugin.pause_steps",
                   "fabtest.pytest_plugin.voice_steps")
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

        manager = session._fixturemanager  # pytest-bdd reads its steps the same way
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
        self.feature_files = sorted({Path(str(item.path)) for item in session.items
                                     if str(item.path).endswith(".feature")})


def collect_steps(paths: Sequence[str], *, extra_args: Sequence[str] = ()) -> tuple[list[StepInfo], int, str]:
    """The step definitions pytest sees when collecting ``paths``: ``(steps, exit code, pytest output)``."""
    collector = _Collector()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        # fabtest is imported already (this process runs it), so pytest cannot rewrite its asserts: not news
        args = ["--collect-only", "-q", "-p", "no:cacheprovider", "--fabtest-no-results",
                "-W", "ignore::pytest.PytestAssertRewriteWarning", *extra_args, *paths]
        code = pytest.main(args, plugins=[collector])
    lines = _feature_lines(collector.feature_files)
    steps = [_info(context, lines) for context in collector.contexts]
    order = {"given": 0, "when": 1, "then": 2}
    position = {name: i for i, name in enumerate(BUILTIN_EXAMPLES)}
    steps.sort(key=lambda s: (not s.builtin, order.get(s.keyword.lower(), 3), position.get(s.function, 0), s.where))
    return steps, int(code), out.getvalue()


_ERROR_HEADER = re.compile(r"^_+ ERROR collecting (.+?) _+$")


def collection_errors(output: str) -> list[str]:
    """``file: why`` for each file pytest could not collect, from ``--collect-only -q`` output (no test ids)."""
    errors: list[str] = []
    current: str | None = None
    for line in output.splitlines():
        header = _ERROR_HEADER.match(line.strip())
        if header:
            current = header.group(1)
            continue
        if current is not None and line.strip() and not line.startswith(("=", "_")):
            errors.append(line.strip() if line.strip().startswith(current) else f"{current}: {line.strip()}")
            current = None
        elif line.startswith("="):
            current = None
    return errors


def readable_pattern(pattern: str) -> str:
    """A regex step pattern as a line a user would write: named groups become ``<name>``, a
    non-capturing group its first alternative, anchors and escapes go (for hints and listings)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append({"s": " ", "d": "1", "w": "x"}.get(nxt, "" if nxt.isalnum() else nxt))
            i = _past_quantifier(pattern, i + 2)
            continue
        if char == "[":
            close = pattern.find("]", i + 2)
            out.append("x")
            i = _past_quantifier(pattern, close + 1 if close != -1 else len(pattern))
            continue
        if char in "?*+" or (char == "{" and re.match(r"\{\d*,?\d*\}", pattern[i:])):
            i = _past_quantifier(pattern, i)
            continue
        if char == "(":
            end = _group_end(pattern, i)
            body = pattern[i + 1:end]
            named = re.match(r"\?P<(\w+)>", body)
            if named:
                out.append(f"<{named.group(1)}>")
            else:
                inner = body[2:] if body.startswith("?:") else body
                out.append(readable_pattern(_first_alternative(inner)))
            i = _past_quantifier(pattern, end + 1)
            continue
        if char in "^$":
            i += 1
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _past_quantifier(pattern: str, i: int) -> int:
    """The index after a quantifier at ``i`` (``+``, ``*``, ``?``, ``{m,n}``, lazy ``?``), or ``i``."""
    quantifier = re.match(r"(?:[?*+]|\{\d*,?\d*\})\??", pattern[i:])
    return i + quantifier.end() if quantifier else i


def _group_end(pattern: str, start: int) -> int:
    depth = 0
    i = start
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "[":  # a class may hold parentheses
            close = pattern.find("]", i + 2)
            i = close + 1 if close != -1 else i + 1
            continue
        depth += {"(": 1, ")": -1}.get(pattern[i], 0)
        if depth == 0:
            return i
        i += 1
    return len(pattern) - 1


def _first_alternative(body: str) -> str:
    depth = 0
    for i, char in enumerate(body):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "|" and depth == 0:
            return body[:i]
    return body


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
    builtin = getattr(func, "__module__", "") in BUILTIN_MODULES
    pattern = getattr(context.parser, "name", str(context.parser))
    code = getattr(func, "__code__", None)
    where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None and not builtin else "fabtest"
    if builtin:
        example = BUILTIN_EXAMPLES.get(func.__name__, "")
    else:
        example = _project_example(context, keyword, feature_lines)
        if not example and context.parser.__class__.__name__ == "re":
            example = f"(no collected feature uses it) {keyword} {readable_pattern(pattern)}"
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
            if step.builtin:
                lines.extend(f"      also: {variant}" for variant in BUILTIN_VARIANTS.get(step.function, []))
        lines.append("")
    lines.append("<mode> is should (soft) or must (hard); quoted values use double quotes.")
    return "\n".join(lines) + "\n"
