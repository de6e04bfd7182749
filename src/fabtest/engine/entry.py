"""``fabtest.run(...)``: one scenario from Python, without pytest or Gherkin.

The same engine the features run on (:class:`~fabtest.engine.scenario.ScenarioState`) plays a
script of user messages or a simulated user against the agent, checks what was asked and says
how it ended with the :class:`~fabtest.experiment.model.ScenarioResult` the experiment JSON is
made of. A scenario that fails is a result with ``passed`` False, not an exception: ``run``
raises only for usage errors (bad arguments, an agent it cannot build, an unknown tool name),
so a caller can test, compare or record outcomes alike. docs/how-to/python-api.md.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fabtest.config.criteria import Criterion, resolve
from fabtest.config.settings import Settings
from fabtest.conversation import DecisionKind
from fabtest.engine.llms import configured_llms
from fabtest.engine.outcome import conclude, ended
from fabtest.engine.result import ScenarioIdentity, build_result
from fabtest.engine.scenario import LLMRoles, ScenarioState
from fabtest.errors import AgentError, UsageError
from fabtest.experiment.model import ScenarioResult
from fabtest.llm.base import LLM

__all__ = ["Decide", "SimulatedUser", "run"]


@dataclass(frozen=True)
class Decide:
    """A scripted user turn that decides what the agent waits on (docs/how-to/approvals.md), as the
    steps do: ``Decide("approve")``, ``Decide("reject", reason="no receipt")``,
    ``Decide("answer", answer="Blue")``, ``Decide("approve", arguments={"amount": 20})`` (the edited
    call). It decides every pending pause of its kind; ``text`` is the message's words (default:
    the reason or the answer)."""

    verb: Literal["approve", "reject", "answer"]
    reason: str | None = None
    answer: str | None = None
    arguments: Mapping[str, Any] | None = None
    text: str | None = None

    def __post_init__(self) -> None:
        if self.verb not in ("approve", "reject", "answer"):
            raise UsageError(f"fabtest.Decide({self.verb!r}): expected 'approve', 'reject' or 'answer'")
        if (self.verb == "answer") != (self.answer is not None):
            raise UsageError(f"fabtest.Decide({self.verb!r}): "
                             + ("an answer needs answer=\"...\"" if self.verb == "answer"
                                else "answer= goes with Decide(\"answer\", answer=...)"))
        if self.arguments is not None and self.verb != "approve":
            raise UsageError(f"fabtest.Decide({self.verb!r}, arguments=...): only an approval edits the call's "
                             "arguments")

    @property
    def decision(self) -> DecisionKind:
        if self.verb == "approve":
            return "approved" if self.arguments is None else "edited"
        return "rejected" if self.verb == "reject" else "answered"


@dataclass(frozen=True)
class SimulatedUser:
    """A user played by the simulator LLM until its goal is done, a stop condition or ``max_turns``."""

    goal: str
    persona: str | None = None
    max_turns: int = 10
    #: what the user knows and tells when asked (a booking reference, a city, ...)
    facts: Mapping[str, str] = field(default_factory=dict)
    #: stop as soon as the agent calls this tool (else the simulated user decides when it is done)
    stop_on_tool: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.goal, str) or not self.goal.strip():
            raise UsageError("SimulatedUser(goal=...): the simulated user needs a goal (a sentence)")
        if isinstance(self.max_turns, bool) or not isinstance(self.max_turns, int) or self.max_turns < 1:
            raise UsageError(f"SimulatedUser(max_turns={self.max_turns!r}): use a whole number >= 1")


def run(
    agent: Any = None,
    *,
    user: Sequence[str | Decide] | SimulatedUser,
    should: Sequence[str | Criterion] = (),
    must: Sequence[str | Criterion] = (),
    must_call: Sequence[str] = (),
    must_not_call: Sequence[str] = (),
    judge: LLM | None = None,
    simulator: LLM | None = None,
    settings: Settings | None = None,
    root: str | Path | None = None,
    name: str = "fabtest.run",
    context: Mapping[str, Any] | None = None,
    workdir: str | Path | None = None,
) -> ScenarioResult:
    """Run one conversation with ``agent`` and check it; returns the scenario's result.

    ``agent`` is anything ``[tool.fabtest] agent`` accepts (an object with ``chat``, a function of
    the messages, a factory, ``"module:attr"``) or the name of a ``[tool.fabtest.agents]`` entry;
    None uses ``[tool.fabtest] agent``. ``user`` is the user's messages in order (a :class:`Decide`
    among them decides the pauses the agent waits on) or a :class:`SimulatedUser`. ``should`` /
    ``must`` are criteria (a sentence, the name of a ``[tool.fabtest] criteria`` entry, or a
    :class:`~fabtest.config.criteria.Criterion`) judged over the whole conversation: a failed
    ``should`` is recorded, a failed ``must`` fails the run, as do
    ``must_call`` / ``must_not_call`` (tools the conversation must (not) include a call to).
    ``judge`` / ``simulator`` default to the LLMs ``[tool.fabtest]`` configures (in ``root``,
    default the current directory); a missing one makes the result ``skipped`` with the reason.
    """
    _check_arguments(user, should, must, must_call, must_not_call)
    project = Path(root) if root is not None else Path.cwd()
    settings = settings if settings is not None else Settings.load(project)
    llms = _llms(settings, project, judge, simulator, needs_judge=bool(should or must),
                 needs_simulator=isinstance(user, SimulatedUser))
    identity = ScenarioIdentity(feature="", name=name)
    with _workdir(workdir) as where:
        state = ScenarioState(
            settings=settings, rootdir=project, workdir=where, llms=llms, where=name,
            context={"scenario": name, "feature": "", "feature_file": "", "line": None, "tags": [], "iteration": 1,
                     "workdir": str(where), "cwd": str(where), **(context or {})},
            default_agent=agent if not _is_agent_name(agent, settings) else None,
        )
        state.criteria.update({n: Criterion(n, text) for n, text in settings.criteria.items()})
        started = time.perf_counter()
        try:
            exc: BaseException | None = _play(state, agent, user, should, must, must_call, must_not_call)
        except UsageError:
            with contextlib.suppress(AgentError):
                state.close()
            raise
        exc = conclude(state, exc)
        return build_result(identity, state, ended(exc), duration_s=time.perf_counter() - started)


def _play(state: ScenarioState, agent: Any, user: Sequence[str | Decide] | SimulatedUser,
          should: Sequence[str | Criterion], must: Sequence[str | Criterion], must_call: Sequence[str],
          must_not_call: Sequence[str]) -> Exception | None:
    """The conversation and its checks, in the order a feature would write them; what ended it early."""
    try:
        if _is_agent_name(agent, state.settings):
            state.use_agent(agent)
        if isinstance(user, SimulatedUser):
            state.configure_simulator(goal=user.goal, persona=user.persona, facts=dict(user.facts),
                                      max_turns=user.max_turns, stop_on_tool=user.stop_on_tool)
            state.simulate()
        else:
            for said in user:
                if isinstance(said, Decide):
                    state.user_decides(said.decision, reason=said.reason, answer=said.answer,
                                       arguments=dict(said.arguments) if said.arguments is not None else None,
                                       text=said.text)
                else:
                    state.user_says(said)
        for tool in must_call:
            state.includes_call(tool, "must")
        for tool in must_not_call:
            state.includes_call(tool, "must", negated=True)
        for mode, criteria in (("should", should), ("must", must)):
            for criterion in criteria:
                if isinstance(criterion, Criterion):
                    state.define_criterion(criterion)  # named in the result, like a Given the criterion step
                chosen = criterion if isinstance(criterion, Criterion) else resolve(criterion, state.criteria)
                state.satisfy(chosen, "should" if mode == "should" else "must", "conversation")
    except UsageError:
        raise
    except Exception as exc:  # how the scenario ended: the outcome says so, the caller reads it
        return exc
    return None


def _llms(settings: Settings, root: Path, judge: LLM | None, simulator: LLM | None, *, needs_judge: bool,
          needs_simulator: bool) -> LLMRoles:
    """The LLMs passed in; a role that is needed and not passed comes from ``[tool.fabtest]``."""
    roles = LLMRoles(judge=judge, simulator=simulator)
    if (needs_judge and judge is None) or (needs_simulator and simulator is None):
        configured = configured_llms(settings, root)
        if judge is None:
            roles.judge, roles.judge_reason = configured.judge, configured.judge_reason
        if simulator is None:
            roles.simulator, roles.simulator_reason = configured.simulator, configured.simulator_reason
    roles.judge_reason = roles.judge_reason or "pass judge=... to fabtest.run or configure [tool.fabtest] judge"
    roles.simulator_reason = (roles.simulator_reason
                              or "pass simulator=... to fabtest.run or configure [tool.fabtest] simulator")
    return roles


def _is_agent_name(agent: Any, settings: Settings) -> bool:
    return isinstance(agent, str) and agent in settings.agents


def _check_arguments(user: Any, should: Any, must: Any, must_call: Any, must_not_call: Any) -> None:
    """Bad arguments are usage errors before anything runs, one line naming the argument."""
    if isinstance(user, str):
        raise UsageError(f"fabtest.run(user={user!r}): pass a list of messages (user=[{user!r}]) or a SimulatedUser")
    if not isinstance(user, SimulatedUser):
        if not isinstance(user, Sequence) or not user or not all(isinstance(t, (str, Decide)) for t in user):
            raise UsageError("fabtest.run(user=...): expected a non-empty list of user messages (str, or "
                             "fabtest.Decide(...) to decide a pause) or fabtest.SimulatedUser(goal=...)")
    for label, value, kinds in (("should", should, (str, Criterion)), ("must", must, (str, Criterion)),
                                ("must_call", must_call, (str,)), ("must_not_call", must_not_call, (str,))):
        if isinstance(value, str) or not isinstance(value, Sequence) \
                or not all(isinstance(v, kinds) and (not isinstance(v, str) or v.strip()) for v in value):
            what = "criteria (sentences or Criterion objects)" if kinds != (str,) else "tool names"
            raise UsageError(f"fabtest.run({label}=...): expected a list of {what}, got {value!r}")


@contextlib.contextmanager
def _workdir(given: str | Path | None) -> Iterator[Path]:
    """The directory the agent works in (a CLI agent's cwd): ``given``, else a fresh one removed after."""
    if given is not None:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="fabtest-run-") as tmp:
        yield Path(tmp)
