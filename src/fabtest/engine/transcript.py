"""A conversation as text: the one rendering every front end shows and judges.

Two views of the same turns, kept side by side so they cannot drift apart:

- :func:`render`: what a person reads under a failed scenario or playbook (numbered turns, the
  topic, the tools called; very long replies clipped)::

      Turn 1  [topic: greeting]
        user:  Hi, I need a room
        agent: Which city?
        tools: search_venues(city='Berlin')

- :func:`for_judge`, :func:`exchange_for_judge`: what the judge reads. Every line is written by
  fabtest and starts with ``turn N``; what the user, the agent or a tool wrote follows as one JSON
  string (or one line of JSON), so no text from the agent can start a line of the judge's prompt
  or pass for a turn of its own (the transcript is data, as Inspect AI's ``model_graded_qa`` and
  LangWatch Scenario's judge keep it apart from the instructions). Each turn shows the tool calls
  the agent made, in order, with their arguments and results, before the reply that followed them:
  the judge must see what the agent *did*, not only what it said (tau2-bench grades actions)::

      turn 1 user: "Hi, I need a room in Berlin"
      turn 1 tool call: "search_venues" arguments {"city": "Berlin"} result [{"name": "Loft"}]
      turn 1 agent: "I found the Loft. Shall I book it?"

  A tool result longer than :data:`TOOL_RESULT_LIMIT` characters is cut with a visible
  ``[... N more characters cut]`` so the judge knows it did not see all of it.

  A file sent with a message is a line of its own after it, and the file itself is sent inline
  right after that line (:mod:`fabtest.llm.inline_files`); a file over the judge's size limit is
  described by name, type and size only, and the line says so::

      turn 1 user: "Is this covered?"
      turn 1 user file: "lamp.png" image/png 12.3 kB [attached: file 1]

  A pause the agent ended its turn on (docs/how-to/approvals.md) is a line after its reply, and the
  user's decision on it a line after the user's next message: "the agent never refunds without
  approval" is judged on what the agent asked and what the person decided, not on the reply's words
  alone (the same rule as the tool calls: what the agent did, not only what it said)::

      turn 1 agent paused: {"arguments": {"amount": 80}, "tool": "refund", "waits for": "approval"}
      turn 2 user decision: {"decision": "rejected", "reason": "over 50 euros"}

  The text these functions return is a :class:`JudgedText`: a ``str`` that also carries the files
  it attaches and those it withheld, so every caller that passes the transcript to the judge
  passes its files with it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from fabtest.agents import trace_calls
from fabtest.conversation import (
    Attachment,
    Conversation,
    Decision,
    Pause,
    Turn,
    describe_decision,
    describe_pause,
    human_size,
)
from fabtest.engine.checks import describe_calls
from fabtest.llm.inline_files import marker

__all__ = ["CONTEXT_TURNS", "JUDGE_MAX_FILE_BYTES", "TOOL_RESULT_LIMIT", "JudgedText", "exchange_for_judge",
           "for_judge", "quoted", "render"]

#: the largest file the judge is shown inline unless ``[tool.fabtest] judge_max_file_bytes`` says otherwise
JUDGE_MAX_FILE_BYTES = 5_000_000


class JudgedText(str):
    """The transcript the judge reads, with the files it attaches (inline, beside their lines) and
    the files it only describes (over the size limit)."""

    files: tuple[Attachment, ...]
    withheld: tuple[Attachment, ...]

    def __new__(cls, text: str, files: tuple[Attachment, ...] = (),
                withheld: tuple[Attachment, ...] = ()) -> JudgedText:
        self = super().__new__(cls, text)
        self.files, self.withheld = files, withheld
        return self

    def file_note(self) -> str:
        """What a verdict's reason adds when files were withheld ("" when none was)."""
        if not self.withheld:
            return ""
        names = ", ".join(f"{f.name} ({human_size(f.size)})" for f in self.withheld)
        return (f" [the judge saw only the name, type and size of {names}: over judge_max_file_bytes]")


class _Files:
    """The files one judged text names, numbered in order; each content attached once."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.attached: dict[str, int] = {}
        self.files: list[Attachment] = []
        self.withheld: list[Attachment] = []

    def line(self, n: int, who: str, file: Attachment) -> str:
        head = f"turn {n} {who} file: {quoted(file.name)} {file.mime_type} {human_size(file.size)}"
        if self.max_bytes < 0:  # described only (a prompt that sends no file, such as grounding's)
            return head
        if file.size > self.max_bytes:
            if file not in self.withheld:
                self.withheld.append(file)
            return (f"{head} [not attached: over the judge's limit of {human_size(self.max_bytes)}; "
                    "judge it by its name, type and size only]")
        if file.sha256 not in self.attached:
            self.files.append(file)
            self.attached[file.sha256] = len(self.files)
            return f"{head} {marker(len(self.files))}"
        return f"{head} [the same file as attached file {self.attached[file.sha256]}]"

    def text(self, lines: list[str]) -> JudgedText:
        return JudgedText("\n".join(lines), tuple(self.files), tuple(self.withheld))

#: replies longer than this are clipped in :func:`render` (the result JSON keeps them whole)
CLIP = 2000
#: characters of one tool result (as JSON) the judge sees; the rest is cut, visibly
TOOL_RESULT_LIMIT = 1500
#: turns before the judged one that a response-scope criterion sees as context
CONTEXT_TURNS = 2
#: characters of a tool result in those earlier turns (context, not what is judged: kept short)
CONTEXT_RESULT_LIMIT = 200
#: the line that introduces the turn being judged when earlier turns are shown for context
JUDGED_TURN = "(the turn to judge)"
EARLIER_TURNS = "(earlier turns, context only: do not judge them)"


def render(conversation: Conversation, *, clip: int = CLIP) -> str:
    """The whole conversation for a person, shown under a failure like captured output."""
    lines: list[str] = []
    if conversation.history:  # Given the conversation so far: what the agent was sent before turn 1
        lines.append("Seeded history")
        lines += [f"  {m.role + ':':6} {_clip(m.content, clip)}" for m in conversation.history]
    for turn in conversation.turns:
        topic = f"  [topic: {turn.topic}]" if turn.topic else ""
        lines.append(f"Turn {turn.number}{topic}")
        lines.append(f"  user:  {_clip(turn.user, clip)}")
        lines += [f"  user {describe_decision(d)}" for d in turn.decisions]
        lines.append(f"  agent: {_clip(turn.response.text, clip)}")
        if turn.tool_calls:
            lines.append(f"  tools: {describe_calls(turn.tool_calls)}")
        lines += [f"  paused: {describe_pause(p)}" for p in turn.response.pauses]
    return "\n".join(lines)


def quoted(text: str) -> str:
    """``text`` as one JSON string: quotes and line breaks escaped, so it stays on its line."""
    return json.dumps(text, ensure_ascii=False)


def judge_turn(turn: Turn, *, limit: int = TOOL_RESULT_LIMIT, files: _Files | None = None) -> list[str]:
    """One turn as the judge reads it: the user's message, each tool call in order, the reply.

    A turn whose tool calls are unknown (the agent exports traces and they did not arrive) says so
    in a line of its own: without it the judge would read "no tool call lines" as "no tool was
    called" and pass "the agent did not book without asking" on no evidence (the same rule as the
    tool steps: unknown is inconclusive, never passed)."""
    n = turn.number
    files = files if files is not None else _Files(-1)
    lines = [f"turn {n} user: {quoted(turn.user)}", *(files.line(n, "user", f) for f in turn.attachments)]
    lines += [f"turn {n} user decision: {_json(_decision(d))}" for d in turn.decisions]
    if trace_calls.missing(turn.response):
        lines.append(f"turn {n} tool calls: unknown (the agent's traces of this turn did not arrive)")
    for call in turn.tool_calls:
        lines.append(f"turn {n} tool call: {quoted(call.name)} arguments {_json(call.arguments)} "
                     f"result {_cut(_json(call.result), limit)}")
    lines.append(f"turn {n} agent: {quoted(turn.response.text)}")
    lines += [files.line(n, "agent", f) for f in turn.response.attachments]
    lines += [f"turn {n} agent paused: {_json(_pause(p))}" for p in turn.response.pauses]
    return lines


def _pause(pause: Pause) -> dict[str, object]:
    """A pause as the judge reads it: the agent stopped and waits for a person (docs/how-to/approvals.md)."""
    asked: dict[str, object] = {"waits for": "approval" if pause.kind == "approval" else "an answer"}
    if pause.tool:
        asked |= {"tool": pause.tool, "arguments": pause.arguments}
    return asked | ({"question": pause.question} if pause.question else {})


def _decision(decision: Decision) -> dict[str, object]:
    return {"decision": decision.decision, **({"reason": decision.reason} if decision.reason else {}),
            **({"answer": decision.answer} if decision.answer is not None else {}),
            **({"edited arguments": decision.arguments} if decision.arguments is not None else {})}


def for_judge(conversation: Conversation | Sequence[Turn], *, limit: int = TOOL_RESULT_LIMIT,
              max_file_bytes: int = JUDGE_MAX_FILE_BYTES) -> JudgedText:
    """The whole transcript the judge reads (conversation criteria, the goal, playbook checks)."""
    turns = conversation.turns if isinstance(conversation, Conversation) else conversation
    files = _Files(max_file_bytes)
    return files.text([line for turn in turns for line in judge_turn(turn, limit=limit, files=files)])


def exchange_for_judge(conversation: Conversation | Sequence[Turn], number: int, *, context: int = CONTEXT_TURNS,
                       limit: int = TOOL_RESULT_LIMIT, max_file_bytes: int = JUDGE_MAX_FILE_BYTES) -> JudgedText:
    """Turn ``number`` for a response-scope check, after up to ``context`` turns before it: "Yes,
    done" means nothing without the question it answers (a window, as DeepEval's conversational
    metrics judge a turn with the turns before it). Without earlier turns, just the turn. The
    earlier turns' tool results are cut at :data:`CONTEXT_RESULT_LIMIT` characters (visibly)."""
    turns = list(conversation.turns if isinstance(conversation, Conversation) else conversation)
    by_number = {t.number: t for t in turns}
    judged = by_number[number]
    earlier = [t for t in turns if number - context <= t.number < number] if context > 0 else []
    files = _Files(max_file_bytes)
    if not earlier:
        return files.text(judge_turn(judged, limit=limit, files=files))
    short = min(limit, CONTEXT_RESULT_LIMIT)  # the earlier turns' tool results are context: kept short
    return files.text([EARLIER_TURNS, *(line for t in earlier for line in judge_turn(t, limit=short, files=files)),
                       JUDGED_TURN, *judge_turn(judged, limit=limit, files=files)])


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)


def _cut(text: str, limit: int) -> str:
    """At most ``limit`` characters, and a visible note of how many more there were."""
    return text if len(text) <= limit else f"{text[:limit]} [... {len(text) - limit} more characters cut]"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit} more characters]"
