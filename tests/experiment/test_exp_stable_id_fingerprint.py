import re

from hypothesis import given, settings
from hypothesis import strategies as st

from support.experiments import CRITERIA, TOPICS, make_result
from fabtest.experiment.fingerprint import (
    config_hash,
    criteria_hash,
    experiment_fingerprints,
    topic_graph_hash,
    topic_order,
)
from fabtest.experiment.model import TopicRecord
from fabtest.experiment.stable_id import canonical_path, stable_id


def test_stable_id_format_and_independence_from_file_and_order():
    sid = stable_id("Venue booking", None, "Book a room")
    assert re.fullmatch(r"example:[0-9a-f]{12}", sid)
    a = make_result("Book a room").model_copy(update={"feature_file": "features/a.feature", "nodeid": "x::1"})
    b = make_result("Book a room").model_copy(update={"feature_file": "moved/b.feature", "nodeid": "y::99"})
    assert a.id == b.id == sid
    assert stable_id("  Venue booking ", None, "Book a room  ") == sid


def test_stable_id_distinguishes_rule_and_records():
    assert canonical_path("F", "R", "S") == "F::R::S"
    assert canonical_path("F", None, "S") == "F::S"
    assert canonical_path("F", None, "S", "rec1").startswith("F::S@scenario_")
    ids = {stable_id("F", None, "S"), stable_id("F", "R", "S"), stable_id("F", None, "S", "r1"), stable_id("F", None, "S", "r2")}
    assert len(ids) == 4
    assert stable_id("F", None, "S", "r1") == stable_id("F", None, "S", "r1")


_names = st.text(alphabet="abcdefghij_", min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(_names, st.text(max_size=20), min_size=1, max_size=8), st.randoms())
def test_criteria_hash_is_order_invariant(criteria, rnd):
    items = list(criteria.items())
    rnd.shuffle(items)
    assert criteria_hash(dict(items)) == criteria_hash(criteria)
    assert criteria_hash(criteria).startswith("sha256:")


@st.composite
def _graphs(draw):
    names = draw(st.lists(_names, min_size=1, max_size=7, unique=True))
    return [
        TopicRecord(name=n, characteristic=draw(st.text(max_size=10)), successors=draw(st.lists(st.sampled_from(names), max_size=3, unique=True)))
        for n in names
    ]


@settings(max_examples=80, deadline=None)
@given(_graphs(), st.randoms())
def test_topic_hash_is_order_invariant_even_with_cycles(topics, rnd):
    shuffled = [t.model_copy(update={"successors": rnd.sample(t.successors, len(t.successors))}) for t in topics]
    rnd.shuffle(shuffled)
    assert topic_graph_hash(shuffled) == topic_graph_hash(topics)
    assert [t.name for t in topic_order(shuffled)] == [t.name for t in topic_order(topics)]
    assert sorted(t.name for t in topic_order(topics)) == sorted(t.name for t in topics)


def test_topic_order_is_topological_with_alphabetical_ties():
    topics = [
        TopicRecord(name="z_start", successors=["b", "a"]),
        TopicRecord(name="a", successors=["end"]),
        TopicRecord(name="b", successors=["end"]),
        TopicRecord(name="end"),
    ]
    assert [t.name for t in topic_order(topics)] == ["z_start", "a", "b", "end"]
    cycle = [TopicRecord(name="y", successors=["x"]), TopicRecord(name="x", successors=["y"])]
    assert [t.name for t in topic_order(cycle)] == ["x", "y"]


def test_renaming_or_rewording_a_criterion_changes_the_hash():
    base = criteria_hash(CRITERIA)
    renamed = {("kind" if k == "friendly" else k): v for k, v in CRITERIA.items()}
    reworded = {**CRITERIA, "friendly": "The agent is warm"}
    assert len({base, criteria_hash(renamed), criteria_hash(reworded)}) == 3
    # no concatenation collisions
    assert criteria_hash({"ab": "c"}) != criteria_hash({"a": "bc"})


def test_config_hash_covers_simulator_and_result_order():
    c, t = criteria_hash(CRITERIA), topic_graph_hash(TOPICS)
    assert config_hash(c, t, {"model": "a", "x": 1}) == config_hash(c, t, {"x": 1, "model": "a"})
    assert config_hash(c, t, {"model": "a"}) != config_hash(c, t, {"model": "b"})
    results = [make_result("a", simulator={"goal": "g1"}), make_result("b", criteria={"extra": "d"}), make_result("c", topics=list(reversed(TOPICS)))]
    assert experiment_fingerprints(results) == experiment_fingerprints(list(reversed(results)))
    assert experiment_fingerprints(results)[0] != experiment_fingerprints(results[1:])[0]
