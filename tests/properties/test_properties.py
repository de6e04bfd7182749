"""Property-based tests (hypothesis) of what experiments are compared by: fingerprints, stable ids
and the JSON round trip. They extend tests/experiment (which checks criteria_hash and
topic_graph_hash on TopicRecords directly, and a round trip of make_result variants) with the
paths real runs take: whole results, topic graphs declared as Gherkin tables, lean reads.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fabtest.experiment.export import build_document, write_document
from fabtest.experiment.reader import load_document, read_document
from fabtest.experiment.fingerprint import experiment_fingerprints, topic_graph_hash
from fabtest.experiment.model import (
    CheckRecord,
    ExperimentInfo,
    ScenarioResult,
    ToolCallRecord,
    TopicRecord,
    TurnRecord,
    UsageRecord,
)
from fabtest.experiment.stable_id import stable_id
from fabtest.engine.topics import TopicGraph

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_name = st.text(alphabet="abcdefghijklmnop_", min_size=1, max_size=8)
# Gherkin names: anything printable on one line, but not "::" (the separator, see the collision test).
_gherkin_name = st.text(st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters=":"),
                        min_size=1, max_size=20).filter(lambda s: s.strip() != "")


def _result(name: str, criteria: dict[str, str], topics: list[TopicRecord], **kw: Any) -> ScenarioResult:
    return ScenarioResult(id=stable_id("F", None, name), name=name, passed=True, criteria=criteria, topics=topics, **kw)


# -- fingerprints ------------------------------------------------------------------------------------
@FAST
@given(st.lists(st.dictionaries(_name, st.text(max_size=12), max_size=5), min_size=1, max_size=4), st.randoms())
def test_experiment_fingerprints_ignore_criteria_dict_order_and_result_order(criteria_per_result, rnd) -> None:
    results = [_result(f"s{i}", c, []) for i, c in enumerate(criteria_per_result)]
    shuffled = []
    for r in results:
        items = list(r.criteria.items())
        rnd.shuffle(items)
        shuffled.append(r.model_copy(update={"criteria": dict(items)}))
    rnd.shuffle(shuffled)
    assert experiment_fingerprints(shuffled) == experiment_fingerprints(results)


@st.composite
def _topic_tables(draw: st.DrawFn) -> list[dict[str, str]]:
    """Rows of a valid topic table: every topic reachable from the first, no self-loops."""
    names = draw(st.lists(_name, min_size=1, max_size=7, unique=True))
    successors: dict[str, set[str]] = {n: set() for n in names}
    for index, name in enumerate(names[1:], start=1):  # a spanning tree from the first row
        parent = names[draw(st.integers(0, index - 1))]
        successors[parent].add(name)
    for _ in range(draw(st.integers(0, 6))):  # extra edges, cycles allowed, self-loops not
        a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        if a != b:
            successors[a].add(b)
    return [{"topic": n, "characteristic": draw(st.text(alphabet="abc xyz", max_size=10)).strip(),
             "triggers": "", "next": ", ".join(sorted(successors[n]))} for n in names]


@FAST
@given(_topic_tables(), st.randoms())
def test_topic_records_ignore_row_order_and_successor_order(rows, rnd) -> None:
    graph = TopicGraph.from_table(rows, where="t.feature:1")
    first, rest = rows[0], rows[1:]
    rnd.shuffle(rest)
    reordered = []
    for row in [first, *rest]:  # the first row is the initial topic: it keeps its place
        nexts = [s for s in row["next"].split(", ") if s]
        rnd.shuffle(nexts)
        reordered.append({**row, "next": ", ".join(nexts)})
    other = TopicGraph.from_table(reordered, where="t.feature:1")
    assert other.topic_records() == graph.topic_records()
    records = [TopicRecord(**r) for r in graph.topic_records()]
    assert topic_graph_hash([TopicRecord(**r) for r in other.topic_records()]) == topic_graph_hash(records)
    assert sorted(r["name"] for r in graph.topic_records()) == sorted(r["topic"] for r in rows)


# -- stable ids --------------------------------------------------------------------------------------
@FAST
@given(_gherkin_name, st.none() | _gherkin_name, _gherkin_name, st.none() | _name,
       st.text(max_size=30), st.integers(1, 9), st.booleans())
def test_stable_id_depends_only_on_the_logical_name(feature, rule, scenario, record, path, iteration, passed) -> None:
    sid = stable_id(feature, rule, scenario, record)
    result = ScenarioResult(id=sid, name=scenario, feature=feature, rule=rule, record_id=record, nodeid=path + "::x",
                            feature_file=path, iteration=iteration, passed=passed)
    assert result.id == stable_id(f"  {feature}\t", rule, f"{scenario} ", record)
    assert sid.startswith("example:") and len(sid) == len("example:") + 12


@FAST
@given(st.tuples(_gherkin_name, st.none() | _gherkin_name, _gherkin_name, st.none() | _name),
       st.tuples(_gherkin_name, st.none() | _gherkin_name, _gherkin_name, st.none() | _name))
def test_different_logical_names_give_different_ids(a, b) -> None:
    def norm(t: tuple[str, str | None, str, str | None]) -> tuple[Any, ...]:
        rule = t[1].strip() if t[1] is not None and t[1].strip() else None
        return (t[0].strip(), rule, t[2].strip(), t[3])

    assume(norm(a) != norm(b))
    assume("@scenario_" not in a[2] + b[2])
    assert stable_id(*a) != stable_id(*b)


def test_a_double_colon_in_a_name_does_not_collide_with_a_rule() -> None:
    assert stable_id("A::B", None, "C") != stable_id("A", "B", "C")


# -- JSON round trip ---------------------------------------------------------------------------------
_text = st.text(max_size=12)  # any unicode, including quotes, newlines and surrogate-free emoji
_json = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | _text
                     | st.floats(allow_nan=False, allow_infinity=False, width=32),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
                     max_leaves=6)
_check = st.builds(CheckRecord, type=st.sampled_from(["satisfy", "match", "call_tool"]),
                   mode=st.sampled_from(["should", "must"]), criterion=_text,
                   status=st.sampled_from(["passed", "failed", "inconclusive", "skipped"]),
                   passed=st.none() | st.booleans(), turn=st.none() | st.integers(1, 9), details=_text,
                   data=st.dictionaries(_text, _json, max_size=2))
_turn = st.builds(TurnRecord, number=st.integers(1, 9), user=_text, agent=_text,
                  tool_calls=st.lists(st.builds(ToolCallRecord, name=_name, arguments=st.dictionaries(_text, _json, max_size=2),
                                                result=_json), max_size=2),
                  topic=st.none() | _name, duration_s=st.floats(0, 100, allow_nan=False))


@st.composite
def _results(draw: st.DrawFn) -> ScenarioResult:
    name = draw(_gherkin_name)
    passed = draw(st.booleans())
    skipped = not passed and draw(st.booleans())
    return ScenarioResult(
        id=stable_id("Feature", None, name), name=name, nodeid=draw(_text), feature="Feature",
        feature_file=draw(_text), rule=draw(st.none() | _text), record_id=draw(st.none() | _name),
        iteration=draw(st.integers(1, 3)), passed=passed, skipped=skipped, skip_reason="no key" if skipped else None,
        turns=draw(st.integers(0, 9)), topics_visited=draw(st.lists(_name, max_size=3)),
        topic_path=draw(st.lists(_name, max_size=4)), backtracked=draw(st.booleans()),
        failure_type=None if passed or skipped else draw(st.sampled_from(["assertion", "max_turns", "timeout", "error"])),
        failure_message=None if passed else draw(_text),
        evaluations=draw(st.lists(_check, max_size=3)), expectations=draw(st.lists(_check, max_size=2)),
        transcript=draw(st.lists(_turn, max_size=2)),
        usage=draw(st.dictionaries(st.sampled_from(["judge", "simulator"]),
                                   st.builds(UsageRecord, calls=st.integers(0, 9), input_tokens=st.integers(0, 10**6),
                                             output_tokens=st.integers(0, 10**6)), max_size=2)),
        duration_s=draw(st.floats(0, 1000, allow_nan=False)),
        criteria=draw(st.dictionaries(_name, _text, max_size=3)),
        topics=draw(st.lists(st.builds(TopicRecord, name=_name, characteristic=_text,
                                       successors=st.lists(_name, max_size=2)), max_size=3)),
        simulator=draw(st.none() | st.dictionaries(_name, _json, max_size=2)),
        agent_metadata=draw(st.dictionaries(_text, _json, max_size=2)),
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_results(), min_size=1, max_size=4), _text)
def test_scenario_results_survive_the_json_round_trip(results, name) -> None:
    info = ExperimentInfo(id="exp_proper", timestamp="2025-01-01T00:00:00Z", name=name or None, tags=[name])
    with tempfile.TemporaryDirectory() as tmp:
        path = write_document(build_document(info, results), Path(tmp))
        loaded_info, loaded, raw = load_document(path)
        _, lean = read_document(path, lean=True)
        json.loads(path.read_text(encoding="utf-8"))  # plain JSON for any other reader
    assert loaded == results
    assert loaded_info.id == info.id and loaded_info.name == info.name and loaded_info.tags == info.tags
    # the lean index that comparisons read agrees with the full entries
    assert lean.get("lean") is True
    keys = ("id", "name", "iteration", "passed", "skipped", "turns", "failure_type")
    assert [{k: s[k] for k in keys} for s in lean["scenario_results"]] == \
           [{k: s.get(k) for k in keys} for s in raw["scenario_results"]]
    assert [s["evaluations"]["total"] for s in lean["scenario_results"]] == \
           [s["evaluations"]["total"] for s in raw["scenario_results"]]
