"""Running one playbook on the scenario engine: steps (scripted) or persona (simulated).

    outcome = run_playbook("scenarios/playbooks/book_berlin.playbook.json",
                           judge_llm=judge, simulator_llm=simulator, repo_root=Path.cwd())
    outcome.passed, outcome.failure_type, outcome.failure_message, outcome.result  # ScenarioResult

What a run does, in order:

1. Load and validate the file, then fill in ``${VAR}`` for the variables listed in ``env`` (one
   that is not set raises :class:`PlaybookError` before any call). The values are secrets: every
   trace, result and message goes through a :class:`Redactor` first (the agent and LLMs see them).
2. A fresh :class:`Workspace` per run (``tmpdir.link_paths`` symlinked in; empty without
   ``tmpdir``): the agent never writes into the repository, and ``files_exist`` /
   ``files_contain`` mean "relative to the workspace". It is removed after a pass and kept after
   a failure (its path is in the message and in ``PlaybookOutcome.workspace_path``).
3. One engine :class:`~fabtest.engine.ScenarioState` per run owns the agent (built with
   :func:`~fabtest.agents.registry.make_agent` from :func:`~fabtest.agents.registry.playbook_agent_target`
   and the context ``{"playbook", "playbook_file", "agent_model", "timeout", "workspace", "cwd",
   "env", "iteration"}``; its ``around()``, ``metadata()``), the conversation, the simulator loop
   and the judge. ``timeout`` bounds every agent call; ``evaluator_model`` rebuilds the judge and
   simulator with that model (``evaluator.py``).
4. Steps mode: each ``user_input`` goes to the agent; its ``expected_outcome`` is judged against
   that exchange alone (scope ``response``). The first failed (or inconclusive) step halts the
   run (``assertion``); later steps are never sent.
5. Persona mode (after the steps when a playbook has both): ``initial_user_input`` is sent
   verbatim, then the simulated user (persona = ``context``) writes, for at most ``max_turns``
   turns. After every turn the success criteria (``criteria.py``) are checked, the ``llm_checks``
   once the cheap ones hold; when all hold the run stops and passes. Out of turns: ``max_turns``;
   the simulated user done while criteria are unmet: ``assertion``; the message lists the unmet.
6. On a failure the trace is written under ``<results_dir>/traces/`` (``record.py``;
   ``results_dir`` defaults to ``<repo_root>/results``) unless ``write_trace=False``.

What ends a run is an exception of :mod:`fabtest.errors`, kept in ``PlaybookOutcome.error``; its
class gives the failure type (docs/reference/steps.md "How a scenario ends"): ``assertion`` (a step or
a criterion failed), ``max_turns``, ``timeout`` (the agent did not answer within ``timeout``), ``error`` (the agent
crashed, or a judge/simulator call failed: never blamed on the agent as an assertion).
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from fabtest._internal import redaction
from fabtest.agents.boundary import guarded
from fabtest.agents.registry import make_agent, playbook_agent_target
from fabtest.config.criteria import Criterion
from fabtest.config.settings import Settings
from fabtest.conversation import Check, Conversation, Turn
from fabtest.engine import LLMRoles, ScenarioState
from fabtest.engine.attachments import FileRef
from fabtest.engine.judge import format_exchange
from fabtest.errors import AgentError, AgentTimeout, ExpectationFailed, FabtestError, LLMError, MaxTurnsReached
from fabtest.llm.base import LLM
from fabtest.playbook import criteria as success
from fabtest.playbook import record
from fabtest.playbook.evaluator import needed_llms, simulator_config, with_model
from fabtest.playbook.load import Playbook, load_playbook
from fabtest.playbook.outcome import PlaybookOutcome
from fabtest.playbook.record import FEATURE, build_result, trace_file_name, turn_data
from fabtest.playbook.secrets import Redactor, interpolate
from fabtest.playbook.workspace import Workspace

__all__ = ["FEATURE", "PlaybookOutcome", "needed_llms", "run_playbook", "trace_file_name"]


def run_playbook(
    playbook_path: str | os.PathLike[str] | Playbook,
    *,
    agent_factory: Callable[[dict[str, Any]], Any] | Any = None,
    judge_llm: LLM | None,
    simulator_llm: LLM | None,
    repo_root: str | os.PathLike[str],
    results_dir: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    settings: Any = None,
    experiment_id: str | None = None,
    nodeid: str = "",
    iteration: int = 1,
    write_trace: bool = True,
    ready: Callable[[], None] | None = None,
) -> PlaybookOutcome:
    """Run one playbook; see the module docstring. Raises :class:`PlaybookError` for a bad file,
    a missing ``env`` variable or a bad ``link_paths`` entry (before any call); every other problem
    is in the returned outcome.

    ``ready`` (``fabtest run``: the pre-flight's LLM probe, :func:`~fabtest.engine.preflight.begin_preflight`)
    is waited for once the agent is built and its ``around()`` entered (an ACP agent is then starting)
    and before the first step: what it raises propagates, nothing of the run is kept (no outcome,
    no trace, the workspace removed), as if it had been raised before the call."""
    started = time.perf_counter()
    environ = os.environ if environ is None else environ
    original = playbook_path if isinstance(playbook_path, Playbook) else load_playbook(Path(playbook_path))
    playbook, secrets = interpolate(original, environ)
    redactor = Redactor([*secrets, *redaction.secrets()])  # agent-table tokens too
    source = playbook.source or str(playbook_path)
    repo_root = Path(repo_root)
    mode = "steps+persona" if playbook.steps and playbook.persona else playbook.mode
    outcome = PlaybookOutcome(name=playbook.name, source=source, mode=mode, passed=False)
    sim_config = simulator_config(playbook) if playbook.persona is not None else None
    agent_meta: dict[str, Any] = {}

    waited = 0.0  # in ``ready``: not the playbook's time

    def finish() -> PlaybookOutcome:
        outcome.duration_s = time.perf_counter() - started - waited
        if outcome.failure_message is not None:
            outcome.failure_message = redactor.redact(outcome.failure_message)
        outcome.result = build_result(outcome, playbook, redactor, nodeid=nodeid, iteration=iteration,
                                      agent_meta=agent_meta, sim_config=sim_config)
        return outcome

    roles = {"judge": judge_llm, "simulator": simulator_llm}
    missing = [(role, why) for role, why in needed_llms(playbook) if roles[role] is None]
    if missing:
        if ready is not None:
            begun = time.perf_counter()
            ready()
            waited = time.perf_counter() - begun
        outcome.skipped = True
        outcome.skip_reason = "; ".join(f"{why} needs the {role} LLM, which is not configured" for role, why in missing)
        return finish()

    built: list[Any] = []
    workspace = Workspace(playbook.link_paths, repo_root=repo_root, source=source, announce=False)
    workspace.open()  # PlaybookError (bad link path) before anything runs
    assert workspace.path is not None
    trace: dict[str, Any] = {"steps": [], "turns": [], "success_criteria": []}
    not_run = False  # ``ready`` raised: nothing ran

    def wait_ready() -> None:
        nonlocal not_run, waited
        if ready is not None:
            begun = time.perf_counter()
            try:
                ready()
            except BaseException:
                not_run = True
                raise
            waited = time.perf_counter() - begun

    try:
        state = _scenario(playbook, source, settings, repo_root, workspace.path, environ, iteration, redactor)
        outcome.conversation = state.conversation
        agent: Any = None
        try:
            state.llms = LLMRoles(judge=with_model(judge_llm, playbook.evaluator_model, built),
                                  simulator=with_model(simulator_llm, playbook.evaluator_model, built))
            try:
                agent = _open_agent(state, playbook_agent_target(agent_factory, settings=settings, environ=environ))
            except FabtestError:
                wait_ready()  # a failed pre-flight wins over the agent's own failure, as before it overlapped
                raise
            wait_ready()
            if playbook.steps:
                _run_steps(playbook, state, trace)
            if sim_config is not None:
                state.configure_simulator(goal=sim_config.goal, persona=sim_config.persona,
                                          max_turns=sim_config.max_turns)
                _run_persona(playbook, state, trace, workspace.path, repo_root)
            outcome.passed = True
        except FabtestError as stop:
            if not_run:
                raise
            outcome.fail(stop)
        finally:
            try:
                state.close()  # metadata(), around() exit: this playbook's error, never the run's
            except AgentError as exc:
                if outcome.passed:
                    outcome.fail(exc)
            agent_meta = state.agent_metadata()
            for closing in [getattr(agent, "close", None), *(llm.close for llm in built)]:
                if callable(closing):
                    with contextlib.suppress(Exception):
                        closing()
            state.finish(verify=False)
            outcome.checks = list(state.conversation.expectations)
    except BaseException:
        workspace.close(passed=not_run)  # kept after a failure, removed when nothing ran
        raise
    kept = outcome.workspace_path = workspace.close(passed=outcome.passed)
    if not outcome.passed:
        outcome.failure_message = ((outcome.failure_message or "failed")
                                   + (f"\n  workspace kept at {kept}" if kept else ""))
    if not outcome.passed and write_trace:
        results = Path(results_dir) if results_dir is not None else repo_root / "results"
        record.write_trace(results, outcome, trace, redactor, experiment_id=experiment_id, iteration=iteration,
                           agent_meta=agent_meta)
    return finish()


def _scenario(playbook: Playbook, source: str, settings: Any, repo_root: Path, workspace: Path,
              environ: Mapping[str, str], iteration: int, redactor: Redactor) -> ScenarioState:
    """The engine's scenario for one run: the playbook's ``timeout`` per agent call (plus a grace
    for a Python agent to give up), no scenario deadline, one judge sample per criterion."""
    base = settings if isinstance(settings, Settings) else Settings()
    grace = min(5.0, max(0.5, playbook.timeout * 0.25))
    run_settings = base.model_copy(update={"agent_timeout": playbook.timeout + grace, "scenario_timeout": None,
                                           "judge": base.judge.model_copy(update={"samples": 1})})
    context = {
        "playbook": playbook.name, "playbook_file": source, "agent_model": playbook.agent_model,
        "timeout": playbook.timeout, "workspace": str(workspace), "cwd": str(workspace),
        "env": {name: str(environ[name]) for name in playbook.env}, "iteration": iteration,
    }
    return ScenarioState(settings=run_settings, rootdir=repo_root, workdir=workspace, context=context, llms=LLMRoles(),
                         where=source, redact=redactor.redact)


def _open_agent(state: ScenarioState, target: Any) -> Any:
    """Build the agent (a failure is "cannot build the agent", this playbook's ``error``), then let
    the engine enter its ``around()``."""
    try:
        state.agent_target = guarded("the agent factory raised", make_agent, target, state.context, where=state.where)
    except FabtestError as exc:  # guarded() lets only fabtest's own errors through
        raise AgentError(f"cannot build the agent: {exc}") from None
    return state.agent


def _run_steps(playbook: Playbook, state: ScenarioState, trace: dict[str, Any]) -> None:
    total = len(playbook.steps)
    for index, step in enumerate(playbook.steps, start=1):
        entry: dict[str, Any] = {"step": index, "input": step.user_input, "expected_outcome": step.expected_outcome}
        trace["steps"].append(entry)
        where = f"step {index} of {total}"
        send = (functools.partial(state.user_sends, step.user_input, [FileRef(f) for f in step.files]) if step.files
                else functools.partial(state.user_says, step.user_input))
        turn = _say(send, entry, where)
        entry.update(turn_data(turn))
        name = f"step {index}"
        try:
            verdict = state.judge_criteria([Criterion(name, step.expected_outcome)],
                                           format_exchange(turn, include_tools=True), "response")[0]
        except LLMError as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
            raise LLMError(f"{where}: the judge failed: {type(exc).__name__}: {exc}") from None
        entry.update({"verdict": verdict.verdict, "reasoning": verdict.reasoning})
        state.add_check(Check("step", "must", f"{playbook.name}: {name}", verdict.verdict, turn.number,
                              verdict.reasoning, {"expected_outcome": step.expected_outcome}))
        if verdict.verdict != "passed":
            what = "was inconclusive" if verdict.verdict == "inconclusive" else "failed"
            raise ExpectationFailed(
                f"{where} {what}: expected {step.expected_outcome!r}\n  judge: {verdict.reasoning}\n"
                f"  user: {_short(step.user_input)}\n  agent: {_short(turn.response.text)}")


def _run_persona(playbook: Playbook, state: ScenarioState, trace: dict[str, Any], workspace: Path,
                 repo_root: Path) -> None:
    """The engine's simulator loop, stopped as soon as every success criterion holds."""
    persona = playbook.persona
    assert persona is not None
    criteria, conversation = persona.success_criteria, state.conversation
    before = len(conversation.turns)
    found: dict[str, list[Check]] = {"deterministic": [], "llm": []}
    llm_checked_at: int | None = None
    met = False

    def evaluate(conv: Conversation) -> str | None:
        """Cheap criteria every turn; the LLM checks once those hold."""
        nonlocal llm_checked_at, met
        turn = conv.turns[-1]
        trace["turns"].append({"turn": turn.number, "user": turn.user, **turn_data(turn)})
        found["deterministic"] = success.deterministic(criteria, conv, workspace, repo_root)
        met = not success.unmet(found["deterministic"])
        if met and criteria.llm_checks:
            found["llm"] = success.judge_llm_checks(state, criteria.llm_checks)
            llm_checked_at = len(conv.turns)
            met = not success.unmet(found["llm"])
        return "every success criterion holds" if met else None

    ended_by_user = False
    try:
        state.simulate(first=persona.initial_user_input, until=evaluate)
        ended_by_user = not met
    except MaxTurnsReached:
        pass
    except AgentError as exc:
        trace["turns"].append(entry := {"turn": len(conversation.turns) + 1, "user": state.simulated_text})
        _agent_failed(exc, entry, f"persona turn {len(conversation.turns) - before + 1}")
    except LLMError as exc:
        if exc.where == "llm_checks":
            raise
        raise LLMError(f"persona turn {len(conversation.turns) - before + 1}: the simulated user failed: "
                       f"{type(exc).__name__}: {exc}") from None
    turns = len(conversation.turns) - before
    if ended_by_user:
        trace["turns"].append({"turn": None, "user": state.simulated_text,
                               "note": "the simulated user ended: goal complete"})
    if not met and criteria.llm_checks and llm_checked_at != len(conversation.turns):
        # The verdicts of the LLM checks belong in the result even when something else is unmet.
        found["llm"] = success.judge_llm_checks(state, criteria.llm_checks)
    final = found["deterministic"] + found["llm"]
    for check in final:
        state.add_check(check)
    trace["success_criteria"] = [{"kind": c.type, "criterion": c.criterion, "status": c.status, "details": c.details}
                                 for c in final]
    if met:
        return
    unmet = success.unmet(final)
    if ended_by_user:
        raise ExpectationFailed(f"the simulated user ended the conversation after {turns} turn(s) as done, "
                                f"but {len(unmet)} success criteria are not met:\n{success.describe_unmet(unmet)}")
    raise MaxTurnsReached(f"success criteria not met within max_turns={persona.max_turns} "
                          f"({len(unmet)} unmet):\n{success.describe_unmet(unmet)}")


def _say(say: Callable[[], Turn], entry: dict[str, Any], where: str) -> Turn:
    """One agent turn; a failure is noted in the trace entry and names the step or persona turn."""
    try:
        return say()
    except AgentError as exc:
        _agent_failed(exc, entry, where)


def _agent_failed(exc: AgentError, entry: dict[str, Any], where: str) -> NoReturn:
    timeout = isinstance(exc, AgentTimeout)
    entry["error"] = f"{'timeout' if timeout else 'error'}: {exc}"
    raise (AgentTimeout if timeout else AgentError)(f"{where}: {exc}", where=where) from None


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
