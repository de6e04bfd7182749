"""The state of one running scenario, shared by its steps; it imports no test runner.

Steps stay thin: they parse their arguments and call one method here. This object owns the
configuration in force (criteria, topics, simulator settings, accumulated level by level as the
Background and scenario steps run), the agent, the conversation and the judge, and it records
every check: ``should`` as a soft evaluation, ``must`` as a hard expectation that fails at once.

Soft LLM criteria are batched, one judge call per turn in the background
(:mod:`fabtest.engine.batching`, which keeps every check in step order); verdicts still out when
the scenario ends follow it (:mod:`fabtest.engine.verdicts`). A scenario that cannot run without an LLM that is
not configured raises :class:`fabtest.errors.NeedsLLM`; the pytest plugin reports it as a skip.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabtest import tracing
from fabtest.agents import aio
from fabtest.agents.base import STAND_IN_KEY, Agent, AgentError, agent_metadata
from fabtest.agents.boundary import guarded
from fabtest.agents.registry import make_agent
from fabtest.agents.stubs import ToolStub, ToolStubs
from fabtest.config.criteria import Criterion
from fabtest.config.scenario_sets import ScenarioRecord
from fabtest.config.settings import Settings
from fabtest.conversation import Attachment, Check, Conversation, DecisionKind, Mode, Status, TokenUsage, Turn
from fabtest.engine import budget, checks, judge_checks, pauses, records, stubbing, topic_checks, transcript, voice
from fabtest.engine.attachments import FileLoader, FileRef
from fabtest.engine.batching import CheckSlots, charging_failures
from fabtest.engine.fidelity import Fidelity
from fabtest.engine.judge import CriterionVerdict, Judge, Scope
from fabtest.engine.patterns import scenario_deadline
from fabtest.engine.simulator import SimulatorConfig
from fabtest.engine.topics import TopicGraph, TopicTracker
from fabtest.engine.turns import ConversationRunner, cancel_agent
from fabtest.engine.verdicts import LateVerdicts, Pending, Review, placeholder
from fabtest.errors import ExpectationFailed, NeedsLLM, TopicGraphError, UsageError
from fabtest.experiment.cost import price_table
from fabtest.llm.base import LLM, LLMNotConfigured

__all__ = ["LLMRoles", "ScenarioState"]

@dataclass
class LLMRoles:
    """The session's judge and simulator LLMs (None with the reason when not configured)."""

    judge: LLM | None = None
    simulator: LLM | None = None
    judge_reason: str = ""
    simulator_reason: str = ""
    executor: ThreadPoolExecutor | None = None
    #: the run's scripted fake for built-in agents' models (agents.builtin_models.StandInModel), if any
    agent_model: Any = None


@dataclass
class ScenarioState:
    """Everything one scenario run knows. Created per test by the ``fabtest_scenario`` fixture."""

    settings: Settings
    rootdir: Path
    workdir: Path
    context: dict[str, Any]
    llms: LLMRoles
    default_agent: Any = None  # from the fabtest_agent fixture or [tool.fabtest] agent
    where: str = ""  # "features/x.feature:12" of the step running now
    criteria: dict[str, Criterion] = field(default_factory=dict)
    #: what the agent is for: ``[tool.fabtest] agent_description``, replaced by ``Given the agent's
    #: purpose is "..."``; shown to the judge, the simulated user and the attacker (None: not said)
    purpose: str | None = None
    topics: TopicGraph | None = None
    #: the tool stubs in force, level over level (:mod:`fabtest.agents.stubs`)
    tool_stubs: ToolStubs = field(default_factory=ToolStubs)
    #: the decision forced on every approval of a tool (``--fabtest-fault TOOL=approve|reject``)
    forced_decisions: dict[str, DecisionKind] = field(default_factory=dict)
    #: values taken from the conversation (``When the response mentions ... as "ref"``), for ``{ref}``
    values: dict[str, str] = field(default_factory=dict)
    simulator_config: SimulatorConfig = field(default_factory=SimulatorConfig)
    record: ScenarioRecord | None = None  # scenario-set record, if any
    conversation: Conversation = field(default_factory=Conversation)
    agent_target: Any = None
    started: float = field(default_factory=time.monotonic)
    redact: Callable[[str], str] = str  # applied to every logged turn (a playbook's ``env`` secrets)
    #: the latest message of the simulated user, also when the agent then failed to answer it
    simulated_text: str | None = None
    #: the simulated user's note on the message being sent (an adversarial tactic), for its turn
    _user_note: str | None = None
    #: each simulated conversation tried: attempt, valid, problems, turns, stop (engine/simulation.py)
    simulations: list[dict[str, Any]] = field(default_factory=list)
    #: the scenario's stable id and iteration, which the simulated user's seed is drawn from (the same
    #: user on both arms of an A/B); None: no seed is sent
    simulation_key: tuple[str, int] | None = None
    _agent: Agent | None = None
    _metadata: dict[str, Any] = field(default_factory=dict)
    _closed: bool = False
    _runner: ConversationRunner | None = None
    _tracker: TopicTracker | None = None
    _exit: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _usage_lock: threading.Lock = field(default_factory=threading.Lock)
    #: every check in step order, and the judge calls that decide the LLM-backed ones (engine/batching.py)
    _checks: CheckSlots = field(init=False)
    #: who takes the soft verdicts still with the judge when the scenario finishes (the front end
    #: carries them to the experiment); None: :meth:`finish` waits for them
    on_late: Callable[[LateVerdicts], None] | None = None
    #: after :meth:`finish`: the soft verdicts handed to ``on_late`` (None when every one was in)
    late: LateVerdicts | None = None
    #: the simulator-fidelity review going on in the background (:meth:`review_later`), if any
    review: Review | None = None
    #: reads each file a step sends once per run (the front end shares one between scenarios)
    files: FileLoader = field(default_factory=FileLoader)
    #: the files the simulated user has (``Given the user has the files``), by name
    user_files: dict[str, Attachment] = field(default_factory=dict)

    # -- setup -----------------------------------------------------------------------------------
    def use_agent(self, name: str) -> None:
        if self._agent is not None:
            raise UsageError(f'{self.where}: Given the agent "{name}" comes after the conversation started; '
                             "put it before the first When step")
        if name not in self.settings.agents:
            known = ", ".join(sorted(self.settings.agents)) or "none"
            raise UsageError(f'{self.where}: unknown agent "{name}"; [tool.fabtest.agents] defines: {known}')
        self.agent_target = self.settings.agents[name]
        self.context["agent_name"] = name

    def __post_init__(self) -> None:
        if self.purpose is None:
            self.purpose = self.settings.agent_description
        self._checks = CheckSlots(judge=lambda: self.judge, executor=lambda: self.llms.executor, charge=self._charge,
                                  fail=self._fail, where=self.where,
                                  max_file_bytes=self.settings.judge_max_file_bytes)

    def define_purpose(self, text: str) -> None:
        """``Given the agent's purpose is "..."``: the judge, simulated user and attacker are told it."""
        if not text.strip():
            raise UsageError(f"{self.where}: the agent's purpose is empty: say what the agent is for")
        self.purpose = " ".join(text.split())

    def define_criterion(self, criterion: Criterion) -> None:
        self.criteria[criterion.name] = criterion

    def define_stub(self, stub: ToolStub) -> None:
        """One level's stub of a tool; checked against the agent's tools once the agent exists."""
        self.tool_stubs.define(stub)
        if self._agent is not None:
            stubbing.verify(self.tool_stubs, self._agent)

    def define_topics(self, rows: list[dict[str, str]]) -> None:
        try:
            fragment = TopicGraph.from_table(rows, where=self.where, validate=self.topics is None)
            self.topics = fragment if self.topics is None else TopicGraph.merged(self.topics, fragment)
        except TopicGraphError as exc:
            raise UsageError(str(exc)) from None

    def configure_simulator(self, **changes: Any) -> None:
        """One level's simulator setting; ``merge`` gives rules-accumulate / limits-replace."""
        self.simulator_config = self.simulator_config.merge(SimulatorConfig(**changes))

    # -- the conversation ------------------------------------------------------------------------
    @property
    def agent(self) -> Agent:
        if self._agent is None:
            target = self.agent_target if self.agent_target is not None else self.default_agent
            if target is None:
                raise UsageError(f"{self.where}: no agent configured: set [tool.fabtest] agent = \"module:attr\", "
                                 "define a fabtest_agent fixture, or use Given the agent \"name\"")
            try:
                context = ({**self.context, STAND_IN_KEY: self.llms.agent_model} if self.llms.agent_model
                           else self.context)
                agent = guarded("the agent factory raised", make_agent, target, context, where=self.where)
            except LLMNotConfigured as exc:  # a built-in agent without a key: skipped like the judge's scenarios
                raise NeedsLLM(f"the agent needs an LLM: {exc}", where=self.where) from None
            around = getattr(agent, "around", None)
            if callable(around):
                guarded("the agent's around() failed on entry:", lambda: self._enter_around(around()))
            self._agent = agent
            stubbing.verify(self.tool_stubs, agent)
        return self._agent

    def _enter_around(self, manager: Any) -> None:
        """Enter ``around()``: a context manager here, an async one on the agent loop (left by the
        task that entered it, see :func:`fabtest.agents.aio.enter_async`)."""
        if hasattr(manager, "__aenter__") and not hasattr(manager, "__enter__"):
            self._exit.callback(aio.enter_async(manager))
        else:
            self._exit.enter_context(manager)

    @property
    def runner(self) -> ConversationRunner:
        if self._runner is None:
            timeout = self.settings.scenario_timeout
            deadline = self.started + timeout if timeout else None
            self._runner = ConversationRunner(self.agent, self.conversation, agent_timeout=self.settings.agent_timeout,
                                              deadline=deadline, redact=self.redact, tool_stubs=self.tool_stubs,
                                              traces=(self.settings.traces.port, self.settings.traces.wait),
                                              voice=voice.turns(self.settings) if self.voice else None,
                                              decide=self.forced_decisions)
            scenario_deadline(deadline)  # user patterns (match, triggers) stop at it too
            self._runner.on_turn.append(self._after_turn)
        return self._runner

    def user_says(self, text: str, attachments: tuple[Attachment, ...] = (), *,
                  interrupt_after_ms: float | None = None) -> Turn:
        """One user turn; in a voice scenario ``interrupt_after_ms`` cuts the agent's reply short
        (the next step is ``When the user interrupts after N ms``)."""
        self.flush_pending()
        if interrupt_after_ms is not None and not self.voice:
            raise UsageError(f"{self.where}: the user interrupts only in a voice scenario: tag it @voice "
                             "or set voice = true in [tool.fabtest]")
        silent = voice.silent_seconds(text) if self.voice else None  # a replayed silent turn
        return self.runner.say(text, attachments, interrupt_after_ms=interrupt_after_ms, silent_s=silent)

    @property
    def voice(self) -> bool:
        """A voice scenario: ``voice = true`` in [tool.fabtest], or a ``@voice`` tag (docs/how-to/voice.md)."""
        return self.settings.voice or "voice" in self.context.get("tags", ())

    def stays_silent(self, seconds: float) -> Turn:
        """``When the user stays silent for N seconds``: that much silence is the user's turn."""
        if not self.voice:
            raise UsageError(f"{self.where}: the user stays silent only in a voice scenario: tag it @voice "
                             "or set voice = true in [tool.fabtest]")
        self.flush_pending()
        return self.runner.say(voice.silence_text(seconds), silent_s=seconds)

    def check_first_audio(self, limit_ms: float, mode: Mode) -> None:
        """``the agent must start speaking within N ms``: the latest turn's time to first audio."""
        turn = self.last_turn
        status, details, data = voice.first_audio_outcome(turn, limit_ms)
        self.record_check("first_audio", mode, f"first_audio<{limit_ms:g}ms", status, details, turn=turn.number,
                          data=data)

    def user_decides(self, decision: DecisionKind, *, reason: str | None = None, answer: str | None = None,
                     arguments: dict[str, Any] | None = None, text: str | None = None) -> Turn:
        """``When the user approves / rejects / answers``: the decision on every pending pause of its
        kind goes with the next user message (its words: ``text``, else the reason or answer)."""
        pauses.require_pauses(self.agent, f"When the user {pauses.VERBS[decision]}", where=self.where)
        decisions = pauses.decisions_for(self.conversation, decision, reason=reason, answer=answer,
                                         arguments=arguments, where=self.where)
        self.flush_pending()
        words = text if text is not None else answer if answer is not None else reason or ""
        return self.runner.say(words, decisions=tuple(decisions))

    def asked_approval(self, tool: str | None, mode: Mode, args: Sequence[checks.ArgExpectation] = (), *,
                       negated: bool = False, rows: list[list[str]] | None = None) -> None:
        """``the agent must (not) ask for approval [of "tool" [with:]]``: the latest turn's pauses."""
        turn = self.last_turn
        pauses.require_pauses(self.agent, "ask for approval", where=self.where)
        passed, details = pauses.asked_approval(self.conversation, tool, args)
        kind = "not_ask_approval" if negated else "ask_approval"
        data: dict[str, Any] = {"tool": tool} if tool else {}
        if rows:
            data["with"] = rows
        self.deterministic(kind, mode, f"{kind}:{tool}" if tool else kind, (passed != negated, details),
                           turn=turn.number, data=data)

    def _transcript_for_judge(self) -> transcript.JudgedText:
        return transcript.for_judge(self.conversation, max_file_bytes=self.settings.judge_max_file_bytes)

    def user_sends(self, text: str, refs: Sequence[FileRef]) -> Turn:
        """``When the user sends "x.png" with "..."``: the files (relative to the feature's folder,
        read once per run by :attr:`files`) go with the message."""
        return self.user_says(text, self.files.load_all(self.base_dir, refs, where=self.where))

    def give_files(self, refs: Sequence[FileRef]) -> None:
        """``Given the user has the files ...``: the simulated user may send them, by name, when it chooses."""
        loaded = self.files.load_all(self.base_dir, refs, where=self.where)
        for file in loaded:
            self.user_files[file.name] = file
        self.configure_simulator(files=tuple(f.name for f in loaded))

    @property
    def base_dir(self) -> Path:
        """The folder file paths are relative to: the feature file's (a playbook's), else the project's."""
        source = str(self.context.get("feature_file") or self.context.get("playbook_file") or "")
        source = source or (self.where.rsplit(":", 1)[0] if ":" in self.where else "")
        path = (self.rootdir / source) if source else self.rootdir
        return path.parent if path.suffix else path

    def simulate(self, *, first: str | None = None, until: Callable[[Conversation], str | None] | None = None) -> str:
        """Let the simulated user talk to the agent until it stops; returns why it stopped. Each
        conversation is checked for the simulator's fidelity and run again when invalid
        (:mod:`fabtest.engine.simulation`).

        ``first`` is sent verbatim as the simulated user's first message; ``until`` is one more
        stop condition checked after every turn (a playbook's success criteria).
        """
        from fabtest.engine.simulation import simulate

        return simulate(self, first=first, until=until)

    @property
    def restartable(self) -> bool:
        """The conversation can start again from nothing: no turn and no check yet (a simulation
        that began the scenario may be re-run when its simulated user left its role)."""
        return not self.conversation.turns and self._checks.empty

    def restart(self) -> None:
        """Forget the conversation so far and start again with a fresh agent (its cost stays spent)."""
        self.conversation.turns.clear()
        self._tracker, self._user_note, self.simulated_text = None, None, None
        agent, self._agent, self._runner = self._agent, None, None
        if agent is not None:
            with contextlib.suppress(Exception):  # the invalid try's agent: its exit failing is not this run's story
                guarded("the agent's around() failed on exit:", self._exit.close)
            cancel_agent(agent)
        self._exit = contextlib.ExitStack()

    def review_later(self, review: Callable[[], Fidelity], entry: dict[str, Any], *, attempts_left: int) -> bool:
        """Send the judge's fidelity review of the simulated conversation just ended to the judge's
        pool and go on without it, as soft verdicts do; False when this state cannot (nobody takes
        late verdicts, no pool): the caller then waits for it. A late review that finds the
        simulated user left its role voids the run, which the front end runs again
        (``entry`` is the try's record, completed by the review; docs/explanation/soft-verdicts.md)."""
        executor = self.llms.executor
        if self.on_late is None or executor is None or self.review is not None:
            return False
        self.review = Review(executor.submit(tracing.carry(review)), entry, attempts_left)
        return True

    def voided(self) -> list[str]:
        """Waits for the background fidelity review, if any: what it found wrong ([]: valid or none)."""
        return self.review.problems() if self.review is not None else []

    def user_note(self, note: str | None) -> None:
        """The simulated user's note on the message it is sending (an adversarial tactic), for its turn."""
        self._user_note = note

    def _after_turn(self, turn: Turn) -> None:
        turn.user_note, self._user_note = self._user_note, None
        if self.topics is None:
            return
        if self._tracker is None:
            self._tracker = TopicTracker(self.topics)
        result = self._tracker.classify(turn, self.judge)
        turn.topic = result.topic
        turn.off_graph_from = result.left
        if result.usage.calls:
            self._charge("judge", result.usage)
        if problem := self._tracker.exceeded_max_turns():
            self.record_check("topic_max_turns", "must", f"max turns:{turn.topic}", "failed", problem, turn=turn.number)

    def charge(self, role: str, usage: TokenUsage) -> None:
        """Add an LLM call's tokens to the scenario's usage (a simulated tool's calls, on the agent's thread)."""
        self._charge(role, usage)

    def _charge(self, role: str, usage: TokenUsage) -> None:
        """Background judge calls finish on worker threads: add their cost under a lock (to the late
        verdicts once the scenario finished: its result has already left with the usage so far)."""
        with self._usage_lock:
            if self.late is not None:
                self.late.charge(role, usage)
            else:
                self.conversation.add_usage(role, usage)

    @property
    def judge(self) -> Judge | None:
        judge = self.settings.judge
        return Judge(self.llms.judge, samples=judge.samples, per_criterion=judge.samples_per_criterion,
                     temperature=judge.temperature, purpose=self.purpose) if self.llms.judge is not None else None

    def require_llm(self, role: str, what: str) -> None:
        """Raise NeedsLLM (a skip, naming the variable to set) when the scenario needs a missing LLM."""
        llm = self.llms.judge if role == "judge" else self.llms.simulator
        if llm is None:
            reason = self.llms.judge_reason if role == "judge" else self.llms.simulator_reason
            raise NeedsLLM(f"{what} needs the {role} LLM: {reason}", where=self.where)

    @property
    def last_turn(self) -> Turn:
        turn = self.conversation.last_turn
        if turn is None:
            raise UsageError(f"{self.where}: there is no response yet: add a When step before this assertion")
        return turn

    # -- recording checks ------------------------------------------------------------------------
    def record_check(self, kind: str, mode: Mode, label: str, status: Status, details: str,
                     *, turn: int | None = None, data: dict[str, Any] | None = None) -> Check:
        """Record an outcome; a failed ``must`` raises ExpectationFailed naming the turn and reply."""
        check = Check(type=kind, mode=mode, criterion=label, status=status, turn=turn, details=details, data=data or {})
        self._checks.add(check)
        if mode == "must" and status in ("failed", "inconclusive"):
            self._fail(check)
        return check

    def _fail(self, check: Check) -> None:
        turn = self.conversation.turns[check.turn - 1] if check.turn else self.conversation.last_turn
        raise checks.expectation_failed(check, turn)

    def add_check(self, check: Check) -> None:
        """Record a finished check whose failure the caller words itself (a playbook lists every unmet
        success criterion in one message)."""
        self._checks.add(check)

    def deterministic(self, kind: str, mode: Mode, label: str, result: checks.Result, *, turn: int | None,
                      data: dict[str, Any] | None = None) -> None:
        passed, details = result
        self.record_check(kind, mode, label, "passed" if passed else "failed", details, turn=turn, data=data)

    def untraced(self, turn: int | None) -> str | None:
        """Why the tool calls of ``turn`` (every turn: None) are not known: an agent that exports
        traces whose spans did not arrive (:mod:`fabtest.agents.trace_calls`); None when they are."""
        return checks.untraced([self.conversation.turns[turn - 1]] if turn else self.conversation.turns)

    def tool_check(self, kind: str, mode: Mode, label: str, result: checks.Result, *, turn: int | None,
                   data: dict[str, Any] | None = None) -> None:
        """A check of the tool calls of ``turn`` (every turn: None): inconclusive, never passed, when
        the agent's traces for a turn in scope did not arrive (a call may have happened unseen)."""
        reason = self.untraced(turn)
        if reason:
            self.record_check(kind, mode, label, "inconclusive", f"tool calls unknown: {reason}", turn=turn, data=data)
            return
        self.deterministic(kind, mode, label, result, turn=turn, data=data)

    def check_cost(self, limit_usd: float, mode: Mode) -> None:
        """``the conversation must cost less than $X``: agent, simulator and judge tokens so far, priced."""
        with self._usage_lock:  # background judge calls add to it on worker threads
            usage = {role: TokenUsage(u.calls, u.input_tokens, u.output_tokens)
                     for role, u in self.conversation.usage.items()}
        models = {"judge": self.llms.judge.model if self.llms.judge else None,
                  "simulator": self.llms.simulator.model if self.llms.simulator else None}
        spent, unpriced = budget.conversation_cost(self.conversation.turns, usage, models,
                                                   price_table(self.settings.prices))
        status, details, data = budget.cost_outcome(limit_usd, spent, unpriced)
        self.record_check("cost", mode, f"cost<${limit_usd:g}", status, details, data=data)

    def check_latency(self, limit_s: float, mode: Mode, *, every: bool) -> None:
        """``every response`` (each turn so far) or ``the response`` (the latest) took less than ``limit_s``."""
        turns = list(self.conversation.turns) if every else [self.last_turn]
        if not turns:
            raise UsageError(f"{self.where}: there is no response yet: add a When step before this assertion")
        status, details, data = budget.latency_outcome(turns, limit_s)
        self.record_check("latency", mode, f"latency<{limit_s:g}s", status, details,
                          turn=None if every else turns[0].number, data=data)

    def includes_call(self, tool: str, mode: Mode, *, negated: bool = False) -> None:
        """``the conversation must (not) include a call to "tool"``: over every turn so far."""
        self._last_turn_required()
        passed, details = checks.check_called(self.conversation.tool_calls, tool)
        kind = "not_include_call" if negated else "include_call"
        self.tool_check(kind, mode, f"{kind}:{tool}", (passed != negated, details), turn=None, data={"tool": tool})

    # -- LLM-backed checks -----------------------------------------------------------------------
    def satisfy(self, criterion: Criterion, mode: Mode, scope: str) -> None:
        """``the response`` / ``every response`` / ``the conversation`` satisfies a criterion."""
        if self.llms.judge is None:
            self._skip_llm_check("satisfy", mode, criterion.name, turn=self.last_turn.number)
            return
        if scope == "conversation":
            self._last_turn_required()
            self._checks.queue_conversation(criterion, mode)
            if mode == "must":
                self._checks.flush_conversation(self.conversation, block=True)
            return
        turns = self.conversation.turns if scope == "every" else [self.last_turn]
        if not turns:
            raise UsageError(f"{self.where}: there is no response yet: add a When step before this assertion")
        for turn in turns:
            self._checks.queue_turn(turn.number, criterion, mode)
        if mode == "must":
            for turn in turns:
                self._checks.flush_turn(self.conversation, turn.number, self.settings.judge.context_turns, block=True)

    def judge_criteria(self, criteria: Sequence[Criterion], subject: str, scope: Scope) -> list[CriterionVerdict]:
        """One blocking judge call over ``subject``, its cost charged to the conversation: for front
        ends that record their own checks (playbook steps and ``llm_checks``)."""
        judge = self.judge
        if judge is None:
            self.require_llm("judge", "judging")
        assert judge is not None
        result = judge.evaluate_criteria(list(criteria), subject=subject, scope=scope)
        self._charge("judge", result.usage)
        return result.value

    def grounded_in(self, source: str, mode: Mode) -> None:
        turn = self.last_turn
        if self.llms.judge is None:
            self._skip_llm_check("grounded_in", mode, f"grounded_in:{source}", turn=turn.number)
            return
        if reason := self.untraced(None):
            self.record_check("grounded_in", mode, f"grounded_in:{source}", "inconclusive",
                              f"tool calls unknown: {reason}", turn=turn.number, data={"source": source})
            return
        calls = [c for t in self.conversation.turns for c in t.tool_calls if c.name == source]
        self._checks.run(self._judged(lambda judge: judge_checks.grounding_check(judge, turn, source, calls, mode)),
                            mode, placeholder("grounded_in", f"grounded_in:{source}", turn.number))

    def intent(self, intent: str, mode: Mode) -> None:
        turn = self.last_turn
        if self.llms.judge is None:
            self._skip_llm_check("intent", mode, f"intent:{intent}", turn=turn.number)
            return
        exchange = transcript.exchange_for_judge(self.conversation, turn.number,
                                                 context=self.settings.judge.context_turns,
                                                 max_file_bytes=self.settings.judge_max_file_bytes)
        self._checks.run(self._judged(lambda judge: judge_checks.intent_check(judge, turn, exchange, intent, mode)),
                            mode, placeholder("intent", f"intent:{intent}", turn.number))

    def goal_achieved(self, mode: Mode) -> None:
        goal = self.simulator_config.goal
        if not goal:
            raise UsageError(f"{self.where}: there is no goal to check: "
                             "add Given a simulated user with the goal \"...\"")
        self._last_turn_required()
        if self.llms.judge is None:
            self._skip_llm_check("goal", mode, "goal achieved", turn=None)
            return
        text = self._transcript_for_judge()
        self._checks.run(self._judged(lambda judge: judge_checks.goal_check(judge, goal, text, mode)), mode,
                            placeholder("goal", "goal achieved", None))

    def _judged(self, ask: Callable[[Judge], judge_checks.Judged]) -> Callable[[], Check]:
        """The call that asks the judge (now or on a worker thread) and charges what it cost."""
        def run() -> Check:
            judge = self.judge
            assert judge is not None  # the callers skip the check without a judge
            with charging_failures(self._charge):
                check, usage = ask(judge)
            self._charge("judge", usage)
            return check

        return run

    # -- topics ------------------------------------------------------------------------------------
    def check_reached(self, topic: str, mode: Mode) -> None:
        topic_checks.check_reached(self, topic, mode)

    def check_follows(self, sequence: Sequence[str], mode: Mode) -> None:
        topic_checks.check_follows(self, sequence, mode)

    # -- checks without a judge -----------------------------------------------------------------
    def _skip_llm_check(self, kind: str, mode: Mode, label: str, *, turn: int | None) -> None:
        if mode == "must":
            self.require_llm("judge", f'the must expectation "{label}"')
        self.record_check(kind, mode, label, "skipped", f"no judge LLM: {self.llms.judge_reason}", turn=turn)

    def _last_turn_required(self) -> None:
        _ = self.last_turn

    def flush_pending(self) -> None:
        """Send the judge what is due before the next turn (a simulated user's message is one)."""
        self._checks.flush(self.conversation, self.settings.judge.context_turns)

    def use_record(self) -> None:
        """``Given a simulated user from the scenario``: goal, persona and facts from the set's record."""
        records.use_record(self)

    def _verify_record(self) -> None:
        """A record's ``verification`` becomes hard expectations checked when the scenario ends."""
        records.verify_record(self)

    def finish(self, *, verify: bool = True) -> None:
        """Flush pending criteria and fill the conversation's lists; soft verdicts are not waited for.

        With ``verify`` (the scenario's steps all passed) a scenario-set record's verification is
        checked as hard expectations. A soft check still with the judge is recorded as a
        placeholder and handed to ``on_late`` in :attr:`late` (:mod:`fabtest.engine.verdicts`;
        without ``on_late`` it is waited for); one whose judge failed is ``skipped`` with the reason.
        Hard checks never reach here unjudged: they blocked their step, where an LLM outage is the
        scenario's ``error``.
        """
        self.flush_pending()
        verify_error: ExpectationFailed | None = None
        if verify and (left := pauses.undecided(self.conversation)):
            check = Check(type="pauses_decided", mode="must", criterion="pauses_decided", status="failed",
                          details=pauses.undecided_message(left), turn=left[-1][0],
                          data={"pauses": [p.id for _, p in left]})
            self._checks.add(check)
            verify_error = ExpectationFailed(f"Turn {left[-1][0]}: {check.details}")
        if verify and verify_error is None and self.record is not None:
            try:
                self._verify_record()
            except ExpectationFailed as exc:
                verify_error = exc
        self.conversation.evaluations.clear()
        self.conversation.expectations.clear()
        waiting: list[tuple[int, Pending]] = []
        for slot in self._checks.slots:
            if isinstance(slot, Pending) and self.on_late is not None and not slot.done():
                waiting.append((len(self.conversation.evaluations), slot))
                slot = slot.placeholder
            elif isinstance(slot, Pending):
                slot = slot.check()
            if isinstance(slot, Check):
                self.conversation.record(slot)
        if (waiting or self.review is not None) and self.on_late is not None:
            with self._usage_lock:  # from now on the judge's cost goes with the late verdicts
                self.late = LateVerdicts(waiting, review=self.review, tries=self.simulations)
            self.on_late(self.late)
        if verify_error is not None:
            raise verify_error

    def close(self) -> None:
        """Read the agent's ``metadata()``, leave its ``around()`` and stop what it started; a failure
        in any of them is the scenario's ``error`` (the first one is raised, the rest still run)."""
        if self._closed:  # the late report step and the fixture's teardown both close
            return
        self._closed = True
        scenario_deadline(None)
        first: AgentError | None = None
        if self._agent is not None:
            try:
                self._metadata = agent_metadata(self._agent, timeout=self.settings.agent_timeout)
            except AgentError as exc:
                first = exc
        try:
            guarded("the agent's around() failed on exit:", self._exit.close)
        except AgentError as exc:
            first = first or exc
        if self._agent is not None:
            cancel_agent(self._agent)  # a CLI agent's process group, if a turn left one behind
        if first is not None:
            raise first

    def agent_metadata(self) -> dict[str, Any]:
        """What the agent's ``metadata()`` said when the scenario closed ({} if it failed)."""
        return self._metadata
