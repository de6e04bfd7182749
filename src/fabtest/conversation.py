"""The plain data a conversation is made of: messages, tool calls, turns and check outcomes.

No I/O here (but :meth:`Attachment.from_path`, one read). Agents produce ``AgentResponse``; the
runner appends ``Turn``s and ``Check``s to a ``Conversation``; the experiment recorder turns a
finished conversation into a result.

An agent that stops and waits for a person (an approval of a risky tool call, a question) says so
with :class:`Pause` objects on its response; the user's answer travels back on the next user message as
:class:`Decision` objects (docs/how-to/approvals.md). Every framework's own pause (LangGraph
``interrupt()``, OpenAI Agents SDK approvals, PydanticAI deferred tools, ADK confirmations, A2A
``input-required``, AG-UI interrupts) is mapped onto these two by its adapter.

A file in the conversation is an :class:`Attachment`: its bytes are read and hashed once, and the
one immutable object travels by reference from the step to every turn, adapter, judge call and
record, so a 1 MB photo costs one read and one hash per run however many calls see it.
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import os
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["user", "agent"]
Mode = Literal["should", "must"]
#: passed / failed are verdicts; inconclusive means the judge could not decide; not_applicable means
#: the judge found the criterion does not apply to what it judged ("offers a drink with every order"
#: on a greeting); skipped means the check could not run (for example no LLM configured). Only
#: passed / failed enter a rate; inconclusive and not_applicable are counted and shown apart.
Status = Literal["passed", "failed", "inconclusive", "not_applicable", "skipped"]


#: the type of a file whose name says nothing (RFC 2046's "arbitrary binary data")
OCTET_STREAM = "application/octet-stream"


@dataclass(frozen=True)
class Attachment:
    """A file in the conversation: a photo the user sends, a PDF the agent replies with.

    Build one with :meth:`from_bytes` or :meth:`from_path`: they compute ``sha256`` (the file's
    identity in records and caches) and guess ``mime_type`` from the name when it is not given.
    Two attachments are equal when their name, type and hash are; ``data`` is left out of ``repr``.
    """

    name: str
    mime_type: str
    data: bytes = field(repr=False, compare=False)
    sha256: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.data, bytes | bytearray | memoryview):
            raise TypeError(f"Attachment {self.name!r}: data must be bytes, got {type(self.data).__name__}")
        if isinstance(self.data, bytearray | memoryview):
            object.__setattr__(self, "data", bytes(self.data))
        if not self.sha256:
            object.__setattr__(self, "sha256", hashlib.sha256(self.data).hexdigest())
        if not self.mime_type:
            object.__setattr__(self, "mime_type", guess_mime_type(self.name))

    @classmethod
    def from_bytes(cls, data: bytes, *, name: str, mime_type: str | None = None) -> Attachment:
        """An attachment of ``data`` called ``name``; the type is guessed from the name when not given."""
        return cls(name=name, mime_type=mime_type or guess_mime_type(name), data=bytes(data))

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], *, name: str | None = None,
                  mime_type: str | None = None) -> Attachment:
        """The file at ``path`` (read once), named by its file name unless ``name`` is given."""
        with open(path, "rb") as f:
            data = f.read()
        return cls.from_bytes(data, name=name or os.path.basename(os.fspath(path)), mime_type=mime_type)

    @property
    def size(self) -> int:
        """The number of bytes."""
        return len(self.data)

    @property
    def is_image(self) -> bool:
        return self.mime_type.startswith("image/")

    def describe(self) -> str:
        """``lamp.png (image/png, 12.3 kB)``: the file as a line of text, for transcripts and errors."""
        return f"{self.name} ({self.mime_type}, {human_size(self.size)})"

    def to_record(self) -> dict[str, Any]:
        """What the experiment JSON keeps of the file: never the bytes."""
        return {"name": self.name, "mime_type": self.mime_type, "size": self.size, "sha256": self.sha256}


@dataclass(frozen=True)
class Audio:
    """Sound in a voice conversation: 16-bit little-endian mono PCM at ``sample_rate`` Hz.

    A voice agent receives the user's turn as one ``Audio`` and answers with one or more (a stream
    of chunks). ``text`` is what the agent says it said in that chunk, when it knows (a realtime
    model's own transcript): fabtest records it beside what the recogniser heard.
    """

    pcm: bytes = field(repr=False)
    sample_rate: int = 16000
    text: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.pcm, bytes | bytearray | memoryview):
            raise TypeError(f"Audio: pcm must be bytes of 16-bit mono samples, got {type(self.pcm).__name__}")
        if isinstance(self.pcm, bytearray | memoryview):
            object.__setattr__(self, "pcm", bytes(self.pcm))
        if len(self.pcm) % 2:
            raise ValueError(f"Audio: pcm has an odd number of bytes ({len(self.pcm)}); 16-bit samples take 2 each")
        if not isinstance(self.sample_rate, int) or self.sample_rate <= 0:
            raise ValueError(f"Audio: sample_rate must be a positive whole number of Hz, got {self.sample_rate!r}")

    @property
    def duration_ms(self) -> float:
        """How long the sound lasts."""
        return len(self.pcm) / 2 / self.sample_rate * 1000


def guess_mime_type(name: str) -> str:
    """The type the file name suggests (``lamp.png`` -> ``image/png``), else application/octet-stream."""
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed or OCTET_STREAM


def human_size(size: int) -> str:
    """``532 B``, ``12.3 kB``, ``1.0 MB`` (decimal units, as file managers show them)."""
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"


#: approval: the agent waits for a yes or no on a tool call it wants to make; question: it waits for
#: an answer in words (a LangGraph ``interrupt("Which size?")``, A2A ``input-required``)
PauseKind = Literal["approval", "question"]
#: what the user did with a pause; ``edited`` is an approval with changed arguments
DecisionKind = Literal["approved", "rejected", "answered", "edited"]
#: a pause's outcome in the record: a decision, or ``unanswered`` when the scenario ended first
PauseOutcome = Literal["approved", "rejected", "answered", "edited", "unanswered"]


@dataclass(frozen=True)
class Pause:
    """The agent stopped and waits for a person: to approve ``tool`` called with ``arguments``
    (kind ``approval``), or to answer ``question`` (kind ``question``).

    ``id`` ties the decision to the pause (the framework's interrupt or tool-call id); a Python
    agent may leave it empty and fabtest numbers its pauses ``pause-1``, ``pause-2``... in the
    turn. ``question`` is what the agent shows the person, when it says something ("Refund 30 EUR
    to Ann?"). ``kind`` defaults to ``approval`` when a tool is named, ``question`` otherwise.
    """

    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    question: str | None = None
    id: str = ""
    kind: PauseKind | None = None
    #: what the framework said of the pause as it gave it (the interrupt's value, the item's type)
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        kind = self.kind or ("approval" if self.tool else "question")
        if kind not in ("approval", "question"):
            raise ValueError(f"Pause kind must be 'approval' or 'question', got {kind!r}")
        if kind == "approval" and not self.tool:
            raise ValueError("an approval Pause needs the tool it asks to call: "
                             "Pause(tool=\"refund\", arguments={...})")
        if kind == "question" and not (self.question or self.tool):
            raise ValueError("a question Pause needs its question: Pause(question=\"Which size?\")")
        object.__setattr__(self, "kind", kind)

    def __hash__(self) -> int:  # a frozen message holding a pause stays hashable (its arguments are a dict)
        return hash((self.id, self.kind, self.tool, self.question, _canonical(self.arguments)))

    def describe(self) -> str:
        """``refund(amount=30, order='A1')`` for an approval, the question for a question."""
        if self.kind == "approval" or not self.question:
            args = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
            return f"{self.tool}({args})"
        return self.question


@dataclass(frozen=True)
class Decision:
    """The user's answer to one :class:`Pause`, sent on the next user message (``Message.decisions``).

    ``approved`` / ``rejected`` (with the ``reason`` the user gave, if any), ``answered`` (with the
    ``answer`` text) or ``edited`` (an approval of the call with the new ``arguments``).
    """

    pause_id: str
    decision: DecisionKind
    reason: str | None = None
    answer: str | None = None
    arguments: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.decision not in ("approved", "rejected", "answered", "edited"):
            raise ValueError(f"Decision must be approved, rejected, answered or edited, got {self.decision!r}")
        if self.decision == "answered" and self.answer is None:
            raise ValueError("an answered Decision needs its answer text")
        if self.decision == "edited" and self.arguments is None:
            raise ValueError("an edited Decision needs the edited arguments")

    def __hash__(self) -> int:
        return hash((self.pause_id, self.decision, self.reason, self.answer, _canonical(self.arguments)))

    @property
    def approved(self) -> bool:
        """True for approved and edited: the call may go ahead."""
        return self.decision in ("approved", "edited")

    def to_record(self) -> dict[str, Any]:
        return {"decision": self.decision, "reason": self.reason,
                **({"answer": self.answer} if self.answer is not None else {}),
                **({"edited_arguments": self.arguments} if self.arguments is not None else {})}


@dataclass(frozen=True)
class Message:
    """One line of the conversation as the agent sees it, with the files sent with it.

    An agent's message carries the ``pauses`` it ended on; the user's next message carries the
    ``decisions`` on them (the user's words, if any, are ``content``).
    """

    role: Role
    content: str
    attachments: tuple[Attachment, ...] = ()
    decisions: tuple[Decision, ...] = ()
    pauses: tuple[Pause, ...] = ()

    def __post_init__(self) -> None:
        if self.role not in ("user", "agent"):
            raise ValueError(f"Message role must be 'user' or 'agent', got {self.role!r}")
        for name in ("attachments", "decisions", "pauses"):
            if not isinstance(getattr(self, name), tuple):
                object.__setattr__(self, name, tuple(getattr(self, name)))

    def __getitem__(self, key: str) -> str:
        """``message["content"]`` reads like ``message.content``: an agent written for chat-API
        dicts (``m["role"]``, ``m["content"]``) takes fabtest's messages unchanged."""
        if key == "role":
            return self.role
        if key == "content":
            return self.content
        raise KeyError(f"{key!r}: a fabtest Message has 'role' ('user' or 'agent') and 'content'")

    def get(self, key: str, default: Any = None) -> Any:
        """``dict.get`` for the same two keys."""
        return self[key] if key in ("role", "content") else default


@dataclass
class ToolCall:
    """A tool the agent called while producing a reply, with what it returned."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: a stub of the scenario answered the call (``Given the tool "X" returns``), not the real tool
    stubbed: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "arguments": self.arguments, "result": self.result, "metadata": self.metadata}
        return {**out, "stubbed": True} if self.stubbed else out


@dataclass
class AgentResponse:
    """What an agent returns for one user message."""

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    #: files the agent replies with (:class:`Attachment`)
    attachments: list[Attachment] = field(default_factory=list)
    #: the agent stopped and waits for these (:class:`Pause`): decided on the next user message
    pauses: list[Pause] = field(default_factory=list)


@dataclass
class VoiceTurn:
    """What a voice turn adds to a turn: both sides' audio and the times (docs/how-to/voice.md).

    The turn's ``user`` is the text that was spoken, and its response's ``text`` is what the
    recogniser heard of the agent's reply: the transcript every check, the judge and the simulated
    user see.
    """

    #: the user's turn as spoken (silence for ``When the user stays silent``)
    user_audio: Audio
    #: what the user heard of the reply, chunks joined (cut at a barge-in)
    agent_audio: Audio
    #: from the end of the user's audio to the agent's first chunk; None when it sent no audio
    time_to_first_audio_ms: float | None = None
    #: the agent's own words for that audio, when its chunks carry them
    agent_text: str | None = None
    #: word error rate of the transcript against ``agent_text`` (None without agent_text)
    word_error_rate: float | None = None
    #: the user cut the reply short (``When the user interrupts after N ms``)
    interrupted: bool = False

    @property
    def reply_audio_ms(self) -> float:
        """How long the reply heard lasts."""
        return self.agent_audio.duration_ms


@dataclass
class Turn:
    """One exchange: the user's message, the agent's response, and the topic after it."""

    number: int
    user: str
    response: AgentResponse
    topic: str | None = None
    duration_s: float = 0.0
    #: the topic left through a trigger of a topic that is not its successor (None: on the graph)
    off_graph_from: str | None = None
    #: what the simulated user said of its own message: an adversarial user's tactic (fabtest.redteam)
    user_note: str | None = None
    #: the files the user sent with its message
    attachments: tuple[Attachment, ...] = ()
    #: the user's decisions on the previous turn's pauses, sent with its message
    decisions: tuple[Decision, ...] = ()
    #: a voice turn's audio and times (None: a text turn)
    voice: VoiceTurn | None = None

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self.response.tool_calls


@dataclass(init=False)
class Check:
    """The outcome of one assertion step, soft (``should``) or hard (``must``).

    ``type`` names the assertion (satisfy, match, call_tool, grounded_in, ...); ``criterion`` is the
    key it is aggregated under in criteria performance (the criterion name for ``satisfy``). The
    fields have the experiment JSON's names (docs/reference/experiment-json.md).
    """

    type: str
    mode: Mode
    criterion: str
    status: Status
    turn: int | None = None
    details: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def __init__(self, type: str | None = None, mode: Mode | None = None, criterion: str | None = None,
                 status: Status | None = None, turn: int | None = None, details: str = "",
                 data: dict[str, Any] | None = None, *, kind: str | None = None, label: str | None = None) -> None:
        # ``kind=`` / ``label=`` are the keywords before 0.2: accepted for one release, with a warning
        if kind is not None or label is not None:
            import warnings

            warnings.warn("Check(kind=..., label=...) is deprecated: the fields are type and criterion, as in the "
                          "experiment JSON", DeprecationWarning, stacklevel=2)
        type, criterion = type if type is not None else kind, criterion if criterion is not None else label
        if type is None or mode is None or criterion is None or status is None:
            raise TypeError("Check() needs a type, a mode, a criterion and a status")
        self.type, self.mode, self.criterion, self.status = type, mode, criterion, status
        self.turn, self.details, self.data = turn, details, data if data is not None else {}

    @property
    def passed(self) -> bool | None:
        """True/False for a verdict, None when skipped or inconclusive."""
        if self.status == "passed":
            return True
        if self.status == "failed":
            return False
        return None

    @property
    def kind(self) -> str:
        """``type`` by its name before 0.2 (read-only; ``record_check(kind, ...)`` keeps the word)."""
        return self.type

    @property
    def label(self) -> str:
        """``criterion`` by its name before 0.2 (read-only)."""
        return self.criterion

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "mode": self.mode,
            "criterion": self.criterion,
            "status": self.status,
            "passed": self.passed,
            "turn": self.turn,
            "details": self.details,
            **({"data": self.data} if self.data else {}),
        }


@dataclass
class TokenUsage:
    """Tokens and calls spent by one LLM role (judge or simulator)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, other: TokenUsage) -> None:
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens

    def to_dict(self) -> dict[str, int]:
        return {"calls": self.calls, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens}


@dataclass
class Conversation:
    """Every turn so far plus every check recorded on it."""

    turns: list[Turn] = field(default_factory=list)
    evaluations: list[Check] = field(default_factory=list)
    expectations: list[Check] = field(default_factory=list)
    usage: dict[str, TokenUsage] = field(default_factory=dict)
    #: the conversation before the first turn (``Given the conversation so far``): sent to the agent
    #: as history, shown to the judge and the simulated user; not turns (nothing was checked there)
    history: list[Message] = field(default_factory=list)

    @property
    def messages(self) -> list[Message]:
        out: list[Message] = list(self.history)
        for turn in self.turns:
            out.append(Message("user", turn.user, turn.attachments, decisions=turn.decisions))
            out.append(Message("agent", turn.response.text, tuple(turn.response.attachments),
                               pauses=tuple(turn.response.pauses)))
        return out

    @property
    def attachments(self) -> list[Attachment]:
        """Every distinct file of the conversation (by content), in the order first sent."""
        seen: dict[str, Attachment] = {}
        for message in self.messages:
            for file in message.attachments:
                seen.setdefault(file.sha256, file)
        return list(seen.values())

    @property
    def last_turn(self) -> Turn | None:
        return self.turns[-1] if self.turns else None

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [call for turn in self.turns for call in turn.tool_calls]

    @property
    def pending_pauses(self) -> list[Pause]:
        """The pauses the agent ended its latest turn on: they wait for the user's decision."""
        turn = self.last_turn
        return list(turn.response.pauses) if turn is not None else []

    def pause_outcomes(self, turn: Turn) -> list[tuple[Pause, Decision | None, int | None]]:
        """Each pause of ``turn`` with the decision taken on it and the turn it came with (None:
        not decided, yet or ever)."""
        out: list[tuple[Pause, Decision | None, int | None]] = []
        for pause in turn.response.pauses:
            found = next(((d, t.number) for t in self.turns[turn.number:] for d in t.decisions
                          if d.pause_id == pause.id), None)
            out.append((pause, *found) if found else (pause, None, None))
        return out

    @property
    def topic_path(self) -> list[str]:
        """The topic after every turn (turns without a topic graph are left out)."""
        return [t.topic for t in self.turns if t.topic is not None]

    @property
    def topics_visited(self) -> list[str]:
        """Distinct topics in the order first reached."""
        seen: list[str] = []
        for topic in self.topic_path:
            if topic not in seen:
                seen.append(topic)
        return seen

    @property
    def off_graph_transitions(self) -> list[str]:
        """Every jump outside the topic graph, as ``"from -> to (turn n)"``."""
        return [f"{t.off_graph_from} -> {t.topic} (turn {t.number})" for t in self.turns if t.off_graph_from]

    @property
    def backtracked(self) -> bool:
        """True when the conversation returned to a topic it had left."""
        path = self.topic_path
        left: set[str] = set()
        for prev, cur in zip(path, path[1:], strict=False):
            if cur != prev:
                left.add(prev)
                if cur in left:
                    return True
        return False

    def transcript(self) -> str:
        """The conversation as ``User: ...`` / ``Agent: ...`` lines; a file is a line of its own
        under its message (``  [file: lamp.png (image/png, 12.3 kB)]``)."""
        lines: list[str] = []
        for m in self.messages:
            lines.append(f"{'User' if m.role == 'user' else 'Agent'}: {m.content}")
            lines.extend(f"  [file: {a.describe()}]" for a in m.attachments)
            lines.extend(f"  [{describe_decision(d)}]" for d in m.decisions)
            lines.extend(f"  [{describe_pause(p)}]" for p in m.pauses)
        return "\n".join(lines)

    def record(self, check: Check) -> None:
        (self.expectations if check.mode == "must" else self.evaluations).append(check)

    def add_usage(self, role: str, usage: TokenUsage) -> None:
        self.usage.setdefault(role, TokenUsage()).add(usage)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def describe_pause(pause: Pause) -> str:
    """``asks approval of refund(amount=30)`` / ``asks: Which size?``: a pause as a transcript line."""
    if pause.kind == "approval":
        said = f" ({pause.question})" if pause.question else ""
        return f"asks approval of {pause.describe()}{said}"
    return f"asks: {pause.describe()}"


def describe_decision(decision: Decision, *, past: bool = False) -> str:
    """``approves``, ``rejects: no receipt``, ``answers: Blue``, ``approves with {...}``; in the
    past tense (``approved``, ...) for a sentence whose subject is the user ("you approved")."""
    if decision.decision == "answered":
        return f"{'answered' if past else 'answers'}: {decision.answer}"
    verbs = {"approved": "approved", "rejected": "rejected", "edited": "approved with edits"} if past else \
        {"approved": "approves", "rejected": "rejects", "edited": "approves with edits"}
    verb = verbs[decision.decision]
    said = f" {json.dumps(decision.arguments, ensure_ascii=False)}" if decision.arguments is not None else ""
    return f"{verb}{said}" + (f": {decision.reason}" if decision.reason else "")


def json_or_text(value: Any) -> Any:
    """A value that may be JSON text (a tool's result or arguments as logs and wires carry them):
    the data when the text parses, else the value as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def jsonable(value: Any) -> Any:
    """Plain JSON data: what an agent or a provider returned may hold dates, sets or objects,
    which become text, so results, caches and traces always serialise."""
    return json.loads(json.dumps(value, default=str))
