"""Configuration fingerprints (docs/explanation/experiments.md): tell whether two experiments measured the same thing.

Every hash is over a canonical form so that semantically equal configurations hash equally:
criteria sorted by name, topics in a deterministic topological order, JSON with sorted keys.
Format: ``sha256:<64 hex>``.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fabtest.experiment.model import ScenarioResult, TopicRecord

__all__ = [
    "canonical_json",
    "config_hash",
    "criteria_hash",
    "experiment_fingerprints",
    "merge_configuration",
    "topic_graph_hash",
    "topic_order",
]


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: one spelling per value, so it can be hashed."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def criteria_hash(criteria: Mapping[str, str]) -> str:
    """Hash of criteria sorted by name, each as its (name, description) pair.

    The pairs are JSON-encoded rather than concatenated so that ``("ab", "c")`` and
    ``("a", "bc")`` cannot collide.
    """
    pairs = [[name, criteria[name]] for name in sorted(criteria)]
    return _sha(canonical_json(pairs))


def topic_order(topics: Sequence[TopicRecord]) -> list[TopicRecord]:
    """Topics in topological order (Kahn's algorithm), ties broken alphabetically via a heap.

    Cycles still give a deterministic order: when no topic with in-degree zero remains, the
    alphabetically smallest remaining topic is taken next. Successors that are not declared
    topics are ignored for ordering (they still count in the hash through ``successors``).
    """
    by_name = {t.name: t for t in topics}
    indegree = {name: 0 for name in by_name}
    for t in by_name.values():
        for succ in set(t.successors):
            if succ in indegree and succ != t.name:
                indegree[succ] += 1
    heap = [name for name, deg in indegree.items() if deg == 0]
    heapq.heapify(heap)
    remaining = set(by_name)
    order: list[TopicRecord] = []
    while remaining:
        if not heap:  # a cycle: break it at the alphabetically smallest remaining topic
            heap = [min(remaining)]
        name = heapq.heappop(heap)
        if name not in remaining:
            continue
        remaining.discard(name)
        order.append(by_name[name])
        for succ in sorted(set(by_name[name].successors)):
            if succ in remaining and succ != name:
                indegree[succ] -= 1
                if indegree[succ] == 0:
                    heapq.heappush(heap, succ)
    return order


def topic_graph_hash(topics: Sequence[TopicRecord]) -> str:
    """Hash of ``[name, characteristic, sorted successors]`` for each topic in canonical order."""
    rows = [[t.name, t.characteristic, sorted(set(t.successors))] for t in topic_order(topics)]
    return _sha(canonical_json(rows))


def config_hash(criteria_digest: str, topic_digest: str, simulator: Any,
                settings: Mapping[str, Any] | None = None) -> str:
    """Hash over both fingerprints, the simulator configuration and the judge's and simulator's
    settings that can change a verdict (temperature, samples, ...), as canonical JSON. Without
    recorded settings (an older file, a hand-built experiment) the hash is what it always was."""
    recorded = canonical_json(settings) if settings else ""
    return _sha(criteria_digest + topic_digest + canonical_json(simulator) + recorded)


def _merge_text(old: str, new: str) -> str:
    """Deterministic union of two differing descriptions (order-independent)."""
    variants = set(old.split("\n||\n")) | set(new.split("\n||\n"))
    return "\n||\n".join(sorted(variants))


def merge_configuration(
    results: Iterable[ScenarioResult],
) -> tuple[dict[str, str], list[TopicRecord], list[str]]:
    """Union of every scenario's configuration: criteria, topics, distinct simulator configs.

    A name defined differently by two scenarios keeps every variant (sorted, joined), so the
    union does not depend on the order results arrived in.
    """
    criteria: dict[str, str] = {}
    topics: dict[str, TopicRecord] = {}
    simulators: set[str] = set()
    for result in results:
        for name, description in result.criteria.items():
            criteria[name] = (description if name not in criteria or criteria[name] == description
                              else _merge_text(criteria[name], description))
        for topic in result.topics:
            known = topics.get(topic.name)
            if known is None:
                topics[topic.name] = TopicRecord(name=topic.name, characteristic=topic.characteristic,
                                                 successors=sorted(set(topic.successors)))
            else:
                characteristic = (known.characteristic if known.characteristic == topic.characteristic
                                  else _merge_text(known.characteristic, topic.characteristic))
                successors = sorted(set(known.successors) | set(topic.successors))
                topics[topic.name] = TopicRecord(name=topic.name, characteristic=characteristic, successors=successors)
        if result.simulator is not None:
            simulators.add(canonical_json(result.simulator))
    return dict(sorted(criteria.items())), [topics[n] for n in sorted(topics)], sorted(simulators)


def experiment_fingerprints(results: Sequence[ScenarioResult],
                            settings: Mapping[str, Any] | None = None) -> tuple[str, str, str]:
    """``(config_hash, criteria_hash, topic_graph_hash)`` over the union of all scenarios; ``settings``:
    the judge's and simulator's recorded settings (``export.recorded_settings``)."""
    criteria, topics, simulators = merge_configuration(results)
    c_hash = criteria_hash(criteria)
    t_hash = topic_graph_hash(topics)
    return config_hash(c_hash, t_hash, simulators, settings), c_hash, t_hash
