"""One simulated conversation of a running scenario, checked for fidelity and run again when invalid.

``When the simulated user talks to the agent`` asks the simulator for each user message until the
user stops (done, stuck, out of scope), a stop condition holds or the turns run out. Then the
conversation is checked (:mod:`fabtest.engine.fidelity`): a simulated user that left its role, or
a red-team attacker that would not attack, makes the run **invalid**. An invalid conversation is
recorded with its reason (``ScenarioState.simulations``, the result's ``simulation``) and the
conversation is run again from the start with a fresh agent, up to ``simulator_retries`` times;
when every try was invalid the scenario ends with :class:`~fabtest.errors.InvalidSimulation`,
reported as not run and never counted in completion, criteria or the gate. A simulated user that
fails for good (its LLM down, or agent-voiced or empty messages on every try) ends the scenario
with :class:`~fabtest.errors.SimulatorFailed`: failure type ``simulator``, the agent not blamed.

A conversation can be started again only when the simulation began it (no scripted turn and no
check before it); otherwise the first invalid try ends the scenario. Starting again is the
state's own job (:meth:`fabtest.engine.scenario.ScenarioState.restart`): it owns the agent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fabtest.config.settings import Settings
from fabtest.conversation import Attachment, Conversation, Decision, TokenUsage
from fabtest.engine import fidelity
from fabtest.engine.simulator import STOPS, SimResult, Simulator, SimulatorConfig, simulation_seed
from fabtest.engine.topics import TopicGraph
from fabtest.engine.turns import ConversationRunner
from fabtest.errors import InvalidSimulation, LLMError, LLMNotConfigured, MaxTurnsReached, SimulatorFailed, UsageError
from fabtest.llm.base import LLM, spent

__all__ = ["SimulatedState", "UserMessage", "UserStopped", "simulate"]


@dataclass(frozen=True)
class UserStopped:
    """The simulated user ended the conversation itself (done, stuck, out of scope), and why."""

    reason: str


@dataclass(frozen=True)
class UserMessage:
    """A simulated user's message with the files it chose to send (``Given the user has the files``)."""

    text: str
    attachments: tuple[Attachment, ...] = ()
    #: its decisions on the pauses the agent waits on
    decisions: tuple[Decision, ...] = ()


class _Roles(Protocol):
    @property
    def judge(self) -> LLM | None: ...

    @property
    def simulator(self) -> LLM | None: ...


class SimulatedState(Protocol):
    """What a simulation reads, charges and restarts of the running scenario
    (:class:`fabtest.engine.scenario.ScenarioState` is one): its configuration, the conversation
    and its runner, and four calls that keep the state's own bookkeeping its own."""

    simulated_text: str | None

    @property
    def where(self) -> str: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def llms(self) -> _Roles: ...

    @property
    def purpose(self) -> str | None: ...

    @property
    def topics(self) -> TopicGraph | None: ...

    @property
    def simulator_config(self) -> SimulatorConfig: ...

    @property
    def user_files(self) -> Mapping[str, Attachment]: ...

    @property
    def simulation_key(self) -> tuple[str, int] | None: ...

    @property
    def conversation(self) -> Conversation: ...

    @property
    def simulations(self) -> list[dict[str, Any]]: ...

    @property
    def runner(self) -> ConversationRunner: ...

    @property
    def restartable(self) -> bool: ...

    def require_llm(self, role: str, what: str) -> None: ...

    def charge(self, role: str, usage: TokenUsage) -> None: ...

    def flush_pending(self) -> None: ...

    def user_note(self, note: str | None) -> None: ...

    def restart(self) -> None: ...

    def review_later(self, review: Callable[[], fidelity.Fidelity], entry: dict[str, Any], *,
                     attempts_left: int) -> bool: ...

#: how many turns a simulation takes when the scenario does not say
DEFAULT_MAX_TURNS = 10


def simulate(state: SimulatedState, *, first: str | None = None,
             until: Callable[[Conversation], str | None] | None = None) -> str:
    """Let the simulated user talk to the agent until it stops; returns why it stopped.

    ``first`` is sent verbatim as the simulated user's first message; ``until`` is one more stop
    condition checked after every turn (a playbook's success criteria).
    """
    config = state.simulator_config
    if not config.goal:
        raise UsageError(f"{state.where}: the simulated user has no goal: "
                         "add Given a simulated user with the goal \"...\"")
    state.require_llm("simulator", "a simulated user")
    if config.stop_on_topic and state.topics is not None and config.stop_on_topic not in state.topics:
        raise UsageError(f'{state.where}: the simulation stops at topic "{config.stop_on_topic}", '
                         f"which is not in the topic graph ({', '.join(state.topics.names)})")
    restartable = state.restartable
    tries = 1 + state.settings.simulator_retries if restartable else 1
    voided = len(state.simulations)  # tries of this run voided by a late review before it was run again
    for attempt in range(voided + 1, max(tries, voided + 1) + 1):
        seed = simulation_seed(*state.simulation_key, attempt) if state.simulation_key else None
        reason, ending, found, why = _one_conversation(state, first, until, seed)
        entry: dict[str, Any] = {"attempt": attempt, **({"seed": seed} if seed is not None else {}),
                                 "turns": len(state.conversation.turns), "stop": reason,
                                 **({"user_thinking": why} if why else {})}
        if not isinstance(found, fidelity.Fidelity):  # the judge's review: in the background if the state can
            entry.update(valid=True, problems=[], judged=False)
            if state.review_later(found, entry, attempts_left=tries - attempt):
                state.simulations.append(entry)
                if isinstance(ending, BaseException):
                    raise ending
                return reason
            found = found()
        checked = found
        problems = checked.problems
        entry.update(valid=not problems, problems=problems, judged=checked.judged,
                     **({"note": checked.note} if checked.note else {}))
        state.simulations.append(entry)
        if not problems:
            if isinstance(ending, BaseException):
                raise ending
            return reason
        if attempt < tries:
            state.restart()
    tried = f"{tries} tries" if tries > 1 else "its only try" + (
        "" if restartable else " (turns or checks came before the simulation, so it cannot run again)")
    raise InvalidSimulation(f"the simulated user left its role in {tried}: {'; '.join(problems)}", where=state.where)


def _one_conversation(
        state: SimulatedState, first: str | None, until: Callable[[Conversation], str | None] | None,
        seed: int | None,
) -> tuple[str, Any, fidelity.Fidelity | Callable[[], fidelity.Fidelity], str]:
    """One try: (why it stopped, the MaxTurnsReached it ended with or None, its fidelity check or the
    judge's review still to make, and what the simulated user thought when it stopped the conversation)."""
    config = state.simulator_config
    simulator = Simulator(state.llms.simulator, config, purpose=state.purpose, files=state.user_files, seed=seed)
    simulated: set[int] = set()
    status: list[str] = []
    thinking: list[str] = []

    def next_message(conversation: Conversation) -> str | UserMessage | UserStopped | None:
        nonlocal first
        state.flush_pending()
        if first is not None:
            state.simulated_text, first = first, None
            return state.simulated_text
        try:
            result = simulator.next_message(conversation, opening=not conversation.turns)
        except LLMNotConfigured:
            raise
        except LLMError as exc:  # the simulated user's failure, charged and never the agent's
            state.charge("simulator", spent(exc))
            raise SimulatorFailed(f"the simulated user failed: {exc}", where=state.where) from exc
        state.simulated_text = result.text
        state.user_note(result.strategy)
        state.charge("simulator", result.usage)
        if result.stops:
            status.append(result.status)
            thinking.append(result.thinking)
            return _stopped(state, conversation, simulator, result.status)
        simulated.add(len(conversation.turns) + 1)
        files = tuple(simulator.files[name] for name in result.files)  # the files it chose to attach, by name
        if result.decision is not None:
            return UserMessage(result.text, files, _decisions(conversation, result))
        if files:
            return UserMessage(result.text, files)
        return result.text

    max_turns = config.max_turns or DEFAULT_MAX_TURNS
    ending: Any = None
    try:
        reason = _talk(
            state.runner, next_message, max_turns=max_turns,
            should_stop=lambda conv: (until(conv) if until else None) or simulator.should_stop(conv, state.topics))
    except InvalidSimulation as exc:  # the attacker refused on every try
        return "", None, fidelity.Fidelity([str(exc)]), ""
    except MaxTurnsReached as exc:
        if config.attack is None:
            ending, reason = exc, str(exc)
        else:
            reason = f"the attack ran its {max_turns} turns"  # an attacker out of turns: the agent held
    mode = state.settings.simulator_fidelity
    why = thinking[-1] if thinking else ""
    if mode == "off":
        return reason, ending, fidelity.Fidelity(), why
    judge = state.llms.judge if mode == "judge" else None
    found = fidelity.Fidelity(fidelity.deterministic(state.conversation, config, simulated,
                                                     stop=status[-1] if status else None))
    if found.problems or judge is None or not fidelity.wants_judge(judge, config, simulated):
        return reason, ending, found, why
    # the review sees this conversation as it is now, whatever later steps add to it
    snapshot = Conversation(turns=list(state.conversation.turns), history=list(state.conversation.history))

    def review() -> fidelity.Fidelity:
        checked = fidelity.review(judge, snapshot, config, frozenset(simulated))
        if checked.usage.calls:
            state.charge("judge", checked.usage)
        return checked

    return reason, ending, review, why


def _decisions(conversation: Conversation, result: SimResult) -> tuple[Decision, ...]:
    """The simulated user's decision on every pending pause: its approve / reject for approvals,
    its message as the answer to questions (a question cannot be approved: its message answers it)."""
    out: list[Decision] = []
    for pause in conversation.pending_pauses:
        if pause.kind == "question" or result.decision == "answer":
            if pause.kind == "question":
                out.append(Decision(pause.id, "answered", reason=result.reason or None, answer=result.text))
            else:  # an approval "answered" in words: the words decide nothing, so it is a rejection with them
                out.append(Decision(pause.id, "rejected", reason=result.reason or result.text or None))
        else:
            out.append(Decision(pause.id, "approved" if result.decision == "approve" else "rejected",
                                reason=result.reason or None))
    return tuple(out)


def _stopped(state: SimulatedState, conversation: Conversation, simulator: Simulator, status: str) -> UserStopped:
    """The user ends the conversation; with a stop condition still unmet, that is not reaching it."""
    reason = STOPS.get(status, STOPS["done"])
    if simulator.config.has_stop_condition and simulator.should_stop(conversation, state.topics) is None:
        last = conversation.turns[-1].response.text[:200] if conversation.turns else ""
        raise MaxTurnsReached(f"{reason} before the simulation reached its stop condition (last agent reply: {last!r})")
    return UserStopped(reason)


def _talk(runner: ConversationRunner,
          next_message: Callable[[Conversation], str | UserMessage | UserStopped | None], *,
          max_turns: int, should_stop: Callable[[Conversation], str | None]) -> str:
    """Let the simulator talk until ``should_stop`` gives a reason; returns that reason.

    ``next_message`` returning None means the simulated user considers its goal done, a
    :class:`UserStopped` that it ended the conversation for the reason given. Raises
    MaxTurnsReached when ``max_turns`` turns pass without a stop reason.
    """
    for _ in range(max_turns):
        text = next_message(runner.conversation)
        if text is None:
            return "the simulated user finished its goal"
        if isinstance(text, UserStopped):
            return text.reason
        if isinstance(text, UserMessage):
            runner.say(text.text, text.attachments, text.decisions)
        else:
            runner.say(text)
        reason = should_stop(runner.conversation)
        if reason:
            return reason
    raise MaxTurnsReached(
        f"the simulation took {max_turns} turns without reaching its stop condition"
        f" (last agent reply: {runner.conversation.turns[-1].response.text[:200]!r})"
        if runner.conversation.turns else f"the simulation took {max_turns} turns without a stop condition")
