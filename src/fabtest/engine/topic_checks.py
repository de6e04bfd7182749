"""The topic expectations: ``reach the topic`` and ``follow the topics``, over the path walked so far.

Each turn's topic is classified as it happens (``ScenarioState`` hooks a
:class:`~fabtest.engine.topics.TopicTracker` onto the turn loop); these checks only read the path the
conversation took and the graph declared, and name an unknown topic as a usage error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from fabtest.conversation import Check, Conversation, Mode, Status
from fabtest.engine.topics import TopicGraph, follows, reached
from fabtest.errors import UsageError

__all__ = ["TopicState", "check_follows", "check_reached"]


class TopicState(Protocol):
    """What the topic checks read and record (:class:`fabtest.engine.scenario.ScenarioState` is one)."""

    @property
    def where(self) -> str: ...

    @property
    def topics(self) -> TopicGraph | None: ...

    @property
    def conversation(self) -> Conversation: ...

    def record_check(self, kind: str, mode: Mode, label: str, status: Status, details: str,
                     *, turn: int | None = None, data: dict[str, Any] | None = None) -> Check: ...


def check_reached(state: TopicState, topic: str, mode: Mode) -> None:
    """The conversation passed through ``topic`` at some turn."""
    path = _path(state, [topic])
    state.record_check("reached_topic", mode, f"reached:{topic}", "passed" if reached(topic, path) else "failed",
                       f"topic path: {' > '.join(path) or '(none)'}", turn=None, data={"topic": topic})


def check_follows(state: TopicState, sequence: Sequence[str], mode: Mode) -> None:
    """The path contains ``sequence`` in order, with no jump the topics' ``next`` column does not allow."""
    path = _path(state, sequence)
    jumps = state.conversation.off_graph_transitions
    ok = follows(sequence, path) and not jumps
    details = f"topic path: {' > '.join(path) or '(none)'}"
    if jumps:
        details += f"; off-graph transition(s), not allowed by the topics' next column: {', '.join(jumps)}"
    state.record_check("follow_topics", mode, "follows:" + ">".join(sequence), "passed" if ok else "failed",
                       details, turn=None, data={"sequence": list(sequence)})


def _path(state: TopicState, names: Sequence[str]) -> list[str]:
    """The topic path so far, once the graph is declared and knows every name in ``names``."""
    graph: TopicGraph | None = state.topics
    if graph is None:
        raise UsageError(f"{state.where}: no topics declared: add a Given the topics: table first")
    unknown = [n for n in names if n not in graph]
    if unknown:
        raise UsageError(f"{state.where}: unknown topic(s) {', '.join(unknown)}; declared: {', '.join(graph.names)}")
    return state.conversation.topic_path
