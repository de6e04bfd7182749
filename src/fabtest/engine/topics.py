"""Topic graphs: the stages a conversation moves through, how to tell them apart, and checks on the path.

A graph is declared as a Gherkin table (topic | characteristic | triggers | next | max turns) and
validated when declared, so a typo is a clear error naming the feature file and line instead of a
conversation that can never reach a topic. Classification is deterministic first (triggers) and
asks the judge only when a move is possible and no trigger decided it.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from fabtest.conversation import TokenUsage, Turn
from fabtest.engine.judge import Judge, format_exchange
from fabtest.engine.patterns import IGNORECASE, Pattern, PatternError, compile_pattern, search
from fabtest.errors import TopicGraphError, TriggerError  # the one tree (errors.py); importable here too

TriggerKind = Literal["tool", "agent", "user"]

_REQUIRED_COLUMNS = ("topic", "characteristic", "triggers", "next")
_OPTIONAL_COLUMNS = ("max turns",)
_KIND_START = re.compile(r"\s*(tool|agent|user)\s*:", re.IGNORECASE)
_TOOL_NAME = re.compile(r"[^\s,/]+")


@dataclass(frozen=True)
class Trigger:
    """A deterministic sign of a topic: the agent called a tool, or a message matched a regex."""

    kind: TriggerKind
    pattern: str
    ignore_case: bool = False

    def __post_init__(self) -> None:
        if self.kind not in ("tool", "agent", "user"):
            raise TriggerError(f"trigger kind must be tool, agent or user, got {self.kind!r}")
        if not self.pattern:
            raise TriggerError(f"{self.kind} trigger has an empty {'name' if self.kind == 'tool' else 'regex'}")
        if self.kind != "tool":
            try:
                compile_pattern(self.pattern, IGNORECASE if self.ignore_case else 0)
            except PatternError as exc:
                raise TriggerError(f"invalid regex /{self.pattern}/ in {self.kind} trigger: {exc}") from None

    @property
    def regex(self) -> Pattern:
        return compile_pattern(self.pattern, IGNORECASE if self.ignore_case else 0)

    def fires(self, turn: Turn) -> bool:
        if self.kind == "tool":
            return any(call.name == self.pattern for call in turn.tool_calls)
        text = turn.response.text if self.kind == "agent" else turn.user
        return search(self.regex, text or "", where=f"topic trigger {self}") is not None

    def __str__(self) -> str:
        if self.kind == "tool":
            return f"tool:{self.pattern}"
        return f"{self.kind}:/{self.pattern}/" + ("i" if self.ignore_case else "")


def parse_triggers(text: str) -> list[Trigger]:
    """Parse ``tool:NAME, agent:/REGEX/, user:/REGEX/`` (an ``i`` after the closing slash ignores case).

    A regex may contain commas and slashes: it ends at the first unescaped ``/`` (plus optional
    ``i``) that is followed by the end of the text or by a comma and the next trigger.
    """
    triggers: list[Trigger] = []
    pos = 0
    text = text or ""
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            if triggers:  # a trailing comma
                raise TriggerError(f"empty trigger at the end of {text!r}")
            return triggers
        start = _KIND_START.match(text, pos)
        if start is None:
            raise TriggerError(
                f"cannot parse trigger {text[pos:].split(',')[0].strip()!r}: "
                "expected tool:NAME, agent:/REGEX/ or user:/REGEX/"
            )
        kind = start.group(1).lower()
        pos = start.end()
        if kind == "tool":
            trigger, pos = _parse_tool(text, pos)
        else:
            trigger, pos = _parse_regex(kind, text, pos)
        triggers.append(trigger)
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return triggers
        if text[pos] != ",":
            raise TriggerError(f"expected a comma between triggers at {text[pos:]!r}")
        pos += 1
        if not text[pos:].strip():
            raise TriggerError(f"empty trigger at the end of {text!r}")


def _parse_tool(text: str, pos: int) -> tuple[Trigger, int]:
    end = text.find(",", pos)
    end = len(text) if end == -1 else end
    name = text[pos:end].strip()
    if not name:
        raise TriggerError("tool trigger needs a tool name: tool:NAME")
    if not _TOOL_NAME.fullmatch(name):
        raise TriggerError(f"invalid tool name {name!r} in trigger (no spaces or slashes)")
    return Trigger("tool", name), end


def _parse_regex(kind: str, text: str, pos: int) -> tuple[Trigger, int]:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if pos >= len(text) or text[pos] != "/":
        raise TriggerError(f"{kind} trigger needs a regex between slashes: {kind}:/REGEX/")
    body_start = pos + 1
    i = body_start
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "/":
            end = i + 1
            ignore_case = end < len(text) and text[end] == "i"
            if ignore_case:
                end += 1
            if _ends_trigger(text, end):
                pattern = text[body_start:i]
                return Trigger(kind, pattern, ignore_case), end  # type: ignore[arg-type]
        i += 1
    raise TriggerError(f"{kind} trigger regex is not closed with '/': {text[pos:]!r}")


def _ends_trigger(text: str, pos: int) -> bool:
    """True when ``pos`` is the end of the text or a comma followed by another trigger."""
    rest = text[pos:]
    if not rest.strip():
        return True
    stripped = rest.lstrip()
    if not stripped.startswith(","):
        return False
    after = stripped[1:]
    return not after.strip() or _KIND_START.match(after) is not None


def _parse_successors(text: str) -> list[str]:
    names: list[str] = []
    for part in (text or "").split(","):
        name = part.strip()
        if name and name not in names:
            names.append(name)
    return names


@dataclass(frozen=True)
class Topic:
    """One stage of a conversation."""

    name: str
    characteristic: str = ""
    triggers: list[Trigger] = field(default_factory=list)
    successors: list[str] = field(default_factory=list)
    max_turns: int | None = None

    def triggered_by(self, turn: Turn) -> bool:
        return any(trigger.fires(turn) for trigger in self.triggers)


class TopicGraph:
    """Topics by name in declared order; the first is where every conversation starts."""

    def __init__(self, topics: Sequence[Topic], *, where: str = "", validate: bool = True) -> None:
        self.where = where
        self.topics: dict[str, Topic] = {}
        for topic in topics:
            if topic.name in self.topics:
                raise self._error(f'duplicate topic "{topic.name}"')
            self.topics[topic.name] = topic
        if validate:
            self.validate()

    @classmethod
    def from_table(
        cls, rows: Sequence[Mapping[str, Any]], *, where: str, validate: bool = True
    ) -> TopicGraph:
        """A graph from table rows (dicts keyed by header). ``validate=False`` parses a fragment
        that only makes sense merged into an inherited graph (``merged`` validates the result)."""
        if not rows:
            raise TopicGraphError(f"{where}: topic table has no rows")
        topics = [_topic_from_row(row, where=where) for row in rows]
        return cls(topics, where=where, validate=validate)

    @classmethod
    def merged(cls, parent: TopicGraph, child: TopicGraph) -> TopicGraph:
        """Inheritance: topics accumulate and a topic redefined in ``child`` replaces the parent's
        (keeping its place); the initial topic stays the parent's. Errors name the child's place."""
        topics = dict(parent.topics)
        for name, topic in child.topics.items():
            topics[name] = topic
        return cls(list(topics.values()), where=child.where or parent.where)

    @property
    def initial(self) -> str:
        return next(iter(self.topics))

    @property
    def names(self) -> list[str]:
        return list(self.topics)

    def __contains__(self, name: object) -> bool:
        return name in self.topics

    def __getitem__(self, name: str) -> Topic:
        return self.topics[name]

    def __len__(self) -> int:
        return len(self.topics)

    def successors(self, name: str) -> list[Topic]:
        return [self.topics[n] for n in self.topics[name].successors]

    def validate(self) -> None:
        """Raise ``TopicGraphError`` for an empty graph, self-loop, unknown successor or a topic
        that cannot be reached from the initial topic."""
        if not self.topics:
            raise self._error("topic graph has no topics")
        for topic in self.topics.values():
            if topic.name in topic.successors:
                raise self._error(f'topic "{topic.name}" lists itself as next (self-loop)')
            for successor in topic.successors:
                if successor not in self.topics:
                    raise self._error(f'topic "{topic.name}" has unknown next topic "{successor}"')
        reachable = self._reachable_from(self.initial)
        unreachable = [name for name in self.topics if name not in reachable]
        if unreachable:
            names = ", ".join(f'"{n}"' for n in unreachable)
            raise self._error(f'topic {names} cannot be reached from the initial topic "{self.initial}"')

    def require(self, names: Iterable[str]) -> None:
        """Raise ``TopicGraphError`` if a step names a topic the graph does not have."""
        for name in names:
            if name not in self.topics:
                known = ", ".join(self.topics)
                raise self._error(f'unknown topic "{name}" (topics: {known})')

    def canonical_order(self) -> list[str]:
        """Topological order with alphabetical tie-breaking, independent of row order.

        A cycle (a back edge such as presenting -> gathering) is broken at the initial topic or a
        topic that an already ordered topic leads to, then the fewest remaining predecessors, then
        alphabetically.
        """
        initial = self.initial
        indegree = {name: 0 for name in self.topics}
        predecessors: dict[str, set[str]] = {name: set() for name in self.topics}
        for topic in self.topics.values():
            for successor in set(topic.successors):
                indegree[successor] += 1
                predecessors[successor].add(topic.name)
        remaining = set(self.topics)
        ready = [name for name, degree in indegree.items() if degree == 0]
        heapq.heapify(ready)
        order: list[str] = []
        while remaining:
            if not ready:
                pick = min(
                    remaining,
                    key=lambda n: (n != initial and not (predecessors[n] - remaining), indegree[n], n),
                )
                indegree[pick] = 0
                heapq.heappush(ready, pick)
            name = heapq.heappop(ready)
            if name not in remaining:
                continue
            remaining.discard(name)
            order.append(name)
            for successor in set(self.topics[name].successors):
                if successor in remaining:
                    indegree[successor] -= 1
                    if indegree[successor] == 0:
                        heapq.heappush(ready, successor)
        return order

    def topic_records(self) -> list[dict[str, Any]]:
        """Canonical records for the topic-graph hash: {name, characteristic, sorted successors}."""
        return [
            {
                "name": name,
                "characteristic": self.topics[name].characteristic,
                "successors": sorted(self.topics[name].successors),
            }
            for name in self.canonical_order()
        ]

    def to_fingerprint(self) -> dict[str, Any]:
        """Everything that changes how conversations are classified: records plus the initial
        topic, triggers and turn limits (for a config hash that should notice those too)."""
        return {
            "initial": self.initial,
            "topics": [
                {
                    **record,
                    "triggers": sorted(str(t) for t in self.topics[record["name"]].triggers),
                    "max_turns": self.topics[record["name"]].max_turns,
                }
                for record in self.topic_records()
            ],
        }

    def _reachable_from(self, start: str) -> set[str]:
        seen = {start}
        stack = [start]
        while stack:
            for successor in self.topics[stack.pop()].successors:
                if successor in self.topics and successor not in seen:
                    seen.add(successor)
                    stack.append(successor)
        return seen

    def _error(self, message: str) -> TopicGraphError:
        return TopicGraphError(f"{self.where}: {message}" if self.where else message)


def table_rows(table: Sequence[Sequence[str]]) -> list[dict[str, str]]:
    """Rows of a Gherkin data table (first row is the header) as dicts, for ``from_table``."""
    if not table:
        return []
    header = [cell.strip() for cell in table[0]]
    return [dict(zip(header, (cell for cell in row), strict=False)) for row in table[1:]]


def _column_key(name: str) -> str:
    return " ".join(name.strip().lower().replace("_", " ").split())


def _topic_from_row(row: Mapping[str, Any], *, where: str) -> Topic:
    cells = {_column_key(str(key)): ("" if value is None else str(value).strip()) for key, value in row.items()}
    missing = [column for column in _REQUIRED_COLUMNS if column not in cells]
    if missing:
        raise TopicGraphError(f"{where}: topic table is missing column(s): " + ", ".join(missing))
    unknown = [column for column in cells if column not in _REQUIRED_COLUMNS + _OPTIONAL_COLUMNS]
    if unknown:
        expected = ", ".join(_REQUIRED_COLUMNS + _OPTIONAL_COLUMNS)
        raise TopicGraphError(f"{where}: topic table has unknown column(s): {', '.join(unknown)} (expected {expected})")
    name = cells["topic"]
    if not name:
        raise TopicGraphError(f"{where}: a topic row has an empty topic name")
    try:
        triggers = parse_triggers(cells["triggers"])
    except TriggerError as exc:
        raise TopicGraphError(f'{where}: topic "{name}": {exc}') from None
    max_turns: int | None = None
    raw_max = cells.get("max turns", "")
    if raw_max:
        try:
            max_turns = int(raw_max)
        except ValueError:
            raise TopicGraphError(
                f'{where}: topic "{name}": max turns must be a whole number, got {raw_max!r}') from None
        if max_turns < 1:
            raise TopicGraphError(f'{where}: topic "{name}": max turns must be at least 1, got {max_turns}')
    return Topic(
        name=name,
        characteristic=cells["characteristic"],
        triggers=triggers,
        successors=_parse_successors(cells["next"]),
        max_turns=max_turns,
    )


# --------------------------------------------------------------------------------------------
# Following a conversation through the graph.
# --------------------------------------------------------------------------------------------


@dataclass
class Classification:
    """The topic after a turn and how it was decided (``usage`` is the judge's cost, if asked)."""

    topic: str
    via: Literal["trigger", "judge", "stay", "off_graph"]
    usage: TokenUsage = field(default_factory=TokenUsage)
    #: for ``off_graph``: the topic that was left, although the new one is not its successor
    left: str | None = None


class TopicTracker:
    """The current topic of one conversation, updated turn by turn.

    Rule per turn: a trigger of the current topic keeps it; else the first successor (declared
    order) whose trigger fires becomes current; else the first other topic whose trigger fires
    becomes current as an *off-graph* jump (recorded, so ``follow the topics`` fails on it);
    else, if the current topic has successors and a judge is available, the judge chooses among
    the current topic and its successors; else stay.
    Turn counts are totals per topic over the whole conversation (returning to a topic adds on).
    """

    def __init__(self, graph: TopicGraph) -> None:
        self.graph = graph
        self.current = graph.initial
        self.path: list[str] = []
        self.turns_in: dict[str, int] = {}
        #: every jump to a topic that is not a successor of the one left ("greeting -> booking")
        self.off_graph: list[str] = []

    def classify(self, turn: Turn, judge: Judge | None = None) -> Classification:
        """Decide the topic after ``turn`` and record it; the caller stores it on the turn."""
        current = self.graph[self.current]
        if current.triggered_by(turn):
            result = Classification(current.name, "trigger")
        else:
            moved = next((t for t in self.graph.successors(current.name) if t.triggered_by(turn)), None)
            jumped = None if moved is not None else next(
                (self.graph[n] for n in self.graph.names
                 if n != current.name and self.graph[n].triggered_by(turn)), None)
            if moved is not None:
                result = Classification(moved.name, "trigger")
            elif jumped is not None:
                result = Classification(jumped.name, "off_graph", left=current.name)
                self.off_graph.append(f"{current.name} -> {jumped.name}")
            elif current.successors and judge is not None and judge.available:
                answer = judge.choose_topic(
                    current, self.graph.successors(current.name), format_exchange(turn, include_tools=True)
                )
                result = Classification(answer.value, "judge", answer.usage)
            else:
                result = Classification(current.name, "stay")
        self.current = result.topic
        self.path.append(result.topic)
        self.turns_in[result.topic] = self.turns_in.get(result.topic, 0) + 1
        return result

    def exceeded_max_turns(self) -> str | None:
        """A message naming the topic whose ``max turns`` was exceeded, or None."""
        for name, count in self.turns_in.items():
            limit = self.graph[name].max_turns
            if limit is not None and count > limit:
                return f'the conversation spent {count} turns in topic "{name}" (max turns {limit})'
        return None

    def reached(self, topic: str) -> bool:
        return reached(topic, self.path)

    def follows(self, sequence: Sequence[str]) -> bool:
        return follows(sequence, self.path)


def reached(topic: str, path: Sequence[str]) -> bool:
    """True when ``topic`` appears anywhere in ``path``."""
    return topic in path


def distinct_path(path: Sequence[str]) -> list[str]:
    """``path`` with consecutive repeats collapsed: the sequence of topic changes."""
    out: list[str] = []
    for topic in path:
        if not out or out[-1] != topic:
            out.append(topic)
    return out


def follows(sequence: Sequence[str], path: Sequence[str]) -> bool:
    """True when ``sequence`` appears in order in the de-duplicated ``path``, gaps allowed.

    ``greeting, presenting_results`` is followed by greeting -> gathering -> presenting_results:
    the step says which topics the conversation must pass through, not that it may pass through
    nothing else.
    """
    remaining = iter(distinct_path(path))
    return all(any(step == topic for topic in remaining) for step in sequence)
