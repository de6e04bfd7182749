"""Running one playbook through the conversation runner: steps (scripted) or persona (simulated).

    outcome = run_playbook("scenarios/playbooks/book_berlin.playbook.json",
                           judge_llm=judge, simulator_llm=simulator, repo_root=Path.cwd())
    outcome.passed, outcome.failure_type, outcome.failure_message, outcome.result  # ScenarioResult

What a run does, in order:

1. Load and validate the file, then fill in ``${VAR}`` for the variables listed in ``env``. A
   variable that is not set raises :class:`PlaybookError` before any agent or LLM call. The
   values are secrets: every trace, result and message this module produces goes through a
   :class:`Redactor` first (the agent and the LLMs do see them: that is the point).
2. A fresh :class:`Workspace` per run, ``tmpdir.link_paths`` symlinked in. A playbook WITHOUT
   ``tmpdir`` still runs in a fresh, empty temporary directory: the agent never writes into the
   repository, and ``files_exist`` / ``files_contain`` always mean "relative to the workspace".
   The directory is removed after a pass and kept after any failure (its path is in the failure
   message and in ``PlaybookOutcome.workspace_path``).
3. The agent, built once per run with the context ``{"playbook", "playbook_file", "agent_model",
   "timeout", "workspace", "cwd", "env", "iteration"}``: ``agent_factory`` when given, else
   ``$FABTEST_PLAYBOOK_AGENT``, else ``[tool.fabtest] playbook_agent``, else the Gemini CLI
   (:func:`fabtest.agents.acp.gemini`: over ACP when the CLI supports it, else per turn). ``timeout``
   bounds every agent call (the CLI adapters kill the process group; a Python agent is abandoned a
   moment later by the runner).
4. ``evaluator_model`` rebuilds the judge and simulator with that model (same provider settings
   and cache) when it differs from theirs.
5. Steps mode: each ``user_input`` goes to the agent; its ``expected_outcome`` is judged against
   that exchange alone (stateless judge, scope ``response``). The first failed (or inconclusive)
   step halts the run: failure type ``assertion``; later steps are never sent.
6. Persona mode (after the steps when a playbook has both): ``initial_user_input`` is sent
   verbatim, then a simulated user (goal from the playbook, persona = ``context``) writes the next
   messages, for at most ``max_turns`` turns in all. After every agent turn the deterministic
   success criteria are checked; once they all hold, the ``llm_checks`` are judged (all in one
   call over the transcript); when everything holds the run stops early and passes. Out of
   turns: ``max_turns``; the simulated user declaring its goal complete while criteria are unmet:
   ``assertion``. Either way the message lists the unmet criteria (the LLM checks are judged once
   more at the end so their verdicts are in the result).
7. On any failure the interaction trace is written as JSON to
   ``<results_dir>/traces/<experiment id>.<playbook name>.trace.json`` (``<playbook name>.trace.json``
   without an experiment id; ``.iterN`` before ``.trace.json`` for iteration N > 1), never beside
   the experiments; ``results_dir`` defaults to ``<repo_root>/results``. ``write_trace=False``
   (``--no-results``, ``--fabtest-no-results``) writes no trace.

Failure types (DESIGN section 3): ``assertion`` (a step or a criterion failed), ``max_turns``,
``timeout`` (the agent did not answer within ``timeout``), ``error`` (the agent crashed, or a
judge/simulator call failed: never blamed on the agent as an assertion).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabtest import redaction
from fabtest._files import atomic_writer
from fabtest.agents.base import AgentError, AgentTimeout, agent_metadata
from fabtest.agents.boundary import guarded
from fabtest.agents.registry import make_agent
from fabtest.conversation import Check, Conversation, Turn, jsonable
from fabtest.criteria import Criterion
from fabtest.errors import ExpectationFailed, FabtestError, FailureType, MaxTurnsReached, UsageError
from fabtest.experiment.model import (
    CheckRecord,
    ScenarioResult,
    turn_records,
    usage_records,
)
from fabtest.experiment.stable_id import stable_id
from fabtest.judge import Judge, format_exchange
from fabtest.llm.base import LLM, LLMError
from fabtest.playbook.load import Playbook, SuccessCriteria, load_playbook
from fabtest.playbook.secrets import Redactor, interpolate
from fabtest.playbook.workspace import Workspace, workspace_file
from fabtest.runner import ConversationRunner
from fabtest.simulator import Simulator, SimulatorConfig

__all__ = [
    "DEFAULT_AGENT",
    "PLAYBOOK_AGENT_ENV",
    "PlaybookOutcome",
    "build_playbook_agent",
    "needed_llms",
    "resolve_agent_target",
    "run_playbook",
    "trace_file_name",
]

DEFAULT_AGENT = "fabtest.agents.acp:gemini"  # ACP when the installed CLI speaks it, else per turn
PLAYBOOK_AGENT_ENV = "FABTEST_PLAYBOOK_AGENT"
#: The feature name playbook results are filed under (stable ids, experiment grouping).
FEATURE = "playbook"

GOAL_TEMPLATE = "Get the agent to do what you came for, as described under WHO YOU ARE."
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class PlaybookOutcome:
    """What one playbook run gave. Messages and ``result`` are already redacted."""

    name: str
    source: str
    mode: str  # "steps", "persona" or "steps+persona"
    passed: bool
    failure_type: FailureType | None = None  # from ``error``'s class (fabtest.errors)
    failure_message: str | None = None
    error: FabtestError | None = None  # what ended a failed run; its message is ``failure_message``
    skipped: bool = False
    skip_reason: str | None = None
    conversation: Conversation = field(default_factory=Conversation)
    checks: list[Check] = field(default_factory=list)
    trace_path: Path | None = None
    workspace_path: Path | None = None  # kept after a failure; None after a pass (removed)
    duration_s: float = 0.0
    result: ScenarioResult | None = None

    @property
    def status(self) -> str:
        return "skipped" if self.skipped else "passed" if self.passed else "failed"


# -- the agent ------------------------------------------------------------------------------------


def resolve_agent_target(agent_factory: Any = None, *, settings: Any = None,
                         environ: Mapping[str, str] | None = None) -> Any:
    """``agent_factory``, else ``$FABTEST_PLAYBOOK_AGENT``, else ``[tool.fabtest] playbook_agent``,
    else the Gemini CLI adapter."""
    if agent_factory is not None:
        return agent_factory
    environ = os.environ if environ is None else environ
    return (environ.get(PLAYBOOK_AGENT_ENV) or os.environ.get(PLAYBOOK_AGENT_ENV)
            or getattr(settings, "playbook_agent", None) or DEFAULT_AGENT)


def build_playbook_agent(target: Any, context: Mapping[str, Any], *, where: str) -> Any:
    """A fresh agent, built like a feature's (``agents.registry.make_agent``) behind the one guard."""
    return guarded("the agent factory raised", make_agent, target, dict(context), where=where)


# -- LLMs -----------------------------------------------------------------------------------------


def needed_llms(playbook: Playbook) -> list[tuple[str, str]]:
    """``(role, why)`` for every LLM role the playbook cannot run without."""
    needs: list[tuple[str, str]] = []
    if playbook.steps or (playbook.persona and playbook.persona.success_criteria.llm_checks):
        needs.append(("judge", "judging the steps" if playbook.steps else "the llm_checks"))
    if playbook.persona is not None:
        needs.append(("simulator", "the simulated user (persona)"))
    return needs


def _with_model(llm: LLM | None, model: str | None, built: list[Any]) -> LLM | None:
    """``llm`` talking to ``model`` instead (same provider settings, cache and retries)."""
    if llm is None or not model or getattr(llm, "model", None) == model:
        return llm
    from fabtest.llm.cache import CachedLLM

    if isinstance(llm, CachedLLM):
        inner = _with_model(llm.inner, model, built)
        if inner is llm.inner:
            return llm
        return CachedLLM(inner, cache_dir=llm.cache_dir, mode=llm.mode, salt=llm.salt)  # type: ignore[arg-type]
    settings = getattr(llm, "settings", None)
    from fabtest.llm.base import LLMSettings
    from fabtest.llm.factory import build_llm

    if not isinstance(settings, LLMSettings):
        return llm  # a custom LLM object: it knows its own model

    options: dict[str, Any] = {}
    policy = getattr(llm, "_policy", None)
    if policy is not None:
        options = {"backoff_base_s": policy.backoff_base_s, "backoff_max_s": policy.backoff_max_s}
    new = build_llm(dataclasses.replace(settings, model=model), **options)
    built.append(new)
    return new


# -- criteria -------------------------------------------------------------------------------------


def _agent_output(conversation: Conversation) -> str:
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


def _deterministic(criteria: SuccessCriteria, conversation: Conversation, workspace: Path,
                   repo_root: Path | None = None) -> list[Check]:
    """One check per expected string/file; all cheap, run after every turn."""
    out: list[Check] = []
    output = _agent_output(conversation)
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


def _check(kind: str, label: str, ok: bool, details: str, *, turn: int | None = None) -> Check:
    return Check(kind=kind, mode="must", label=label, status="passed" if ok else "failed", turn=turn, details=details)


def _llm_checks(judge: Judge, checks: list[str], conversation: Conversation) -> list[Check]:
    """Every llm_check in ONE judge call over the transcript (scope conversation)."""
    criteria = [Criterion(text, text) for text in dict.fromkeys(checks)]
    result = judge.evaluate_criteria(criteria, subject=_transcript(conversation), scope="conversation")
    conversation.add_usage("judge", result.usage)
    return [Check("llm_check", "must", v.criterion, v.verdict, None, v.reasoning, {"scope": "conversation"})
            for v in result.value]


def _transcript(conversation: Conversation) -> str:
    lines: list[str] = []
    for turn in conversation.turns:
        lines.append(f"User: {turn.user}")
        lines.append(f"Agent: {turn.response.text}")
        if turn.tool_calls:
            lines.append("(Agent called tools: " + ", ".join(f"{c.name}({_json(c.arguments)})"
                                                             for c in turn.tool_calls) + ")")
    return "\n".join(lines)


def _unmet(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.status != "passed"]


def _describe_unmet(checks: list[Check]) -> str:
    return "\n".join(f"  - {c.kind} {c.label.split(':', 1)[-1]!r}: {c.details or c.status}" for c in checks)


# -- the run --------------------------------------------------------------------------------------


def trace_file_name(playbook_name: str, experiment_id: str | None = None, iteration: int = 1) -> str:
    slug = _SLUG.sub("_", playbook_name).strip("._") or "playbook"
    if iteration > 1:
        slug += f".iter{iteration}"
    return f"{experiment_id}.{slug}.trace.json" if experiment_id else f"{slug}.trace.json"


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
) -> PlaybookOutcome:
    """Run one playbook; see the module docstring. Raises :class:`PlaybookError` for a bad file,
    a missing ``env`` variable or a bad ``link_paths`` entry (before any call); every other problem
    is in the returned outcome."""
    started = time.perf_counter()
    environ = os.environ if environ is None else environ
    original = playbook_path if isinstance(playbook_path, Playbook) else load_playbook(Path(playbook_path))
    playbook, secrets = interpolate(original, environ)
    redactor = Redactor([*secrets, *redaction.secrets()])  # agent-table tokens too
    source = playbook.source or str(playbook_path)
    repo_root = Path(repo_root)
    results = Path(results_dir) if results_dir is not None else repo_root / "results"
    mode = "steps+persona" if playbook.steps and playbook.persona else playbook.mode
    outcome = PlaybookOutcome(name=playbook.name, source=source, mode=mode, passed=False)

    def finish() -> PlaybookOutcome:
        outcome.duration_s = time.perf_counter() - started
        if outcome.failure_message is not None:
            outcome.failure_message = redactor.redact(outcome.failure_message)
        outcome.result = _result(outcome, playbook, redactor, nodeid=nodeid, iteration=iteration,
                                 agent_meta=agent_meta, sim_config=sim_config)
        return outcome

    agent_meta: dict[str, Any] = {}
    sim_config: SimulatorConfig | None = None
    roles = {"judge": judge_llm, "simulator": simulator_llm}
    missing = [(role, why) for role, why in needed_llms(playbook) if roles[role] is None]
    if missing:
        outcome.skipped = True
        outcome.skip_reason = "; ".join(f"{why} needs the {role} LLM, which is not configured" for role, why in missing)
        return finish()

    built: list[Any] = []
    workspace = Workspace(playbook.link_paths, repo_root=repo_root, source=source, announce=False)
    workspace.open()  # PlaybookError (bad link path) before anything runs
    assert workspace.path is not None
    ws_path = workspace.path
    trace: dict[str, Any] = {"steps": [], "turns": [], "success_criteria": []}
    exit_stack = contextlib.ExitStack()
    agent: Any = None
    try:
        try:
            judge_model = _with_model(judge_llm, playbook.evaluator_model, built)
            sim_model = _with_model(simulator_llm, playbook.evaluator_model, built)
            judge = Judge(judge_model) if judge_model is not None else None
            target = resolve_agent_target(agent_factory, settings=settings, environ=environ)
            context = {
                "playbook": playbook.name, "playbook_file": source, "agent_model": playbook.agent_model,
                "timeout": playbook.timeout, "workspace": str(ws_path), "cwd": str(ws_path),
                "env": {name: str(environ[name]) for name in playbook.env}, "iteration": iteration,
            }
            try:
                agent = build_playbook_agent(target, context, where=source)
            except (UsageError, AgentError) as exc:
                raise AgentError(f"cannot build the agent: {exc}") from None
            except Exception as exc:  # noqa: BLE001 - a broken factory is an error outcome
                raise AgentError(f"cannot build the agent: {type(exc).__name__}: {exc}") from None
            around = getattr(agent, "around", None)
            if callable(around):
                guarded("the agent's around() failed on entry:", lambda: exit_stack.enter_context(around()))
            grace = min(5.0, max(0.5, playbook.timeout * 0.25))
            runner = ConversationRunner(agent, outcome.conversation, agent_timeout=playbook.timeout + grace,
                                        redact=redactor.redact)
            if playbook.steps:
                assert judge is not None
                _run_steps(playbook, runner, judge, outcome, trace)
            if playbook.persona is not None:
                sim_config = _simulator_config(playbook)
                _run_persona(playbook, runner, judge, Simulator(sim_model, sim_config), sim_config, ws_path,
                             outcome, trace, repo_root=repo_root)
            outcome.passed = True
        except (AgentError, LLMError, ExpectationFailed, MaxTurnsReached) as stop:
            outcome.error, outcome.failure_type, outcome.failure_message = stop, stop.failure_type, str(stop)
        finally:
            with contextlib.suppress(Exception):
                exit_stack.close()
            if agent is not None:
                try:
                    agent_meta = agent_metadata(agent)  # guarded and validated at the agent boundary
                except AgentError as exc:  # this playbook's error, never the run's
                    if outcome.passed:
                        outcome.passed, outcome.error = False, exc
                        outcome.failure_type, outcome.failure_message = exc.failure_type, str(exc)
                close = getattr(agent, "close", None)
                if callable(close):
                    with contextlib.suppress(Exception):
                        close()
            for llm in built:
                with contextlib.suppress(Exception):
                    llm.close()
    except BaseException:
        workspace.close(passed=False)
        raise
    kept = workspace.close(passed=outcome.passed)
    outcome.workspace_path = kept
    if not outcome.passed:
        extra = f"\n  workspace kept at {kept}" if kept else ""
        outcome.failure_message = (outcome.failure_message or "failed") + extra
    if not outcome.passed and write_trace:
        from fabtest.experiment.export import traces_dir

        trace_path = traces_dir(results) / trace_file_name(playbook.name, experiment_id, iteration)
        outcome.trace_path = trace_path
        extra = f"\n  trace: {trace_path}"
        outcome.failure_message = (outcome.failure_message or "failed") + extra
        doc = {
            "playbook": playbook.name, "file": source, "mode": mode, "experiment_id": experiment_id,
            "iteration": iteration, "passed": False, "failure_type": outcome.failure_type,
            "failure_message": outcome.failure_message, "workspace": str(kept) if kept else None,
            "agent": agent_meta, **trace,
        }
        _write_json(trace_path, redactor.redact_obj(jsonable(doc)))
    return finish()


def _run_steps(playbook: Playbook, runner: ConversationRunner, judge: Judge, outcome: PlaybookOutcome,
               trace: dict[str, Any]) -> None:
    total = len(playbook.steps)
    for index, step in enumerate(playbook.steps, start=1):
        entry: dict[str, Any] = {"step": index, "input": step.user_input, "expected_outcome": step.expected_outcome}
        trace["steps"].append(entry)
        turn = _say(runner, step.user_input, entry, f"step {index} of {total}")
        entry.update(_turn_data(turn))
        name = f"step {index}"
        try:
            result = judge.evaluate_criteria([Criterion(name, step.expected_outcome)],
                                             subject=format_exchange(turn, include_tools=True), scope="response")
        except LLMError as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
            raise LLMError(f"step {index} of {total}: the judge failed: {type(exc).__name__}: {exc}") from None
        outcome.conversation.add_usage("judge", result.usage)
        verdict = result.value[0]
        entry.update({"verdict": verdict.verdict, "reasoning": verdict.reasoning})
        check = Check("step", "must", f"{playbook.name}: {name}", verdict.verdict, turn.number, verdict.reasoning,
                      {"expected_outcome": step.expected_outcome})
        outcome.checks.append(check)
        if verdict.verdict != "passed":
            what = "was inconclusive" if verdict.verdict == "inconclusive" else "failed"
            raise ExpectationFailed(
                f"step {index} of {total} {what}: expected {step.expected_outcome!r}\n"
                        f"  judge: {verdict.reasoning}\n  user: {_short(step.user_input)}\n"
                        f"  agent: {_short(turn.response.text)}")


def _simulator_config(playbook: Playbook) -> SimulatorConfig:
    persona = playbook.persona
    assert persona is not None
    goal = GOAL_TEMPLATE
    if persona.initial_user_input:
        goal += f' Your first message was: "{persona.initial_user_input}".'
    if persona.success_criteria.llm_checks:
        goal += " You are done when: " + "; ".join(persona.success_criteria.llm_checks) + "."
    return SimulatorConfig(goal=goal, persona=persona.context, max_turns=persona.max_turns)


def _run_persona(playbook: Playbook, runner: ConversationRunner, judge: Judge | None, simulator: Simulator,
                 config: SimulatorConfig, workspace: Path, outcome: PlaybookOutcome, trace: dict[str, Any],
                 repo_root: Path | None = None) -> None:
    persona = playbook.persona
    assert persona is not None
    criteria = persona.success_criteria
    conversation = outcome.conversation
    max_turns = persona.max_turns
    llm_checks: list[Check] = []
    llm_checked_at: int | None = None
    deterministic: list[Check] = []
    ended_by_user = False

    def evaluate() -> bool:
        """Cheap criteria every turn; the LLM checks once those hold. True when everything holds."""
        nonlocal deterministic, llm_checks, llm_checked_at
        deterministic = _deterministic(criteria, conversation, workspace, repo_root)
        if _unmet(deterministic) or not criteria.llm_checks:
            return not _unmet(deterministic)
        llm_checks = _judge_llm_checks(judge, criteria.llm_checks, conversation)
        llm_checked_at = len(conversation.turns)
        return not _unmet(llm_checks)

    turns = 0
    done = False
    while turns < max_turns:
        if turns == 0 and persona.initial_user_input is not None:
            text = persona.initial_user_input
        else:
            try:
                sim = simulator.next_message(conversation)
            except LLMError as exc:
                raise LLMError(f"persona turn {turns + 1}: the simulated user failed: "
                               f"{type(exc).__name__}: {exc}") from None
            conversation.add_usage("simulator", sim.usage)
            if sim.goal_complete and turns > 0:
                trace["turns"].append({"turn": None, "user": sim.text, "note": "the simulated user ended: goal complete"})
                ended_by_user = True
                break
            text = sim.text
        entry: dict[str, Any] = {"turn": len(conversation.turns) + 1, "user": text}
        trace["turns"].append(entry)
        turn = _say(runner, text, entry, f"persona turn {turns + 1}")
        entry.update(_turn_data(turn))
        turns += 1
        if evaluate():
            done = True
            break
    if not done and criteria.llm_checks and llm_checked_at != len(conversation.turns):
        # The verdicts of the LLM checks belong in the result even when something else is unmet.
        llm_checks = _judge_llm_checks(judge, criteria.llm_checks, conversation)
    final = deterministic + llm_checks
    outcome.checks.extend(final)
    trace["success_criteria"] = [{"kind": c.kind, "criterion": c.label, "status": c.status, "details": c.details}
                                 for c in final]
    if done:
        return
    unmet = _unmet(final)
    if ended_by_user:
        raise ExpectationFailed(f"the simulated user ended the conversation after {turns} turn(s) as done, "
                                f"but {len(unmet)} success criteria are not met:\n{_describe_unmet(unmet)}")
    raise MaxTurnsReached(f"success criteria not met within max_turns={max_turns} "
                          f"({len(unmet)} unmet):\n{_describe_unmet(unmet)}")


def _judge_llm_checks(judge: Judge | None, checks: list[str], conversation: Conversation) -> list[Check]:
    assert judge is not None
    try:
        return _llm_checks(judge, checks, conversation)
    except LLMError as exc:
        raise LLMError(f"the judge failed on the llm_checks: {type(exc).__name__}: {exc}") from None


def _say(runner: ConversationRunner, text: str, entry: dict[str, Any], where: str) -> Turn:
    try:
        return runner.say(text)
    except AgentTimeout as exc:
        entry["error"] = f"timeout: {exc}"
        raise AgentTimeout(f"{where}: {exc}", where=where) from None
    except AgentError as exc:
        entry["error"] = f"error: {exc}"
        raise AgentError(f"{where}: {exc}", where=where) from None


def _turn_data(turn: Turn) -> dict[str, Any]:
    return {
        "turn": turn.number,
        "response": turn.response.text,
        "tool_calls": [{"name": c.name, "arguments": c.arguments, "result": c.result} for c in turn.tool_calls],
        "duration_s": round(turn.duration_s, 3),
    }


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _write_json(path: Path, data: Any) -> None:
    with atomic_writer(path) as handle:
        json.dump(data, handle, indent=2, ensure_ascii=False)
        handle.write("\n")


# -- the result ----------------------------------------------------------------------------------


def _result(outcome: PlaybookOutcome, playbook: Playbook, redactor: Redactor, *, nodeid: str, iteration: int,
            agent_meta: dict[str, Any], sim_config: SimulatorConfig | None) -> ScenarioResult:
    conv = outcome.conversation
    criteria = {f"{playbook.name}: step {i}": s.expected_outcome for i, s in enumerate(playbook.steps, start=1)}
    if playbook.persona is not None:
        criteria.update({text: text for text in playbook.persona.success_criteria.llm_checks})
    if sim_config is None and playbook.persona is not None:
        sim_config = _simulator_config(playbook)
    result = ScenarioResult(
        id=stable_id(FEATURE, None, playbook.name),
        name=playbook.name,
        nodeid=nodeid or outcome.source,
        feature=FEATURE,
        feature_file=outcome.source,
        iteration=iteration,
        passed=outcome.passed and not outcome.skipped,
        skipped=outcome.skipped,
        skip_reason=outcome.skip_reason,
        turns=len(conv.turns),
        failure_type=outcome.failure_type,
        failure_message=outcome.failure_message,
        expectations=[CheckRecord.model_validate(c.to_dict()) for c in outcome.checks],
        transcript=turn_records(conv),
        usage=usage_records(conv),
        duration_s=round(outcome.duration_s, 4),
        criteria=criteria,
        simulator=sim_config.to_fingerprint() if sim_config is not None else None,
        agent_metadata={**agent_meta, "playbook_mode": outcome.mode,
                        **({"agent_model": playbook.agent_model} if playbook.agent_model else {}),
                        **({"evaluator_model": playbook.evaluator_model} if playbook.evaluator_model else {})},
    )
    return ScenarioResult.model_validate(redactor.redact_obj(result.model_dump(mode="json")))
