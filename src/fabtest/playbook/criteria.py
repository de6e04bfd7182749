"""A persona's success criteria as checks: the cheap ones every turn, the ``llm_checks`` in one call.

The deterministic criteria (``flow_contains``, ``files_exist``, ``files_contain``,
``tool_calls_contain``) read the conversation and the sealed workspace only; a file is named, its
content never quoted (it may hold secrets). The ``llm_checks`` are judged together over the
transcript (scope ``conversation``) through the scenario engine, which charges their cost.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fabtest.config.criteria import Criterion
from fabtest.conversation import Check, Conversation
from fabtest.engine import transcript
from fabtest.engine.scenario import ScenarioState
from fabtest.errors import LLMError
from fabtest.playbook.load import SuccessCriteria
from fabtest.playbook.workspace import workspace_file

__all__ = ["deterministic", "describe_unmet", "judge_llm_checks", "unmet"]


def agent_output(conversation: Conversation) -> str:
    """What the agent printed: every reply plus every tool result (the CLI shows both)."""
    parts: list[str] = []
    for turn in conversation.turns:
        parts.append(turn.response.text)
        for call in turn.tool_calls:
            if call.result is not None:
                parts.append(call.result if isinstance(call.result, str) else _json(call.result))
    return "\n".join(parts)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)


def deterministic(criteria: SuccessCriteria, conversation: Conversation, workspace: Path,
                  repo_root: Path | None = None) -> list[Check]:
    """One check per expected string/file; all cheap, run after every turn."""
    out: list[Check] = []
    output = agent_output(conversation)
    for needle in criteria.flow_contains:
        ok = needle in output
        out.append(_check("flow_contains", f"flow_contains:{needle}", ok,
                          f"the agent's output contains {needle!r}" if ok
                          else f"{needle!r} not found in the agent's output"))
    for rel in criteria.files_exist:
        path = workspace_file(workspace, rel, repo_root)
        ok = path is not None and path.exists()
        out.append(_check("files_exist", f"files_exist:{rel}", ok,
                          f"{rel} exists" if ok else f"{rel} does not exist in the workspace"))
    for rel, needles in criteria.files_contain.items():
        path = workspace_file(workspace, rel, repo_root)
        text: str | None = None
        if path is not None and path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
        for needle in needles:
            label = f"files_contain:{rel}:{needle}"
            if text is None:
                out.append(_check("files_contain", label, False, f"{rel} does not exist in the workspace"))
            else:
                ok = needle in text
                out.append(_check("files_contain", label, ok, f"{rel} contains {needle!r}" if ok
                                  else f"{rel} does not contain {needle!r}"))
    calls = conversation.tool_calls
    for tool, needles in criteria.tool_calls_contain.items():
        args = [_json(c.arguments) for c in calls if c.name == tool]
        for needle in needles:
            label = f"tool_calls_contain:{tool}:{needle}"
            if not args:
                called = sorted({c.name for c in calls})
                out.append(_check("tool_calls_contain", label, False,
                                  f"{tool} was never called (calls: {', '.join(called) or 'none'})"))
            else:
                ok = any(needle in a for a in args)
                out.append(_check("tool_calls_contain", label, ok,
                                  f"the arguments of {tool} contain {needle!r}" if ok
                                  else f"no call of {tool} has {needle!r} in its arguments: {'; '.join(args)[:300]}"))
    return out


def _check(kind: str, label: str, ok: bool, details: str) -> Check:
    return Check(type=kind, mode="must", criterion=label, status="passed" if ok else "failed", turn=None,
                 details=details)


def judge_llm_checks(state: ScenarioState, checks: list[str]) -> list[Check]:
    """Every llm_check in ONE judge call over the transcript (scope conversation). A judge that
    fails is an ``error`` whose ``where`` is ``llm_checks`` (never the simulated user's fault)."""
    criteria = [Criterion(text, text) for text in dict.fromkeys(checks)]
    try:
        verdicts = state.judge_criteria(criteria, transcript.for_judge(state.conversation), "conversation")
    except LLMError as exc:
        raise LLMError(f"the judge failed on the llm_checks: {type(exc).__name__}: {exc}", where="llm_checks") from None
    return [Check("llm_check", "must", v.criterion, v.verdict, None, v.reasoning, {"scope": "conversation"})
            for v in verdicts]


def unmet(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.status != "passed"]


def describe_unmet(checks: list[Check]) -> str:
    return "\n".join(f"  - {c.type} {c.criterion.split(':', 1)[-1]!r}: {c.details or c.status}" for c in checks)
