"""Turning what a user configured (``module:attr``, a URL table, a fixture value) into a fresh agent.

Resolution order for a scenario: ``Given the agent "name"`` (``[tool.fabtest.agents]``), else a
``fabtest_agent`` fixture, else ``[tool.fabtest] agent``. For a playbook
(:func:`playbook_agent_target`): ``--agent``, else ``$FABTEST_PLAYBOOK_AGENT``, else
``[tool.fabtest] playbook_agent``, else the Gemini CLI. A factory is called once per scenario; an
``async def`` factory (or ``build``) is awaited on the agent loop of :mod:`fabtest.agents.aio`.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Mapping
from typing import Any, cast

from fabtest._internal import redaction
from fabtest._internal.targets import import_object
from fabtest.agents import aio
from fabtest.agents.base import Agent
from fabtest.agents.frameworks import FRAMEWORKS, build_framework_agent
from fabtest.agents.python import callable_agent, is_factory_callable
from fabtest.agents.voice import is_voice_agent
from fabtest.errors import UsageError

#: The agent a playbook talks to when none is configured: the Gemini CLI, over ACP when it speaks it
DEFAULT_PLAYBOOK_AGENT = "fabtest.agents.acp:gemini"
PLAYBOOK_AGENT_ENV = "FABTEST_PLAYBOOK_AGENT"


def playbook_agent_target(explicit: Any = None, *, settings: Any = None,
                          environ: Mapping[str, str] | None = None) -> Any:
    """What a playbook's agent is built from: ``explicit`` (``--agent``, a factory), else
    ``$FABTEST_PLAYBOOK_AGENT``, else ``[tool.fabtest] playbook_agent``, else the Gemini CLI."""
    if explicit is not None:
        return explicit
    environ = os.environ if environ is None else environ
    return (environ.get(PLAYBOOK_AGENT_ENV) or os.environ.get(PLAYBOOK_AGENT_ENV)
            or getattr(settings, "playbook_agent", None) or DEFAULT_PLAYBOOK_AGENT)


def make_agent(target: Any, context: Mapping[str, Any], *, where: str) -> Agent:
    """Build a fresh agent from an agent, a factory, a class or a chat callable."""
    if isinstance(target, str):
        target = import_object(target, where=where)
    if isinstance(target, Mapping):
        return _from_table(target, context, where=where)
    if inspect.isclass(target):
        if hasattr(target, "build"):
            return _as_agent(target.build(dict(context)), where=where)
        factory: Any = target
        return _as_agent(factory(dict(context)) if _init_takes_argument(target) else factory(), where=where)
    if hasattr(target, "build") and not _speaks(target):
        return _as_agent(target.build(dict(context)), where=where)
    if _speaks(target):
        return cast(Agent, target)
    if callable(target):
        if is_factory_callable(target):
            return _as_agent(target(dict(context)), where=where)
        return callable_agent(target)
    raise UsageError(f"{where}: {target!r} is not an agent: expected an object with chat() (or a voice agent's "
                     "respond()), a factory or a callable")


def _speaks(obj: Any) -> bool:
    """An agent object: it has ``chat`` (text) or ``respond`` (a voice agent, :mod:`fabtest.agents.voice`)."""
    return hasattr(obj, "chat") or is_voice_agent(obj)


def _init_takes_argument(cls: type) -> bool:
    """A class whose constructor takes a positional argument gets the scenario context."""
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return False
    return bool(params) and params[0].kind in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD) \
        and params[0].default is params[0].empty


def _as_agent(obj: Any, *, where: str) -> Agent:
    """What a factory returned as an agent; an async factory's coroutine is awaited on the agent loop,
    so clients it creates belong to the loop its ``chat`` will run on."""
    if inspect.isawaitable(obj):
        obj = aio.run(obj)
    if _speaks(obj):
        return cast(Agent, obj)
    if callable(obj) and not inspect.isclass(obj):
        return callable_agent(obj)
    raise UsageError(f"{where}: the agent factory returned {type(obj).__name__}, which has no chat() or respond() "
                     "method")


def _from_table(table: Mapping[str, Any], context: Mapping[str, Any], *, where: str) -> Agent:
    """``{http = "URL", ...}``, ``{openai = "URL", model = ...}``, ``{realtime = "wss://..."}`` (a voice
    agent, :mod:`fabtest.agents.realtime`), ``{acp = [argv...]}``, ``{a2a = "URL"}``, ``{ag_ui = "URL"}``, a built-in
    agent (``gemini = "MODEL"`` or ``provider = ...``, see :mod:`fabtest.agents.builtin`) or
    ``{factory = "module:attr", ...}``."""
    table = {k: _expand(v, where) for k, v in table.items()}
    if "http" in table:
        from fabtest.agents.http import HttpAgent

        options = {k: v for k, v in table.items() if k != "http"}
        try:
            return HttpAgent(table["http"], **options)
        except TypeError as exc:
            raise UsageError(f"{where}: bad options for the HTTP agent at {table['http']}: "
                             f"{str(exc).replace('HttpAgent.__init__() ', '')}") from None
    if "openai" in table:
        from fabtest.agents.openai_chat import build_openai_chat_agent

        return build_openai_chat_agent(table, context, where=where)
    if "realtime" in table:
        from fabtest.agents.realtime import build_realtime_agent

        return cast(Agent, build_realtime_agent(table, context, where=where))
    if "gemini" in table or "provider" in table:
        from fabtest.agents.builtin import build_builtin_agent

        return build_builtin_agent(table, context, where=where)
    if "acp" in table:
        from fabtest.agents.acp import from_table

        try:
            return cast(Agent, from_table(table, context, where=where))
        except (TypeError, ValueError) as exc:
            raise UsageError(f"{where}: bad options for the ACP agent {table['acp']!r}: {exc}") from None
    if "a2a" in table:
        from fabtest.agents.a2a import from_table as a2a_agent

        return cast(Agent, a2a_agent(table, context, where=where))
    if "ag_ui" in table:
        from fabtest.agents.ag_ui import from_table as ag_ui_agent

        return cast(Agent, ag_ui_agent(table, context, where=where))
    if FRAMEWORKS.keys() & table.keys():
        return cast(Agent, build_framework_agent(table, context, where=where))
    if "factory" in table:
        target = import_object(str(table["factory"]), where=where)
        extra = {k: v for k, v in table.items() if k != "factory"}
        return make_agent(target, {**context, **extra}, where=where)
    raise UsageError(f"{where}: agent table needs 'http = \"URL\"', 'openai = \"URL\"', "
                     "'realtime = \"wss://...\"', 'gemini = \"MODEL\"', 'provider = \"openai\"', "
                     "'acp = [\"program\", ...]', 'a2a = \"URL\"', 'ag_ui = \"URL\"', 'factory = \"module:attr\"' or a "
                     f"framework's '{' / '.join(FRAMEWORKS)} = \"module:attr\"', "
                     f"got {sorted(table)}")


def _expand(value: Any, where: str) -> Any:
    """``${VAR}`` in configured strings comes from the environment, so secrets stay out of pyproject.

    Every substituted value is a secret (:mod:`fabtest._internal.redaction`): results, messages and logs
    show ``***`` instead of the token in ``?token=${BOT_TOKEN}``.
    """
    if isinstance(value, str):
        def env(match: re.Match[str]) -> str:
            if match.group(1) not in os.environ:
                raise UsageError(f"{where}: the agent configuration uses ${{{match.group(1)}}}, which is not set")
            redaction.register_env(match.group(1), os.environ[match.group(1)])
            return os.environ[match.group(1)]

        expanded = re.sub(r"\$\{(\w+)\}", env, value)
        if expanded != value and "@" in expanded:
            redaction.register_url_credentials(expanded)  # httpx sends them base64-encoded
        return expanded
    if isinstance(value, Mapping):
        return {k: _expand(v, where) for k, v in value.items()}
    if isinstance(value, (list, tuple)):  # e.g. an ACP agent's command and its MCP servers' headers
        return [_expand(v, where) for v in value]
    return value


class with_context:  # reads like a function at the call site
    """A factory that adds keyword arguments to the scenario context before building ``target``.

    Return it from a ``fabtest_agent`` fixture to hand pytest fixtures (a DB session, a tenant) to
    your factory: ``return fabtest.with_context("myapp.bot:build", db=db_session)``.
    """

    def __init__(self, target: Any, **extra: Any) -> None:
        self.target = target
        self.extra = extra

    def build(self, context: Mapping[str, Any]) -> Agent:
        return make_agent(self.target, {**context, **self.extra}, where="fabtest_agent fixture")
