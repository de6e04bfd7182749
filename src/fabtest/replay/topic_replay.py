"""Topics in a replay: the recorded ones while the turns are the same, classified from the branch on.

Classifying the unchanged turns again would ask the judge about text it already placed (and cost
calls while nothing changed), so those turns keep their recorded topic and the tracker is moved
along with them; from the first different turn on, the tracker classifies as a run does (triggers
first, then the judge among the successors). The graph is the one the project and the feature
declare today (:mod:`.replay_feature`).
"""

from __future__ import annotations

from collections.abc import Sequence

from fabtest.config.settings import Settings
from fabtest.conversation import Conversation, Turn
from fabtest.engine.judge import Judge
from fabtest.engine.topics import TopicGraph, TopicTracker, table_rows
from fabtest.errors import TopicGraphError, UsageError
from fabtest.experiment.model import TurnRecord

__all__ = ["TopicFollower", "topic_graph"]


def topic_graph(settings: Settings, tables: Sequence[list[list[str]]], where: str) -> TopicGraph | None:
    """Project topics, then each feature table on top (as ``Given the topics:`` merges them)."""
    graph: TopicGraph | None = None
    try:
        if settings.topics:
            rows = [{**r.model_dump(by_alias=True), "max turns": "" if r.max_turns is None else str(r.max_turns)}
                    for r in settings.topics]
            graph = TopicGraph.from_table(rows, where=f"{settings.source} [tool.fabtest] topics")
        for table in tables:
            fragment = TopicGraph.from_table(table_rows(table), where=where, validate=graph is None)
            graph = fragment if graph is None else TopicGraph.merged(graph, fragment)
    except TopicGraphError as exc:
        raise UsageError(str(exc)) from None
    return graph


class TopicFollower:
    """Sets each replayed turn's topic; without a graph, recorded topics are kept and no more."""

    def __init__(self, graph: TopicGraph | None, judge: Judge | None, conversation: Conversation) -> None:
        self.graph = graph
        self.judge = judge
        self.conversation = conversation
        self.tracker = TopicTracker(graph) if graph is not None else None

    def same(self, turn: Turn, recorded: TurnRecord) -> None:
        """An unchanged turn: its recorded topic stands, and the tracker moves to it."""
        topic = turn.topic = recorded.topic
        tracker = self.tracker
        if tracker is None or self.graph is None or topic is None or topic not in self.graph:
            return
        if recorded.off_graph:
            turn.off_graph_from = tracker.current
            tracker.off_graph.append(f"{tracker.current} -> {topic}")
        tracker.current = topic
        tracker.path.append(topic)
        tracker.turns_in[topic] = tracker.turns_in.get(topic, 0) + 1

    def classify(self, turn: Turn) -> None:
        """A new turn: classified as a run classifies it; the judge's calls are charged."""
        if self.tracker is None:
            return
        result = self.tracker.classify(turn, self.judge)
        turn.topic, turn.off_graph_from = result.topic, result.left
        if result.usage.calls:
            self.conversation.add_usage("judge", result.usage)
