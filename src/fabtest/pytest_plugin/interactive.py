"""A person plays the simulated user (``--fabtest-interactive``): the quickest way to see why a scenario misbehaves.

The simulated user's LLM is wrapped, nothing else changes: at each of the simulated user's turns
the terminal shows the conversation so far and the message the simulator proposes (when one is
configured), and the person sends it, types their own, ends the conversation, or saves it as a
scripted feature to replay later. Every check runs as usual, because the engine cannot tell a
person's message from the simulator's. Calls for any other purpose pass through unchanged.

The answer is built as ``{"message": ..., "goal_complete": ...}``, which every simulated-user
schema reads (the ordinary user's maps ``goal_complete`` onto its stop status), so the wrapper
does not depend on how the simulator's schema orders its fields.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from fabtest._internal import redaction
from fabtest.conversation import Conversation, TokenUsage
from fabtest.llm.base import LLM, Completion
from fabtest.llm.calls import current_call

__all__ = ["HELP", "InteractiveUser", "save_as_feature"]

T = TypeVar("T", bound=BaseModel)

HELP = ("[Enter] send the proposed message · type your own message · /end end the conversation · "
        "/save PATH save it as a scripted feature")


class InteractiveUser:
    """``inner`` (the configured simulator, or None) with a person deciding each user message."""

    def __init__(self, inner: LLM | None, *, ask: Callable[[str], str] = input,
                 show: Callable[[str], None] = print) -> None:
        self.inner, self.ask, self.show = inner, ask, show
        self.provider = "person"
        self.model = f"person + {inner.model}" if inner is not None else "person"
        self._lock = threading.Lock()  # one terminal: one question at a time

    def complete(self, prompt: str, *, system: str | None = None, temperature: float | None = None) -> Completion[Any]:
        if self.inner is None:
            raise RuntimeError("the interactive user has no LLM for free-text calls")
        return self.inner.complete(prompt, system=system, temperature=temperature)

    def complete_json(self, prompt: str, schema: type[T], *, system: str | None = None,
                      temperature: float | None = None) -> Completion[T]:
        call = current_call()
        if call is None or call.purpose != "simulated_user":
            if self.inner is None:
                raise RuntimeError(f"the interactive user has no LLM for {call.purpose if call else 'this'} call")
            return self.inner.complete_json(prompt, schema, system=system, temperature=temperature)
        proposal = self.inner.complete_json(prompt, schema, system=system, temperature=temperature) \
            if self.inner is not None else None
        proposed = str(getattr(proposal.parsed, "message", "") or "") if proposal and proposal.parsed else ""
        with self._lock:
            message, done = self._turn(call.conversation, call.goal, proposed)
        parsed = schema.model_validate({"message": message, "goal_complete": done})
        usage = proposal.usage if proposal is not None else TokenUsage()
        return Completion(text=message, parsed=parsed, usage=usage, model=self.model)

    def _turn(self, conversation: Conversation | None, goal: str | None, proposed: str) -> tuple[str, bool]:
        """Show the conversation and the proposal; ask until the person sends, types or ends."""
        lines = ["", "─" * 60, f"goal: {goal}" if goal else "interactive user"]
        for turn in conversation.turns if conversation is not None else []:
            lines += [f"  you:   {turn.user}", f"  agent: {turn.response.text}"]
            lines += [f"         (called {c.name} {c.arguments})" for c in turn.response.tool_calls]
        lines.append(f"proposed: {proposed}" if proposed else "no simulator configured: type the user's message")
        self.show("\n".join(lines))
        while True:
            answer = self.ask(f"{HELP}\n> ").strip()
            if answer == "/end":
                return "Thanks, that's all.", True
            if answer.startswith("/save"):
                target = answer[len("/save"):].strip()
                if not target:
                    self.show("usage: /save PATH (e.g. /save features/regressions/mine.feature)")
                    continue
                self.show(save_as_feature(conversation, Path(target)))
                continue
            if answer:
                return answer, False
            if proposed:
                return proposed, False
            self.show("nothing proposed: type a message, or /end")


def save_as_feature(conversation: Conversation | None, target: Path) -> str:
    """The conversation so far as a scripted feature (``fabtest import``'s format); a line saying what happened."""
    from fabtest.authoring.feature_text import feature_text, write_feature
    from fabtest.authoring.transcripts import RecordedConversation, RecordedTurn

    turns = [RecordedTurn(t.user, t.response.text, list(t.response.tool_calls))
             for t in (conversation.turns if conversation is not None else [])]
    if not turns:
        return "nothing to save yet: no turn has happened"
    if target.exists():
        return f"{target} exists: not overwritten"
    recorded = RecordedConversation(target.stem, "messages", turns, origin="played by a person (--fabtest-interactive)")
    try:
        write_feature(target, redaction.redact(feature_text(recorded, source="an interactive session")))
    except OSError as exc:
        return f"could not save {target}: {exc}"
    return f"saved {len(turns)} turn(s) to {target}"
