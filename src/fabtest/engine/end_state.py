"""The state an agent leaves behind, read after the conversation and checked by path.

Whatever path the agent took, what counts is often what it left: the order in the database, the
plan on the account (tau2-bench grades the database's end state, Rasa asserts slots). An agent
exposes it with a ``state()`` method (sync or async) returning plain data; the LangGraph adapter
returns the graph's state. A path is dotted keys and list indexes (``account.plan``,
``orders.0.id``); attributes of objects work too.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from fabtest.agents import aio
from fabtest.agents.boundary import guarded
from fabtest.conversation import jsonable
from fabtest.errors import UsageError

__all__ = ["lookup", "read_state"]

_MISSING: Any = object()


def read_state(agent: Any, *, where: str) -> Any:
    """The agent's ``state()`` now; a UsageError when it has none, an AgentError when it raises."""
    method = getattr(agent, "state", None)
    if not callable(method):
        raise UsageError(f"{where}: the agent ({type(agent).__name__}) exposes no state: give it a state() method "
                         "returning plain data (a dict), or use a LangGraph graph, whose state fabtest reads")
    value = guarded("the agent's state() raised", method)
    if inspect.isawaitable(value):
        value = aio.run(value)
    return value


def lookup(state: Any, path: str) -> tuple[bool, Any, str]:
    """``(found, value, where it stopped)`` for a dotted ``path`` in ``state``."""
    current = state
    walked: list[str] = []
    for part in path.split("."):
        nxt = _step(current, part)
        if nxt is _MISSING:
            return False, None, _describe(current, ".".join(walked) or "the state")
        current = nxt
        walked.append(part)
    return True, jsonable(current), ""


def _step(value: Any, part: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(part, _MISSING)
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        try:
            return value[int(part)]
        except (ValueError, IndexError):
            return _MISSING
    return getattr(value, part, _MISSING) if not part.startswith("_") else _MISSING


def _describe(value: Any, at: str) -> str:
    if isinstance(value, Mapping):
        keys = ", ".join(str(k) for k in list(value)[:20]) or "no keys"
        return f"{at} has {keys}"
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return f"{at} is a list of {len(value)}"
    return f"{at} is {jsonable(value)!r}"
