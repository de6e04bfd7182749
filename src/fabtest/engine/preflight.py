"""Pre-flight: before the first scenario, check that what the run will need is there.

A run is often hours of paid LLM calls. A typo in an agent's module name, an HTTP agent that
is not started, a missing CLI or a revoked API key would otherwise fail every scenario one by
one, each after spending on the others. So before the first scenario fabtest checks, once, the
agents the selected scenarios use (``Given the agent "name"``, else the default agent), in two
phases:

1. configuration, all of it: a ``module:attr`` imports; an agent named in a feature exists; every
   ``${VAR}`` of every adapter's table is set; a built-in agent's table has only known keys (with a
   did-you-mean) of the right types, its ``tools = "module:ATTR"`` imports, its instructions
   file exists; an HTTP, OpenAI or Realtime agent's options are valid;
2. reachability, only when the configuration is sound: an HTTP or Realtime agent's host accepts a TCP
   connection, a CLI agent's executable exists, and the judge and the simulator, when the run
   needs them and a key is configured, answer one cheap call (``probe``: a few output tokens).

Each problem is one line naming what and why; the caller stops the run as a usage error
(pytest exit 4, ``fabtest run`` exit 2). ``--fabtest-no-preflight`` skips the check. Nothing here
imports pytest: the plugin and ``fabtest run`` share it.
"""

from __future__ import annotations

import inspect
import os
import re
import shutil
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fabtest.errors import UsageError, did_you_mean

__all__ = ["Needs", "PreflightFailed", "begin_preflight", "check_llms", "config_problem", "configuration_problems",
           "configured_agents", "reachability_problem", "reachability_problems", "run_preflight"]

#: Seconds to wait for an HTTP agent's TCP handshake (a local server answers in microseconds).
CONNECT_TIMEOUT_S = 3.0
_JUDGE_STEP = re.compile(r"\b(should|must) (?:not )?(satisfy|be grounded in|have the intent|be achieved|"
                         r"reach the topic|follow the topics)\b")
_SIMULATOR_STEP = re.compile(r"\bthe simulated user talks to the agent\b")
_AGENT_STEP = re.compile(r'the agent "(?P<name>[^"]*)"')
_ENV_REF = re.compile(r"\$\{(\w+)\}")
_SENDS_FILES = re.compile(r'the user (?:sends (?:"|these files with)|has the files? ")')


class PreflightFailed(UsageError):
    """What the run needs is not there; ``problems`` holds one line per problem."""

    def __init__(self, problems: list[str], *, skip_option: str = "--fabtest-no-preflight") -> None:
        self.problems = problems
        lines = [f"fabtest pre-flight: {p}" for p in problems]
        lines[-1] += f" (skip this check with {skip_option})"
        super().__init__("\n".join(lines))


@dataclass
class Needs:
    """What the collected scenarios and playbooks will use."""

    agents: dict[str, Any] = field(default_factory=dict)  # where (the setting's name) -> target
    judge: bool = False
    simulator: bool = False
    #: agents named by ``Given the agent "name"`` (-> where first, ``file:line``);
    #: ``default_agent``: a scenario names none
    agent_names: dict[str, str] = field(default_factory=dict)
    default_agent: bool = False
    #: the first step sending a file (``file:line``) per agent name (None: the default agent)
    sends_files: dict[str | None, str] = field(default_factory=dict)

    def add_steps(self, texts: Iterable[str]) -> None:
        """A scenario's step texts: LLM-judged steps need the judge, a simulated user the simulator."""
        for text in texts:
            self.judge = self.judge or bool(_JUDGE_STEP.search(text))
            self.simulator = self.simulator or bool(_SIMULATOR_STEP.search(text))

    def add_scenario(self, steps: Iterable[tuple[str, str]]) -> None:
        """One scenario's steps (its backgrounds' included) as ``(text, file:line)``: its LLM needs and
        the agent it uses."""
        steps = list(steps)
        self.add_steps(text for text, _ in steps)
        named = [(m.group("name"), where) for text, where in steps if (m := _AGENT_STEP.fullmatch(text.strip()))]
        for name, where in named:
            self.agent_names.setdefault(name, where)
        self.default_agent = self.default_agent or not named
        sending = next((where for text, where in steps if _SENDS_FILES.match(text.strip())), None)
        if sending is not None:
            self.sends_files.setdefault(named[-1][0] if named else None, sending)


def configured_agents(settings: Any, *, scenarios: bool, playbooks: bool,
                      needs: Needs | None = None) -> dict[str, Any]:
    """The agent targets of ``[tool.fabtest]`` a run with these kinds of items builds: with ``needs``,
    only the agents its scenarios name (and the default agent when one names none), else all."""
    agents: dict[str, Any] = {}
    if scenarios:
        if settings.agent is not None and (needs is None or needs.default_agent):
            agents["[tool.fabtest] agent"] = settings.agent
        for name, target in (settings.agents or {}).items():
            if needs is None or name in needs.agent_names:
                agents[f"[tool.fabtest.agents] {name}"] = target
    if playbooks:
        from fabtest.agents.registry import playbook_agent_target

        agents["playbook agent"] = playbook_agent_target(settings=settings)
    return agents


def config_problem(where: str, target: Any, *, root: Path | None = None) -> str | None:
    """Phase 1: what is wrong in ``target``'s configuration (nothing is started or connected to)."""
    try:
        if isinstance(target, str):
            from fabtest._internal.targets import import_object

            import_object(target, where=where)
        elif isinstance(target, Mapping):
            return _table_problem(where, target, root)
    except UsageError as exc:
        return str(exc)
    return None  # an object handed over in code


def reachability_problem(where: str, target: Any) -> str | None:
    """Phase 2: a CLI agent's executable is on PATH, an HTTP agent's host accepts a connection."""
    try:
        if isinstance(target, str):
            return _check_object(where, target)
        if isinstance(target, Mapping):
            if "http" in target:
                return _check_http(where, target["http"])
            if "realtime" in target:
                return _check_http(where, target["realtime"], "Realtime agent", schemes=("ws", "wss"))
            if "a2a" in target:
                return _check_a2a_card(where, target)
            if "ag_ui" in target:
                return _check_http(where, target["ag_ui"], "AG-UI agent")
            if "factory" in target:
                return _check_object(where, str(target["factory"]))
    except UsageError as exc:
        return str(exc)
    return None


def _table_problem(where: str, table: Mapping[str, Any], root: Path | None) -> str | None:
    """Every ``${VAR}`` set, then the adapter's own validation, as the registry would build it."""
    missing = [name for name in _env_refs(table) if name not in os.environ]
    if missing:
        return f"{where}: the agent configuration uses ${{{missing[0]}}}, which is not set"
    if "gemini" in table or "provider" in table:
        from fabtest.agents.builtin import check_builtin_table

        check_builtin_table(table, root=root, where=where)
    elif "openai" in table:
        from fabtest.agents.openai_chat import build_openai_chat_agent

        build_openai_chat_agent(_expanded(table), {}, where=where).close()
    elif "http" in table:
        from fabtest.agents.http import HttpAgent

        options = {k: v for k, v in _expanded(table).items() if k != "http"}
        try:
            HttpAgent(str(_expanded(table)["http"]), **options).close()
        except TypeError as exc:
            return (f"{where}: bad options for the HTTP agent: "
                    f"{str(exc).replace('HttpAgent.__init__() ', '')}")
    elif "realtime" in table:
        from fabtest.agents.realtime import build_realtime_agent

        build_realtime_agent(_expanded(table), {}, where=where)  # checks the keys; connects on the first turn
    elif "acp" in table:
        from fabtest.agents.acp import check_table

        check_table(table, where=where)
    elif "a2a" in table:
        from fabtest.agents.a2a import check_table as check_a2a

        check_a2a(table, where=where)
    elif "ag_ui" in table:
        from fabtest.agents.ag_ui import check_table as check_ag_ui

        check_ag_ui(table, where=where)
    elif "factory" in table:
        from fabtest._internal.targets import import_object

        import_object(str(table["factory"]), where=where)
    else:
        from fabtest.agents.frameworks import FRAMEWORKS, check_framework_table

        if any(key in table for key in FRAMEWORKS):
            check_framework_table(table, where=where)
    return None


def _env_refs(value: Any) -> list[str]:
    if isinstance(value, str):
        return _ENV_REF.findall(value)
    if isinstance(value, Mapping):
        return [name for v in value.values() for name in _env_refs(v)]
    if isinstance(value, (list, tuple)):
        return [name for v in value for name in _env_refs(v)]
    return []


def _expanded(value: Any) -> Any:
    if isinstance(value, str):
        return _ENV_REF.sub(lambda m: os.environ.get(m.group(1), ""), value)
    if isinstance(value, Mapping):
        return {k: _expanded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_expanded(v) for v in value]
    return value


def _check_object(where: str, spec: str) -> str | None:
    from fabtest._internal.targets import import_object

    obj = import_object(spec, where=where)
    executable = _cli_executable(obj)
    if executable is not None and shutil.which(executable) is None:
        return (f"{where}: agent {spec!r} runs the CLI {executable!r}, which is not on PATH "
                "(install it, or set FABTEST_GEMINI_CLI to its path)")
    return None


def _cli_executable(obj: Any) -> str | None:
    """The executable a CLI agent target will start, when it can be told without building it."""
    from fabtest.agents.acp import gemini, gemini_acp
    from fabtest.agents.cli_agent import CliAgent, gemini_cli

    if obj in (gemini_cli, gemini, gemini_acp):
        return os.environ.get("FABTEST_GEMINI_CLI") or "gemini"
    if isinstance(obj, CliAgent):
        return obj.command[0]
    if inspect.isclass(obj) and issubclass(obj, CliAgent):
        return os.environ.get("FABTEST_GEMINI_CLI") or "gemini"
    return None


def _check_http(where: str, url: Any, label: str = "HTTP agent", *, schemes: tuple[str, str] = ("http", "https")
                ) -> str | None:
    """The host of an HTTP agent's URL (or a Realtime agent's ``ws://``/``wss://`` one) accepts a TCP connection."""
    missing = [name for name in _ENV_REF.findall(str(url)) if name not in os.environ]
    if missing:
        return f"{where}: the agent configuration uses ${{{missing[0]}}}, which is not set"
    parts = urlsplit(_ENV_REF.sub(lambda m: os.environ[m.group(1)], str(url)))
    if parts.scheme not in schemes or not parts.hostname:
        return f"{where}: the {label} URL must start with {schemes[0]}:// or {schemes[1]}:// and name a host"
    try:
        port = parts.port or (443 if parts.scheme == schemes[1] else 80)
    except ValueError:
        return f"{where}: the {label} URL has an invalid port"
    shown = f"{parts.scheme}://{parts.hostname}:{port}"  # never the path or query: they may hold a token
    try:
        with socket.create_connection((parts.hostname, port), timeout=CONNECT_TIMEOUT_S):
            return None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return f"{where}: the {label} at {shown} does not accept connections ({reason}); is the server running?"


def _check_a2a_card(where: str, table: Mapping[str, Any]) -> str | None:
    """An A2A agent answers with a card that parses (one GET, as its first turn would)."""
    problem = _check_http(where, table["a2a"], "A2A agent")
    if problem:
        return problem
    from fabtest.agents import aio
    from fabtest.agents.a2a import check_card
    from fabtest.agents.base import AgentError

    try:
        aio.run(check_card(_expanded(table)), timeout=CONNECT_TIMEOUT_S * 4)
    except (AgentError, TimeoutError) as exc:
        return f"{where}: {exc}"
    return None


def check_llms(settings: Any, needs: Needs, *, cache_mode: str,
               llm_for: Callable[[str], Any] | None = None) -> list[str]:
    """Probe the judge and the simulator the run needs; roles sharing one endpoint are probed once.

    ``llm_for(role)`` may hand over the LLM the run itself will use (the pytest plugin's, built
    during the warm-up): the probe then goes through its client and connection, which the first
    scenario reuses, instead of a client built and thrown away for one call."""
    if cache_mode == "replay":
        return []  # every answer comes from the cache: no key, no call
    from fabtest.llm.factory import llm_available

    endpoints: dict[tuple[Any, ...], list[str]] = {}
    for role in ("judge", "simulator"):
        if not getattr(needs, role):
            continue
        llm_settings = getattr(settings, role).llm_settings(settings.max_concurrency)
        if llm_available(llm_settings)[0]:  # without a key the scenarios that need it are skipped
            key = (llm_settings.provider, llm_settings.model, llm_settings.base_url, llm_settings.api_key_env)
            endpoints.setdefault(key, []).append(role)
    problems = []
    for roles in endpoints.values():
        why = _probe(settings, roles[0], llm_for)
        if why is not None:
            who = " and ".join(roles) + (" LLMs" if len(roles) > 1 else " LLM")
            problems.append(f"the {who} did not answer a pre-flight call: {why}")
    return problems


def _probe(settings: Any, role: str, llm_for: Callable[[str], Any] | None) -> str | None:
    from fabtest.llm.base import LLMError
    from fabtest.llm.factory import build_llm

    llm: Any = None
    if llm_for is not None:
        try:
            llm = _provider(llm_for(role))
        except Exception:  # the run's LLM could not be built: probe one of our own
            llm = None
    own = llm is None
    if llm is None:
        configured = getattr(settings, role)
        llm = build_llm(configured.llm_settings(settings.max_concurrency), cache_mode="off",
                        backoff_base_s=configured.backoff)
    try:
        llm.probe()
    except LLMError as exc:
        return " ".join(str(exc).split())
    finally:
        close = getattr(llm, "close", None)
        if own and callable(close):
            close()
    return None


def _provider(llm: Any) -> Any:
    """The provider under a cache wrapper (the probe must reach the provider, not the cache), or
    None when ``llm`` cannot be probed (an offline stand-in)."""
    while llm is not None and not hasattr(llm, "probe") and hasattr(llm, "inner"):
        llm = llm.inner
    return llm if callable(getattr(llm, "probe", None)) else None


def run_preflight(settings: Any, needs: Needs, *, cache_mode: str,
                  skip_option: str = "--fabtest-no-preflight") -> None:
    """Raise :class:`PreflightFailed` listing every problem; return when the run can start.

    Configuration problems are all reported together, before (and instead of) any reachability
    check: a typo is fixed in the file, and probing a server or an LLM meanwhile would only add noise."""
    begin_preflight(settings, needs, cache_mode=cache_mode, skip_option=skip_option)()


def begin_preflight(settings: Any, needs: Needs, *, cache_mode: str,
                    skip_option: str = "--fabtest-no-preflight") -> Callable[[], None]:
    """:func:`run_preflight` whose LLM probe answers in the background: configuration and the agents'
    reachability are checked now (:class:`PreflightFailed`); the judge's and simulator's probe call
    (a model call, seconds at a slow provider) runs on a thread while the caller starts its agent
    (``fabtest run``: the Gemini CLI's start-up). The returned function waits for it and raises
    :class:`PreflightFailed` on a problem; call it before the first prompt. Waiting twice is free."""
    problems = configuration_problems(settings, needs)
    if not problems:
        problems = reachability_problems(needs)
        if problems:  # reported with the LLMs' problems, as ever
            problems += check_llms(settings, needs, cache_mode=cache_mode)
    if problems:
        raise PreflightFailed(problems, skip_option=skip_option)
    found: list[str] = []
    failed: list[BaseException] = []

    def check() -> None:
        try:
            found.extend(check_llms(settings, needs, cache_mode=cache_mode))
        except BaseException as exc:  # raised where it is waited for, as if it ran there
            failed.append(exc)

    probe = threading.Thread(target=check, name="fabtest-preflight", daemon=True)
    probe.start()

    def wait() -> None:
        probe.join()
        if failed:
            raise failed[0]
        if found:
            raise PreflightFailed(found, skip_option=skip_option)

    return wait


def configuration_problems(settings: Any, needs: Needs) -> list[str]:
    """Phase 1 for every agent in use: nothing is started or connected to."""
    source = str(getattr(settings, "source", "") or "")
    root = Path(source).parent if source else None
    problems = [_unknown_agent(settings, name, where) for name, where in sorted(needs.agent_names.items())
                if name not in (settings.agents or {})]
    problems += [p for p in (config_problem(w, t, root=root) for w, t in needs.agents.items()) if p]
    return problems + _fileless_agents(settings, needs)


def _fileless_agents(settings: Any, needs: Needs) -> list[str]:
    """A scenario that sends files to an agent whose protocol cannot carry them (ACP)."""
    from fabtest.agents.file_parts import FILELESS

    problems = []
    for name, where in needs.sends_files.items():
        target = (settings.agents or {}).get(name) if name is not None else settings.agent
        kind = next((k for k in FILELESS if isinstance(target, Mapping) and k in target), None)
        if kind is not None:
            agent = f"[tool.fabtest.agents] {name}" if name is not None else "[tool.fabtest] agent"
            problems.append(f"{where}: this scenario sends files, but {agent} is {FILELESS[kind]}, which cannot "
                            "carry them (docs/how-to/files.md lists the adapters that do)")
    return problems


def reachability_problems(needs: Needs) -> list[str]:
    """Phase 2 for the agents in use (the LLMs are :func:`check_llms`'s)."""
    return [p for p in (reachability_problem(w, t) for w, t in needs.agents.items()) if p]


def _unknown_agent(settings: Any, name: str, where: str) -> str:
    known = sorted(settings.agents or {})
    return (f'{where}: Given the agent "{name}": unknown agent{did_you_mean(name, known)}; '
            f"[tool.fabtest.agents] defines: {', '.join(known) or 'none'}")
