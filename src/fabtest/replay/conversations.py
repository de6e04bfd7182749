"""Replay recorded conversations against the current agent, branching at the first real difference.

A prompt change is cheap to evaluate only if the rest of the conversation holds still. Replay feeds
the agent the *recorded* user turns, one by one, through the engine's :class:`ScenarioState` (the
agent built as the project configures it today), so no simulator is asked anything while the agent
answers as before. At the first turn whose response differs materially (see :class:`MatchRule`),
the conversation has branched: a simulated scenario hands over to the simulator with its recorded
goal, persona, facts and rules for the remaining turns; a scripted one goes on with its recorded
(scripted) user lines; with ``keep_going=False`` (``--no-continue``) it stops there. The recorded
checks are then brought up to date on the new conversation (:mod:`.replay_checks`), so the replayed
experiment has verdicts that ``fabtest-compare`` can set against the original.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any, Literal

from fabtest.agents.base import AgentError
from fabtest.agents.stubs import ToolStub
from fabtest.config.settings import Settings
from fabtest.conversation import Attachment, Message, Turn
from fabtest.engine import LLMRoles, ScenarioState, stubbing
from fabtest.engine.judge import Judge
from fabtest.engine.simulator import Simulator, SimulatorConfig
from fabtest.errors import FabtestError
from fabtest.experiment import file_store
from fabtest.experiment.model import (
    ExperimentInfo,
    PauseRecord,
    ScenarioResult,
    TurnRecord,
    turn_records,
    usage_records,
)
from fabtest.llm.base import LLM
from fabtest.llm.cache import salted
from fabtest.replay.feature_setup import FeatureSetup, feature_setup
from fabtest.replay.recorded_checks import calls_of, outcome_of, recheck
from fabtest.replay.topic_replay import TopicFollower, topic_graph

__all__ = ["MatchRule", "ReplayEnv", "ReplayOutcome", "TurnMatch", "recorded_decision", "replay_experiment",
           "replay_scenario", "replayed_info"]

Part = Literal["agent", "tools"]
Continuation = Literal["simulator", "script", "stopped"]

#: Simulated turns when the record names no limit (the runner's default).
DEFAULT_MAX_TURNS = 10


def _norm(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class TurnMatch:
    """How a replayed turn compares with the recorded one."""

    same: bool
    part: Part | None
    similarity: float  # of the response texts, word by word; 1.0 when equal after normalising


@dataclass(frozen=True)
class MatchRule:
    """When a response "differs materially" from the recorded one (docs/how-to/flaky.md, "Replay").

    Tool calls always count: the same calls by name and arguments (order and results aside).
    Text: whitespace is normalised; with ``min_similarity`` 1.0 (the default) any other change is a
    difference; below 1.0 the texts count as the same when difflib's ratio over their words
    (2 x matching words / all words) is at least ``min_similarity``, for agents that word the same
    answer a little differently each time.
    """

    min_similarity: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.min_similarity <= 1:
            raise ValueError(f"similarity must be above 0 and at most 1, got {self.min_similarity}")

    def compare(self, recorded: TurnRecord, turn: Turn) -> TurnMatch:
        old, new = _norm(recorded.agent), _norm(turn.response.text)
        similarity = 1.0 if old == new else SequenceMatcher(None, old.split(), new.split(), autojunk=False).ratio()
        if old != new and similarity < self.min_similarity:
            return TurnMatch(False, "agent", similarity)
        if calls_of(recorded) != calls_of(turn):
            return TurnMatch(False, "tools", similarity)
        return TurnMatch(True, None, similarity)


@dataclass
class ReplayOutcome:
    """What happened to one recorded run (scenario, iteration) when replayed."""

    scenario_id: str
    name: str
    iteration: int
    passed_before: bool
    passed_now: bool | None = None
    turns_recorded: int = 0
    turns_replayed: int = 0
    branched_at: int | None = None
    part: Part | None = None
    similarity: float | None = None
    continued: Continuation | None = None
    note: str = ""
    replayed: bool = True
    #: checks the replay could not re-check (turns that did not happen, --no-continue, no judge ...),
    #: by mode: a "passed" with an unchecked must is not a pass
    not_rechecked: dict[str, int] = field(default_factory=dict)
    #: why the first unchecked must was not re-checked
    unchecked_reason: str = ""
    #: the replay itself failed (the agent raised, timed out, could not be built): never "same as recorded"
    error: str = ""

    @property
    def verified(self) -> bool:
        """False when a hard (must) check was left unchecked: the outcome then says less than it seems."""
        return not self.not_rechecked.get("must")

    @property
    def summary(self) -> str:
        """``same as recorded`` or where and how it branched, and what took over."""
        if not self.replayed:
            return f"not replayed: {self.note}"
        if self.error:
            return f"the replay failed at turn {self.turns_replayed + 1}: {self.error}"
        if self.branched_at is None:
            text = "same as recorded" if self.turns_replayed == self.turns_recorded else "did not finish"
        else:
            what = "the agent's response differs" if self.part == "agent" else "the agent's tool calls differ"
            similar = (f", similarity {self.similarity:.2f}" if self.part == "agent" and self.similarity is not None
                       else "")
            more = self.turns_replayed - self.branched_at
            after = {"simulator": f"; the simulator took over for {more} more turn(s)",
                     "script": f"; the recorded user lines went on for {more} more turn(s)",
                     "stopped": "; stopped there"}.get(self.continued or "", "")
            text = f"branched at turn {self.branched_at} ({what}{similar}){after}"
        return text + (f"; {self.note}" if self.note else "")

    def to_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario_id, "name": self.name, "iteration": self.iteration,
                "replayed": self.replayed, "branched_at": self.branched_at, "part": self.part,
                "similarity": None if self.similarity is None else round(self.similarity, 4),
                "continued": self.continued, "turns_recorded": self.turns_recorded,
                "turns_replayed": self.turns_replayed, "passed_before": self.passed_before,
                "passed_now": self.passed_now, "verified": self.verified, "not_rechecked": dict(self.not_rechecked),
                "error": self.error or None, "summary": self.summary}


@dataclass
class ReplayEnv:
    """What every replayed scenario shares: the project's settings, the LLMs and the options."""

    settings: Settings
    rootdir: Path
    judge_llm: LLM | None = None
    simulator_llm: LLM | None = None
    judge_reason: str = "not configured"
    simulator_reason: str = "not configured"
    #: ``--agent``: a name of ``[tool.fabtest.agents]`` or ``module:attr`` instead of the scenario's own
    agent: str | None = None
    rule: MatchRule = field(default_factory=MatchRule)
    keep_going: bool = True
    #: where the recorded files' bytes are kept (``results/files``'s parent); default: the project's results_dir
    files_dir: Path | None = None

    def recorded_files(self, records: Any, *, where: str) -> tuple[Attachment, ...]:
        """A recorded turn's user files, read back from where the run kept them."""
        if not records:
            return ()
        base = self.files_dir or Path(self.settings.results_dir)
        return file_store.recorded(base if base.is_absolute() else self.rootdir / base, records, where=where)

    def roles(self, iteration: int) -> LLMRoles:
        """Salted per iteration under ``replay/``: a rerun replays the cache, the original run's
        answers are never reused for a new question."""
        salt = f"replay/iteration-{iteration}"
        return LLMRoles(judge=salted(self.judge_llm, salt) if self.judge_llm else None,
                        simulator=salted(self.simulator_llm, salt) if self.simulator_llm else None,
                        judge_reason=self.judge_reason, simulator_reason=self.simulator_reason)


@dataclass
class _Run:
    """One replay in progress: the engine's state, what happened, and the topics."""

    state: ScenarioState
    result: ScenarioResult
    env: ReplayEnv
    outcome: ReplayOutcome
    topics: TopicFollower


def _choose_agent(state: ScenarioState, env: ReplayEnv, setup: FeatureSetup) -> None:
    if env.agent is not None:
        if env.agent in env.settings.agents:
            state.use_agent(env.agent)
        else:
            state.agent_target = env.agent
    elif setup.agent is not None:
        state.use_agent(setup.agent)


def _drive(run: _Run) -> None:
    """Recorded user turns until the first material difference, then whatever takes over."""
    state, outcome, recorded = run.state, run.outcome, run.result.transcript
    for rec in recorded:
        turn = _say(run, rec)
        match = run.env.rule.compare(rec, turn)
        if not match.same:
            outcome.branched_at, outcome.part, outcome.similarity = turn.number, match.part, match.similarity
            run.topics.classify(turn)
            break
        run.topics.same(turn, rec)
    else:
        return
    state.runner.on_turn.append(run.topics.classify)
    if not run.env.keep_going:
        outcome.continued = "stopped"
    elif run.result.simulator and run.result.simulator.get("goal"):
        _simulate(run)
    else:
        outcome.continued = "script"
        for rec in recorded[outcome.branched_at:]:
            _say(run, rec)


def _say(run: _Run, rec: TurnRecord) -> Turn:
    """A recorded user turn again: its message and files, or the decision it carried on the agent's
    pauses (recorded on the pause it decided), taken on whatever the agent waits on now."""
    recorded = recorded_decision(run.result.transcript, rec.number)
    decided = recorded.as_decision() if recorded is not None else None
    if decided is None:
        return run.state.user_says(rec.user, run.env.recorded_files(rec.user_files, where=f"turn {rec.number}"))
    return run.state.user_decides(decided.decision, reason=decided.reason, answer=decided.answer,
                                  arguments=decided.arguments, text=rec.user)


def recorded_decision(transcript: Sequence[TurnRecord], number: int) -> PauseRecord | None:
    """The decision turn ``number``'s user message carried, as the record of the pause it decided."""
    return next((p for t in transcript[:max(0, number - 1)] for p in t.pauses
                 if p.decided_in_turn == number and p.decision != "unanswered"), None)


def _simulate(run: _Run) -> None:
    """The simulator takes over with the recorded configuration. The turn budget counts the whole
    conversation: the recorded length or the recorded ``max_turns``, whichever is larger. Without a
    topic graph a stop at a topic cannot fire, so the goal-complete stop replaces it."""
    env, outcome, state = run.env, run.outcome, run.state
    if env.simulator_llm is None:
        outcome.continued = "stopped"
        outcome.note = f"the simulator LLM is not configured ({env.simulator_reason})"
        return
    try:
        config = SimulatorConfig(**dict(run.result.simulator or {}))
    except (TypeError, ValueError) as exc:
        outcome.continued, outcome.note = "stopped", f"the recorded simulator configuration is unusable ({exc})"
        return
    if config.stop_on_topic is not None and (run.topics.graph is None or config.stop_on_topic not in run.topics.graph):
        config = config.with_changes(stop_on_topic=None)
    budget = max(len(run.result.transcript), config.max_turns or DEFAULT_MAX_TURNS) - len(state.conversation.turns)
    if budget < 1 or Simulator(None, config).should_stop(state.conversation):
        outcome.continued, outcome.note = "stopped", "no simulated turn left (turn limit or stop condition reached)"
        return
    outcome.continued = "simulator"
    state.simulator_config = config.with_changes(max_turns=budget)
    state.simulate()


def _judge(roles: LLMRoles, settings: Settings) -> Judge | None:
    sampling = settings.judge
    return Judge(roles.judge, samples=sampling.samples, per_criterion=sampling.samples_per_criterion,
                 temperature=sampling.temperature, purpose=settings.agent_description) \
        if roles.judge is not None else None


def replay_scenario(result: ScenarioResult, env: ReplayEnv, *,
                    recorded: Sequence[ToolStub] | None = None) -> tuple[ScenarioResult, ReplayOutcome]:
    """One recorded run replayed; returns its new result and what happened. ``recorded``: the
    answers the run's stubs gave (default: read from ``result``'s transcript)."""
    outcome = ReplayOutcome(result.id, result.name, result.iteration, result.passed,
                            turns_recorded=len(result.transcript))
    started = time.monotonic()
    roles = env.roles(result.iteration)
    judge = _judge(roles, env.settings)
    failure: FabtestError | None = None
    with tempfile.TemporaryDirectory(prefix="fabtest-replay-") as workdir:
        context = {"scenario": result.name, "feature": result.feature, "iteration": result.iteration,
                   "feature_file": str(env.rootdir / result.feature_file) if result.feature_file else "",
                   "workdir": workdir, "cwd": workdir, "replay": True}
        where = result.feature_file or result.nodeid
        state = ScenarioState(settings=env.settings, rootdir=env.rootdir, workdir=Path(workdir), context=context,
                              llms=roles, default_agent=env.settings.agent, where=where)
        # the seeded history (Given the conversation so far) reaches the agent again, as in the run
        state.conversation.history = [Message(h["role"], h["content"]) for h in result.history  # type: ignore[arg-type]
                                      if h.get("role") in ("user", "agent")]
        try:
            # the project's stubs, then the answers the run's stubs gave: the replay meets the tools the run met
            answers = stubbing.recorded_stubs(result) if recorded is None else recorded
            for stub in [*stubbing.project_stubs(env.settings), *answers]:
                state.define_stub(stub)
            setup = feature_setup(env.rootdir, result)
            _choose_agent(state, env, setup)
            topics = TopicFollower(topic_graph(env.settings, setup.topic_tables, where), judge, state.conversation)
            _drive(_Run(state, result, env, outcome, topics))
        except FabtestError as exc:
            failure = exc
        finally:
            try:
                state.close()
            except AgentError as exc:
                failure = failure or exc
        new = result.model_copy(deep=True)
        conversation = state.conversation
        if failure is None or not failure.skips:
            try:
                recheck(new, result.transcript, conversation, judge, judge_reason=env.judge_reason,
                        stopped_at=outcome.branched_at if outcome.continued == "stopped" else None,
                        max_file_bytes=env.settings.judge_max_file_bytes)
            except FabtestError as exc:  # the judge failed for good: an error, as in a run
                failure = failure or exc
        outcome.turns_replayed = len(conversation.turns)
        if failure is not None and not failure.skips:
            outcome.error = f"{type(failure).__name__}: {str(failure).splitlines()[-1] if str(failure) else ''}"
        _fill(new, state, failure, time.monotonic() - started)
    outcome.passed_now = None if new.skipped else new.passed
    _count_unchecked(new, outcome)
    return new, outcome


def _count_unchecked(new: ScenarioResult, outcome: ReplayOutcome) -> None:
    unchecked = [c for c in (*new.expectations, *new.evaluations) if c.data.get("replay") == "not rechecked"]
    for c in unchecked:
        outcome.not_rechecked[c.mode] = outcome.not_rechecked.get(c.mode, 0) + 1
    hard = next((c for c in unchecked if c.mode == "must"), None)
    outcome.unchecked_reason = hard.details if hard is not None else ""


def _fill(new: ScenarioResult, state: ScenarioState, failure: FabtestError | None, duration: float) -> None:
    conversation = state.conversation
    new.transcript = turn_records(conversation)
    new.turns = len(conversation.turns)
    new.topics_visited, new.topic_path = conversation.topics_visited, conversation.topic_path
    new.backtracked, new.off_graph_transitions = conversation.backtracked, conversation.off_graph_transitions
    new.usage = usage_records(conversation)
    new.duration_s = round(duration, 4)
    new.agent_metadata = dict(state.agent_metadata())
    new.skipped, new.skip_reason = False, None
    if failure is not None and failure.skips:
        new.passed, new.skipped, new.skip_reason = False, True, str(failure)
        new.failure_type = new.failure_message = None
    elif failure is not None:
        new.passed, new.failure_type, new.failure_message = False, failure.failure_type, f"replayed: {failure}"
    else:
        new.passed, new.failure_type, new.failure_message = outcome_of(new)


def _chosen(result: ScenarioResult, scenario: str | None) -> bool:
    return scenario is None or result.id.startswith(scenario) or result.name == scenario


def _not_replayable(result: ScenarioResult, env: ReplayEnv) -> str | None:
    if result.skipped:
        return "it was skipped when recorded"
    if not result.transcript:
        return "no recorded turn to feed"
    if not result.feature_file.endswith(".feature") and env.agent is None:
        return ("not a feature scenario (a playbook prepares its agent's work directory; "
                "give --agent to replay it anyway)")
    return None


def replay_experiment(results: Sequence[ScenarioResult], env: ReplayEnv, *, scenario: str | None = None,
                      progress: Callable[[str], None] | None = None
                      ) -> tuple[list[ScenarioResult], list[ReplayOutcome]]:
    """Every recorded run (``scenario``: id, id prefix or exact name) replayed; a run that cannot be
    (skipped, no turn, a playbook) gets an outcome that says why and no new result."""
    new_results: list[ScenarioResult] = []
    outcomes: list[ReplayOutcome] = []
    for result in results:
        if not _chosen(result, scenario):
            continue
        reason = _not_replayable(result, env)
        if reason is not None:
            outcomes.append(ReplayOutcome(result.id, result.name, result.iteration, result.passed,
                                          turns_recorded=len(result.transcript), note=reason, replayed=False))
            continue
        if progress:
            progress(f"{result.name} (iteration {result.iteration}, {len(result.transcript)} recorded turns)")
        new, outcome = replay_scenario(result, env)
        new_results.append(new)
        outcomes.append(outcome)
    return new_results, outcomes


def replayed_info(info: ExperimentInfo, new_id: str, timestamp: str, env: ReplayEnv,
                  git: tuple[str | None, str | None, bool | None]) -> ExperimentInfo:
    """The new experiment's identity: a replay of ``info`` on today's code, judge and simulator."""
    judge = (env.judge_llm.provider, env.judge_llm.model) if env.judge_llm else (None, None)
    simulator = (env.simulator_llm.provider, env.simulator_llm.model) if env.simulator_llm else (None, None)
    judge_settings, simulator_settings = env.settings.verdict_settings(judge=env.judge_llm is not None,
                                                                       simulator=env.simulator_llm is not None)
    return info.model_copy(update={
        "judge_settings": judge_settings, "simulator_settings": simulator_settings,
        "id": new_id, "timestamp": timestamp, "name": f"replay of {info.id}",
        "tags": [*[t for t in info.tags if not t.startswith("replay")], "replay", f"replay-of:{info.id}"],
        "git_commit": git[0], "git_branch": git[1], "git_dirty": git[2],
        "judge_provider": judge[0], "judge_model": judge[1], "judge_note": None,
        "simulator_provider": simulator[0], "simulator_model": simulator[1], "simulator_note": None,
        "config_hash": "", "criteria_hash": "", "topic_graph_hash": "", "interrupted": False,
    })
