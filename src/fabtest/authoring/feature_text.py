"""Scripted ``.feature`` files written from what was recorded: imported and shrunk conversations.

An imported conversation (:func:`feature_text`) is a regression test to edit, not a verdict:
every tool call the agent made is a ``must call ... with:`` step (what the agent did is what it
must keep doing), and the quality of the replies is left to a ``should`` criterion the author
writes (a commented placeholder), since what made the recorded answer good or bad is the author's
judgement. A shrunk one (:func:`regression_feature`) carries the check that failed, as a ``must``
step. Text that a Gherkin line cannot hold (double quotes, newlines) goes into a doc string, and
text neither keeps (a carriage return, indentation) into ``the user says exactly`` with JSON
escapes; table cells escape ``|`` and ``\\``.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fabtest._internal.files import write_text_atomic
from fabtest.authoring.draft_user import DraftedUser
from fabtest.authoring.transcripts import RecordedConversation, RecordedTurn
from fabtest.conversation import Decision
from fabtest.experiment.model import CheckRecord, PauseRecord

__all__ = ["check_steps", "decision_of", "feature_text", "regression_feature", "regression_path", "simulated_feature",
           "stub_steps", "write_feature"]

_FORMAT_NAMES = {"fabtest": "a fabtest experiment", "openai": "OpenAI chat messages",
                 "gemini": "Gemini contents", "messages": "a list of messages",
                 "otlp": "OpenTelemetry GenAI traces", "phoenix": "Phoenix / OpenInference spans",
                 "langfuse": "Langfuse traces", "mlflow": "MLflow traces",
                 "openai-agents": "OpenAI Agents SDK items", "langchain": "LangChain messages",
                 "adk": "Google ADK session events"}


def feature_text(conversation: RecordedConversation, *, source: str, agent: str | None = None,
                 files_dir: str = "files") -> str:
    """The feature file's text for ``conversation`` (read from ``source``); a turn's files are sent
    from ``files_dir`` (beside the feature, where :func:`write_files` puts them)."""
    name = _line(conversation.name) or "Imported conversation"
    lines = [f"# Imported by `fabtest import` from {_line(source)} ({_FORMAT_NAMES[conversation.source_format]})."]
    if conversation.origin:
        lines.append(f"# {_line(conversation.origin)}.")
    lines += ["# The user's lines are replayed as they were; the agent's tool calls are asserted as they happened",
              "# (a tool a stub answered in the recording is stubbed again with its recorded answer).",
              "@regression @imported",
              f"Feature: {name}",
              "",
              f"  Scenario: {name}"]
    if agent:
        lines.append(f'    Given the agent "{agent}"')
    lines += stub_steps((c.name, c.result, bool(c.metadata.get("error"))) for t in conversation.turns
                        for c in t.tool_calls if c.metadata.get("stubbed"))
    for turn in conversation.turns:
        if turn.decisions:  # one step decides every pending pause of its kind, as the recorded message did
            lines += _decision_step(turn.decisions[0])
        else:
            lines += _user_step(turn.user, [f"{files_dir}/{name}" for name in file_names(turn)] if turn.files else ())
        for call in turn.tool_calls:
            lines += _call_step(call.name, call.arguments)
        for pause in turn.pauses:
            if pause.kind == "approval":
                lines += _arguments_step(f'Then the agent must ask for approval of "{pause.tool}"', pause.arguments)
    lines += ["    # What must a good answer do here? Write the criterion, then uncomment:",
              '    # Then the conversation should satisfy "<what a good conversation does>"', ""]
    return "\n".join(lines)


def stub_steps(calls: Iterable[tuple[str, Any, bool]]) -> list[str]:
    """``Given the tool ...`` steps for the tools a stub answered in a recorded run, each with its
    first recorded answer (``(name, result, failed)`` per stubbed call, in order): a replay of the
    written feature then meets the same tool behaviour, not the real system."""
    lines: list[str] = []
    seen: set[str] = set()
    for name, result, failed in calls:
        if name in seen or '"' in name:
            continue
        seen.add(name)
        if failed:
            message = _line(str(result)).replace('"', "'")
            lines.append(f'    Given the tool "{name}" fails with "{message}"')
            continue
        body = json.dumps(result, ensure_ascii=False, indent=2).replace('"""', '\\"\\"\\"')
        lines += [f'    Given the tool "{name}" returns:', '      """',
                  *("      " + line for line in body.splitlines()), '      """']
    return lines


def regression_path(name: str, output: str | None, *, fallback: str) -> Path:
    """``-o PATH``, else ``features/regressions/<name as a file name>.feature`` (``fallback`` when the
    name has no letter or digit)."""
    if output:
        return Path(output)
    stem = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")[:60] or fallback
    return Path("features/regressions") / f"{stem}.feature"


def write_feature(path: Path, text: str) -> None:
    """Write a feature atomically, making its folder: a crash never leaves half a feature. Never over
    another file: one that appeared at ``path`` since the caller looked raises ``FileExistsError``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text, exclusive=True)


def _line(text: str) -> str:
    return " ".join(str(text).split())


def safe_file_name(name: str, sha256: str) -> str:
    """A file's name as written beside a feature: no folder, no character a path or a step would trip on."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", Path(name).name).lstrip(".") or sha256[:12]


def file_names(turn: RecordedTurn) -> list[str]:
    """The turn's files' names as written beside the feature: safe, and unique within the turn."""
    names: list[str] = []
    for file in turn.files:
        name = safe_file_name(file.name, file.sha256)
        names.append(name if name not in names else f"{file.sha256[:8]}-{name}")
    return names


def write_files(conversation: RecordedConversation, folder: Path) -> int:
    """Write every turn's files into ``folder`` (the feature's ``files_dir``); returns how many."""
    written = 0
    for turn in conversation.turns:
        for name, file in zip(file_names(turn), turn.files, strict=True):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(file.data)
            written += 1
    return written


def _user_step(text: str, files: Sequence[str] = ()) -> list[str]:
    """The step that sends ``text`` (and ``files``) as it was: with files, the ``sends`` step (its text on
    one line); else quoted when it fits a line (spaces inside the quotes are kept), a doc string for lines
    and quotes, and ``says exactly`` with JSON escapes for what neither keeps: a carriage return (a
    feature file reads it as a line break) or indentation a doc string removes."""
    if files:  # the text on one line, in quotes: the step's own form
        sent = " and ".join(f'"{f}"' for f in files)
        return [f'    When the user sends {sent} with "{" ".join(text.split())}"']
    if text and '"' not in text and "\n" not in text and "\r" not in text:
        return [f'    When the user says "{text}"']
    if "\r" in text or textwrap.dedent(text) != text or '\\"\\"\\"' in text:
        return [f'    When the user says exactly "{json.dumps(text, ensure_ascii=False)[1:-1]}"']
    body = [("      " + line if line else "") for line in text.replace('"""', '\\"\\"\\"').split("\n")]
    return ["    When the user says:", '      """', *body, '      """']


def _call_step(tool: str, arguments: dict[str, Any]) -> list[str]:
    return _arguments_step(f'Then the agent must call "{tool}"', arguments)


def _arguments_step(step: str, arguments: dict[str, Any]) -> list[str]:
    """``step``, with a ``with:`` table of the arguments a cell can say exactly."""
    rows = [(name, cell) for name, value in arguments.items() if (cell := _value(value)) is not None]
    if not rows:
        return [f"    {step}"]
    width = max(len("argument"), *(len(_cell(n)) for n, _ in rows))
    lines = [f"    {step} with:", f"      | {'argument'.ljust(width)} | value |"]
    lines += [f"      | {_cell(name).ljust(width)} | {_cell(value)} |" for name, value in rows]
    return lines


def decision_of(message: str, number: int) -> PauseRecord | None:
    """The decision user message ``number`` carried (shrink's ``Said``), if any; none for the first,
    as no pause can wait before it: what a shrunk candidate replays and its feature says alike."""
    decision: PauseRecord | None = getattr(message, "decision", None)
    return decision if number > 1 else None


def _decision_step(decision: Decision) -> list[str]:
    """The step that sends a recorded decision: approves / rejects (with the reason the user gave),
    answers, or approves with: the edited arguments."""
    if decision.decision == "edited":
        return _arguments_step("When the user approves", decision.arguments or {})
    if decision.decision == "answered":
        return [f'    When the user answers "{_quoted(decision.answer or "")}"']
    verb = "approves" if decision.decision == "approved" else "rejects"
    return [f'    When the user {verb} with "{_quoted(decision.reason)}"' if decision.reason
            else f"    When the user {verb}"]


def _quoted(text: str) -> str:
    """Text a quoted step argument holds: one line, no double quote."""
    return _line(text).replace('"', "'")


def _value(value: Any) -> str | None:
    """The ``with:`` cell that matches ``value`` exactly, or None when a cell cannot say it (the row
    is left out rather than asserting something the agent never sent)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text: str = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if "\n" in text or not text.strip() or text != text.strip():
        return None
    if (text.startswith("/") and text.endswith("/")) or text[:1] in "<>=!":
        return None  # would read as a regex or a comparison
    return text


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|")


def check_steps(check: CheckRecord, criteria: Mapping[str, str]) -> tuple[list[str], str] | None:
    """The setup lines and the ``must`` step that state ``check`` again, or None when no step of the
    vocabulary can (a kind replay cannot re-check, or a value with a double quote in it)."""
    kind, label = check.type, check.criterion
    value = label.split(":", 1)[1] if ":" in label else label
    if '"' in value:
        return None
    if kind == "satisfy":
        scope = "the conversation" if check.data.get("scope") == "conversation" else "the response"
        setup = [f'    Given the criterion "{label}" means "{criteria[label]}"'] \
            if label in criteria and '"' not in criteria[label] else []
        return setup, f'    Then {scope} must satisfy "{label}"'
    steps = {
        "match": f'    Then the response must match "{value[1:-1]}"',
        "not_match": f'    Then the response must not match "{value[1:-1]}"',
        "include_call": f'    Then the conversation must include a call to "{value}"',
        "not_include_call": f'    Then the conversation must not include a call to "{value}"',
        "transcript_contains": f'    Then the transcript must contain "{value}"',
        "intent": f'    Then the response must have the intent "{value}"',
        "grounded_in": f'    Then the response must be grounded in "{value}"',
    }
    if kind in steps:
        return [], steps[kind]
    return _trajectory_step(check)


def _trajectory_step(check: CheckRecord) -> tuple[list[str], str] | None:
    """The tool-trajectory steps (pytest_plugin/tool_steps.py) from what they record."""
    data, kind = check.data, check.type
    tools = [str(t) for t in data.get("tools") or []]
    if not tools or any('"' in t for t in tools):
        return None
    who = "the conversation" if data.get("scope") == "conversation" else "the agent"
    if kind == "call_order" and len(tools) == 2:
        return [], f'    Then {who} must call "{tools[0]}" before "{tools[1]}"'
    if kind == "call_count" and data.get("bound") in ("at most", "at least", "exactly"):
        limit = data.get("limit")
        return [], f'    Then {who} must call "{tools[0]}" {data["bound"]} {limit} time{"" if limit == 1 else "s"}'
    if kind == "only_tools":
        return [], f'    Then {who} must only call tools from: "{", ".join(tools)}"'
    if kind == "tool_sequence" and data.get("match") in ("exact", "in order", "any order"):
        how = {"exact": "exact order", "in order": "order", "any order": "any order"}[str(data["match"])]
        rows = "\n".join(f"      | {_cell(t)} |" for t in tools)
        return [], f"    Then {who} must call the tools in {how}:\n      | tool |\n{rows}"
    return None


def regression_feature(name: str, messages: Sequence[str], anchor: int | None, setup: Sequence[str], step: str,
                       *, comments: Sequence[str], agent: str | None = None,
                       history: Sequence[Mapping[str, str]] = (), files_dir: str = "files") -> str:
    """A scripted feature: the seeded ``history``, ``messages`` as user turns, ``step`` after turn
    ``anchor`` (or at the end). A message with files (shrink's ``Said``) sends them from ``files_dir``;
    one that carried a decision on the agent's pauses is the decision's step."""
    lines = [*(f"# {_line(c)}" for c in comments), "@regression", f"Feature: {_line(name)} (regression)", "",
             f"  Scenario: {_line(name)}"]
    if agent:
        lines.append(f'    Given the agent "{agent}"')
    lines += list(setup)
    if history:
        lines += ["    Given the conversation so far:", "      | role  | message |"]
        lines += [f"      | {h['role'].ljust(5)} | {_cell(_line(h['content']))} |" for h in history]
    for number, message in enumerate(messages, start=1):
        files = [f"{files_dir}/{safe_file_name(f.name, f.sha256)}" for f in getattr(message, "files", [])]
        decided = decision_of(message, number)
        decision = decided.as_decision() if decided is not None else None
        lines += _decision_step(decision) if decision is not None else _user_step(message, files)
        if number == anchor:
            lines.append(step)
    if anchor is None:
        lines.append(step)
    return "\n".join([*lines, ""])


def simulated_feature(conversation: RecordedConversation, user: DraftedUser, *, source: str,
                      agent: str | None = None) -> str:
    """A simulated scenario that plays the drafted ``user`` again, for as many turns as recorded (plus two)."""
    name = _line(conversation.name) or "Imported conversation"
    lines = [f"# Imported by `fabtest import --as simulated` from {_line(source)} "
             f"({_FORMAT_NAMES[conversation.source_format]}).",
             "# The user below was drafted by the judge LLM from the recorded conversation: review it.",
             "@regression @imported",
             f"Feature: {name}",
             "",
             f"  Scenario: {name}"]
    if agent:
        lines.append(f'    Given the agent "{agent}"')
    lines.append(f'    Given a simulated user with the goal "{_unquoted(user.goal)}"')
    lines.append(f'    And the persona "{_unquoted(user.persona)}"')
    facts = [(_cell(_line(f.name)), _cell(_line(f.value))) for f in user.facts if _line(f.name) and _line(f.value)]
    if facts:
        width = max(len("fact"), *(len(n) for n, _ in facts))
        lines += ["    And the simulated user knows:", f"      | {'fact'.ljust(width)} | value |"]
        lines += [f"      | {n.ljust(width)} | {v} |" for n, v in facts]
    lines += [f"    And the simulation takes at most {len(conversation.turns) + 2} turns",
              "    When the simulated user talks to the agent",
              "    Then the goal should be achieved", ""]
    return "\n".join(lines)


def _unquoted(text: str) -> str:
    """A value for a quoted step argument: one line, double quotes as single ones."""
    return _line(text).replace('"', "'")
