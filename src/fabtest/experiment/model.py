"""The result of one scenario run, as plain data that survives pytest-xdist and JSON.

A ``ScenarioResult`` is built by the pytest plugin when a scenario ends, travels inside the pytest
report (``user_properties``) to the controller, and is aggregated by the recorder.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from fabtest.conversation import (
    AgentResponse,
    Attachment,
    Conversation,
    Decision,
    Message,
    Pause,
    ToolCall,
    Turn,
    jsonable,
)
from fabtest.errors import FailureType, excerpt
from fabtest.experiment.cost import agent_turn_lines


class CheckRecord(BaseModel):
    """One evaluation (soft) or expectation (hard)."""

    type: str
    mode: Literal["should", "must"]
    criterion: str
    status: Literal["passed", "failed", "inconclusive", "not_applicable", "skipped"]
    passed: bool | None = None
    turn: int | None = None
    details: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class ToolCallRecord(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    #: what the agent said about the call (id, status, latency...), as it gave it
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: a scenario's stub answered the call; written only when true, so older files read the same
    stubbed: bool = Field(default=False, exclude_if=lambda stubbed: not stubbed)


class FileRecord(BaseModel):
    """A file of the conversation as the experiment keeps it: never its bytes (they are kept once
    per content under ``results/files/<sha256>``, :mod:`fabtest.experiment.file_store`)."""

    name: str
    mime_type: str
    size: int
    sha256: str


def _no_files(files: list[FileRecord]) -> bool:
    return not files


class PauseRecord(BaseModel):
    """One pause the agent ended its turn on (docs/how-to/approvals.md) and what the user decided."""

    id: str
    kind: Literal["approval", "question"]
    tool: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    question: str | None = None
    #: approved, rejected, answered, edited; unanswered: the scenario ended before a decision
    decision: Literal["approved", "rejected", "answered", "edited", "unanswered"] = "unanswered"
    reason: str | None = None
    answer: str | None = Field(default=None, exclude_if=lambda value: value is None)
    edited_arguments: dict[str, Any] | None = Field(default=None, exclude_if=lambda value: value is None)
    #: the turn whose user message carried the decision (None: unanswered)
    decided_in_turn: int | None = None

    def as_decision(self) -> Decision | None:
        """The decision as the user's message carried it (None: unanswered): replay, shrink and
        import send or write it again, and a judged conversation reads it."""
        if self.decision == "unanswered":
            return None
        return Decision(self.id, self.decision, reason=self.reason,
                        answer=(self.answer or "") if self.decision == "answered" else None,
                        arguments=dict(self.edited_arguments or self.arguments) if self.decision == "edited" else None)


class AudioRecord(FileRecord):
    """One side of a voice turn: a WAV file kept like any file of the conversation, and its length."""

    sample_rate: int
    duration_ms: float


class VoiceRecord(BaseModel):
    """What a voice turn adds to its turn (docs/how-to/voice.md): both sides' audio and the times.
    The turn's ``agent`` is what the recogniser heard; ``agent_text`` the agent's own words for it."""

    user_audio: AudioRecord
    agent_audio: AudioRecord | None = None
    #: from the end of the user's audio to the agent's first chunk (None: no audio)
    time_to_first_audio_ms: float | None = None
    #: how long the reply heard lasts
    reply_audio_ms: float = 0.0
    agent_text: str | None = None
    #: the transcript's word error rate against agent_text (None without agent_text)
    word_error_rate: float | None = None
    #: the user cut the reply short (barge-in): ``agent`` is what was heard until then
    interrupted: bool = False

    @classmethod
    def of(cls, turn: Turn) -> VoiceRecord | None:
        voice = turn.voice
        if voice is None:
            return None
        from fabtest._internal.wav import voice_files

        files = voice_files(turn)
        agent = files[1] if len(files) > 1 else None

        def audio(file: Attachment, sound: Any) -> AudioRecord:
            return AudioRecord(**file.to_record(), sample_rate=sound.sample_rate,
                               duration_ms=round(sound.duration_ms, 1))

        first = voice.time_to_first_audio_ms
        return cls(user_audio=audio(files[0], voice.user_audio),
                   agent_audio=audio(agent, voice.agent_audio) if agent is not None else None,
                   time_to_first_audio_ms=None if first is None else round(first, 1),
                   reply_audio_ms=round(voice.reply_audio_ms, 1), agent_text=voice.agent_text,
                   word_error_rate=None if voice.word_error_rate is None else round(voice.word_error_rate, 4),
                   interrupted=voice.interrupted)


class TurnRecord(BaseModel):
    number: int
    user: str
    agent: str
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    topic: str | None = None
    #: the agent's latency for this turn (the time ``chat`` took), in seconds
    duration_s: float = 0.0
    #: ``AgentResponse.metadata`` / the HTTP response's ``metadata`` (model, request id, usage...)
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: the topic was reached through a trigger of a topic that is not a successor of the previous one
    off_graph: bool = False
    #: the simulated user's note on its message: an adversarial user's tactic (README "Adversarial users")
    user_note: str | None = None
    #: the files the user sent with its message, and those the agent replied with; written only when
    #: there are some, so files without them read the same
    user_files: list[FileRecord] = Field(default_factory=list, exclude_if=_no_files)
    agent_files: list[FileRecord] = Field(default_factory=list, exclude_if=_no_files)
    #: the pauses the agent ended the turn on, each with its decision; written only when there are some
    pauses: list[PauseRecord] = Field(default_factory=list, exclude_if=lambda pauses: not pauses)
    #: a voice turn's audio and times; written only for voice turns
    voice: VoiceRecord | None = Field(default=None, exclude_if=lambda value: value is None)


class UsageRecord(BaseModel):
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    #: the model that spent them when the role names it (the agent); else the experiment's judge/simulator model
    model: str | None = None


class TopicRecord(BaseModel):
    name: str
    characteristic: str = ""
    successors: list[str] = Field(default_factory=list)


class ScenarioResult(BaseModel):
    """Everything recorded about one run of one scenario."""

    id: str  # stable id: example:<12 hex>
    name: str
    nodeid: str = ""
    feature: str = ""
    feature_file: str = ""
    rule: str | None = None
    record_id: str | None = None  # scenario-set record id
    #: the record's ``category`` (an attack category of a red-team set, say), for coverage by category
    record_category: str | None = None
    #: the red-team attack the simulated user played (fabtest.redteam), for the hold rate per attack
    attack: str | None = None
    #: the attack's criteria (fabtest.redteam): the agent held only when every one was judged and passed
    attack_criteria: list[str] = Field(default_factory=list)
    iteration: int = 1
    passed: bool
    skipped: bool = False
    skip_reason: str | None = None
    turns: int = 0
    topics_visited: list[str] = Field(default_factory=list)
    topic_path: list[str] = Field(default_factory=list)
    backtracked: bool = False
    #: topic changes through a trigger of a non-successor ("greeting -> booking (turn 2)")
    off_graph_transitions: list[str] = Field(default_factory=list)
    failure_type: FailureType | None = None
    failure_message: str | None = None
    evaluations: list[CheckRecord] = Field(default_factory=list)
    expectations: list[CheckRecord] = Field(default_factory=list)
    transcript: list[TurnRecord] = Field(default_factory=list)
    #: the seeded conversation before the first turn (``Given the conversation so far``): role and
    #: content per message; written only when there is one
    history: list[dict[str, str]] = Field(default_factory=list, exclude_if=lambda history: not history)
    #: the scenario's Gherkin steps as written (background first, an Outline's values filled in): keyword, text,
    #: and its doc string or table when it has one; a playbook's steps as "Step N" with the user message and the
    #: expected outcome. Written only when known (older files and ``fabtest.run`` have none)
    steps: list[dict[str, Any]] = Field(default_factory=list, exclude_if=lambda steps: not steps)
    usage: dict[str, UsageRecord] = Field(default_factory=dict)
    duration_s: float = 0.0
    # configuration in force for this scenario, for the fingerprints
    criteria: dict[str, str] = Field(default_factory=dict)
    topics: list[TopicRecord] = Field(default_factory=list)
    simulator: dict[str, Any] | None = None
    #: the simulated conversations tried (engine/simulation.py): ``{"valid": bool, "tries": [{"attempt",
    #: "valid", "problems", "turns", "stop"}, ...]}``; an invalid one was run again, and a run whose every
    #: try was invalid is skipped (not counted). None for a scenario without a simulated user.
    simulation: dict[str, Any] | None = None
    agent_metadata: dict[str, Any] = Field(default_factory=dict)
    #: ``fabtest score``: the logged conversation this run judged: ``conversation`` (its id in the logs),
    #: ``timestamp``, ``source`` (file:line), ``format`` and ``content_hash``; written only for such runs
    production: dict[str, Any] | None = Field(default=None, exclude_if=lambda value: value is None)

    @field_validator("failure_message", "skip_reason")
    @classmethod
    def _bounded(cls, value: str | None) -> str | None:
        """A huge message (an agent raising with 20 MB of text) is kept as an excerpt that says so."""
        return excerpt(value) if value is not None else None


class ExperimentInfo(BaseModel):
    """Identity of one run: who, when, on which code, with which judge and simulator."""

    id: str
    timestamp: str
    name: str | None = None
    tags: list[str] = Field(default_factory=list)
    git_commit: str | None = None
    git_branch: str | None = None
    git_dirty: bool | None = None
    config_hash: str = ""
    criteria_hash: str = ""
    topic_graph_hash: str = ""
    judge_provider: str | None = None
    judge_model: str | None = None
    simulator_provider: str | None = None
    simulator_model: str | None = None
    #: What the judge/simulator is when it is no real model (a demo or scripted stand-in).
    judge_note: str | None = None
    simulator_note: str | None = None
    #: the judge's and simulator's settings that can change a verdict (``Settings.verdict_settings``:
    #: temperature, samples, samples_per_criterion, context_turns; temperature, fidelity); {} unknown
    judge_settings: dict[str, Any] = Field(default_factory=dict)
    simulator_settings: dict[str, Any] = Field(default_factory=dict)
    iterations: int = 1
    interrupted: bool = False
    #: ``i/n`` when this experiment is one shard's part of a CI run (``fabtest merge`` combines them)
    shard: str | None = None
    #: ``[tool.fabtest.prices]``: model -> {input, output} USD per million tokens, over the defaults
    prices: dict[str, dict[str, float]] = Field(default_factory=dict)
    #: ``--fabtest-until-decided``: the baseline, the budget, the runs added and the sequential decision
    until_decided: dict[str, Any] | None = Field(default=None, exclude_if=lambda value: value is None)
    #: ``fabtest ab``: this experiment's arm (``baseline`` or ``current``), its ref, commit and options
    ab: dict[str, Any] | None = Field(default=None, exclude_if=lambda value: value is None)
    #: ``"production"`` for ``fabtest score``'s experiments (logged conversations judged, no agent called);
    #: written only then, so a test run's file is unchanged
    source: str | None = Field(default=None, exclude_if=lambda value: value is None)


def turn_records(conversation: Conversation) -> list[TurnRecord]:
    """The transcript of a conversation as result records (features and playbooks alike)."""
    return [
        TurnRecord(number=t.number, user=t.user, agent=t.response.text, topic=t.topic,
                   duration_s=round(t.duration_s, 4), metadata=jsonable(t.response.metadata),
                   off_graph=t.off_graph_from is not None, user_note=t.user_note,
                   user_files=[FileRecord(**f.to_record()) for f in t.attachments],
                   agent_files=[FileRecord(**f.to_record()) for f in t.response.attachments],
                   tool_calls=[ToolCallRecord(name=c.name, arguments=jsonable(c.arguments), result=jsonable(c.result),
                                              metadata=jsonable(c.metadata), stubbed=c.stubbed)
                               for c in t.tool_calls],
                   pauses=pause_records(conversation, t),
                   voice=VoiceRecord.of(t))
        for t in conversation.turns
    ]


def pause_records(conversation: Conversation, turn: Turn) -> list[PauseRecord]:
    """The pauses of ``turn``, each with the decision a later user message took on it."""
    out = []
    for pause, decision, decided_in in conversation.pause_outcomes(turn):
        fields = decision.to_record() if decision is not None else {}
        out.append(PauseRecord(id=pause.id, kind=pause.kind or "approval", tool=pause.tool,
                               arguments=jsonable(pause.arguments), question=pause.question,
                               decided_in_turn=decided_in, **jsonable(fields)))
    return out


def _pauses(records: Sequence[TurnRecord]) -> tuple[dict[int, list[Pause]], dict[int, list[Decision]]]:
    """The pauses of each recorded turn, and the decisions each later turn carried (by number)."""
    asked: dict[int, list[Pause]] = {}
    decided: dict[int, list[Decision]] = {}
    for t in records:
        for p in t.pauses:
            asked.setdefault(t.number, []).append(Pause(tool=p.tool, arguments=dict(p.arguments), question=p.question,
                                                        id=p.id, kind=p.kind))
            decision = p.as_decision()
            if decision is not None and p.decided_in_turn is not None:
                decided.setdefault(p.decided_in_turn, []).append(decision)
    return asked, decided


def conversation_of(result: ScenarioResult, turns: Sequence[TurnRecord] | None = None, *,
                    files_dir: Path | None = None) -> Conversation:
    """A result's turns (``turns``, default its transcript) as the conversation the checks and the
    judge read, the inverse of :func:`turn_records`: text, tool calls with their results, turn
    metadata, topics and the seeded history. rejudge, replay's re-checks and mutate all judge what
    the run's judge saw through it. With ``files_dir`` (a results directory), each turn's files
    come back with their kept bytes (a file whose bytes are not there is left out)."""
    def files(records: list[FileRecord]) -> tuple[Attachment, ...]:
        if files_dir is None:
            return ()
        from fabtest.experiment.file_store import load

        loaded = (load(files_dir, name=f.name, mime_type=f.mime_type, sha256=f.sha256) for f in records)
        return tuple(f for f in loaded if f is not None)

    records = result.transcript if turns is None else turns
    asked, decided = _pauses(records)
    out = Conversation(turns=[
        Turn(t.number, t.user, AgentResponse(t.agent, [ToolCall(c.name, dict(c.arguments), c.result, dict(c.metadata),
                                                                c.stubbed) for c in t.tool_calls],
                                             dict(t.metadata), list(files(t.agent_files)), asked.get(t.number, [])),
             topic=t.topic, off_graph_from="(recorded)" if t.off_graph else None, user_note=t.user_note,
             attachments=files(t.user_files), decisions=tuple(decided.get(t.number, ())))
        for t in records])
    out.history = [Message(h["role"], h["content"]) for h in result.history  # type: ignore[arg-type]
                   if h.get("role") in ("user", "agent")]
    return out


def usage_records(conversation: Conversation) -> dict[str, UsageRecord]:
    """Tokens per role: judge and simulator as charged, the agent summed from each turn's
    ``metadata["usage"]`` (with its ``metadata["model"]`` when every turn names the same one)."""
    records = {role: UsageRecord.model_validate(usage.to_dict()) for role, usage in conversation.usage.items()}
    calls = inp = out = 0
    models: set[str | None] = set()
    for turn in conversation.turns:
        for model, n, i, o in agent_turn_lines(turn.response.metadata):
            calls, inp, out = calls + n, inp + i, out + o
            models.add(model)
    if models:
        mine = records.get("agent") or UsageRecord()
        records["agent"] = UsageRecord(calls=mine.calls + calls, input_tokens=mine.input_tokens + inp,
                                       output_tokens=mine.output_tokens + out,
                                       model=next(iter(models)) if len(models) == 1 else None)
    return records
