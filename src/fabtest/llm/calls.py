"""What an LLM call is for, said in plain data next to the prompt.

The judge and the simulator wrap every LLM call in :func:`llm_call` with an :class:`LLMCall`:
its purpose (``simulated_user``, ``criteria``, ``grounding``, ``intent``, ``goal``, ``topic``)
and the structured inputs the prompt was built from (criterion names, the goal, the candidate
topics, ...). Real providers ignore it. In-process stand-ins (:class:`fabtest.testing.FakeLLM`,
the demo's offline LLM) read it with :func:`current_call`, so they answer by kind of call and
never depend on the wording of fabtest's prompts, which may change in any release.

A context variable rather than a new parameter keeps the :class:`~fabtest.llm.base.LLM`
protocol unchanged for every provider and every user-written LLM; the call is made on the same
thread that set it (the judge's background evaluations set it inside the worker thread).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from fabtest.conversation import Attachment, Conversation, ToolCall

__all__ = ["PURPOSES", "CriterionLike", "LLMCall", "Purpose", "current_call", "llm_call"]

Purpose = Literal["simulated_user", "criteria", "grounding", "intent", "goal", "topic", "scenarios",
                  "simulator_fidelity", "tool", "extract"]
PURPOSES: tuple[str, ...] = ("simulated_user", "criteria", "grounding", "intent", "goal", "topic", "scenarios",
                             "simulator_fidelity", "tool", "extract")


class CriterionLike(Protocol):
    """What a call's reader sees of a criterion (:class:`fabtest.config.criteria.Criterion` is one).

    A protocol here rather than an import keeps ``llm`` below ``config``: the settings import the LLM.
    """

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def ad_hoc(self) -> bool: ...


@dataclass(frozen=True)
class LLMCall:
    """One judge or simulator call: its purpose and the inputs its prompt was built from.

    Only the fields of the call's purpose are set: ``criteria`` and ``scope`` for criteria,
    ``response``/``source``/``tool_calls`` for grounding, ``intent`` for intent, ``goal`` for goal
    and the simulated user, ``current_topic``/``candidates`` for topic choice, ``conversation``,
    ``persona`` and ``facts`` for the simulated user, ``tool``/``arguments``/``tool_calls`` (its
    earlier calls) for a simulated tool, ``intent`` (what to find) and ``response`` for a value taken
    from a reply (``extract``). ``subject`` is the text being judged, as
    :mod:`fabtest.engine.transcript` renders it for the judge (the turn after a window of the
    turns before it, or the whole transcript; each message quoted, tool calls included).
    """

    purpose: Purpose
    subject: str = ""
    criteria: tuple[CriterionLike, ...] = ()
    scope: str | None = None
    intent: str | None = None
    goal: str | None = None
    source: str | None = None
    response: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    current_topic: str | None = None
    candidates: tuple[str, ...] = ()
    conversation: Conversation | None = None
    persona: str | None = None
    facts: Mapping[str, str] = field(default_factory=dict)
    #: the red-team attack the simulated user plays (fabtest.redteam), and the tactic asked for this turn
    attack: str | None = None
    tactic: str | None = None
    #: a simulated tool (``Given the tool "X" is simulated as "..."``): its name and this call's arguments
    tool: str | None = None
    arguments: Mapping[str, object] = field(default_factory=dict)
    #: the files the prompt's transcript attaches (``[attached: file N]``, :mod:`fabtest.llm.inline_files`):
    #: providers send them inline beside the line naming them; the LLM cache key includes their hashes
    files: tuple[Attachment, ...] = ()
    #: the sampling seed of a simulated user's call (:func:`fabtest.engine.simulator.simulation_seed`):
    #: the same scenario and iteration draw the same user on both arms of ``fabtest ab``; providers
    #: that take a seed send it (Gemini ``generationConfig.seed``, OpenAI ``seed``)
    seed: int | None = None

    @property
    def criterion_names(self) -> list[str]:
        return [c.name for c in self.criteria]


_CURRENT: ContextVar[LLMCall | None] = ContextVar("fabtest_llm_call", default=None)


@contextmanager
def llm_call(call: LLMCall) -> Iterator[LLMCall]:
    """Tag the LLM calls made inside the block (on this thread) with ``call``."""
    token = _CURRENT.set(call)
    try:
        yield call
    finally:
        _CURRENT.reset(token)


def current_call() -> LLMCall | None:
    """The tag of the LLM call being made, or None outside the judge and the simulator."""
    return _CURRENT.get()
