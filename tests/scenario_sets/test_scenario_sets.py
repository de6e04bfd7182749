"""Scenario sets: scenarios/NAME.json|yaml|yml records and their errors."""

from __future__ import annotations

import json
import re

import pytest

from fabtest.config.scenario_sets import ScenarioRecord, ScenarioSetError, load_scenario_set, record_hash

RECORDS = [
    {"id": "berlin-10", "name": "Berlin, ten", "goal": "Book a room for 10 in Berlin",
     "persona": "A busy office manager", "context": {"date": "12 March", "budget": 500},
     "verification": {"call_tool": "book_venue", "reached_topic": "booking", "max_turns": 8}},
    {"id": 2, "goal": "Find a venue in Munich", "context": [{"fact": "size", "value": "15"}]},
]


def write(tmp_path, name, data):
    d = tmp_path / "scenarios"
    d.mkdir(exist_ok=True)
    path = d / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_load_json_list(tmp_path):
    write(tmp_path, "venues.json", RECORDS)
    records = load_scenario_set("venues", tmp_path)
    assert [r.id for r in records] == ["berlin-10", "2"]
    first, second = records
    assert isinstance(first, ScenarioRecord)
    assert first.name == "Berlin, ten" and first.persona == "A busy office manager"
    assert first.context == {"date": "12 March", "budget": 500}
    assert first.verification == {"call_tool": "book_venue", "reached_topic": "booking", "max_turns": 8}
    assert second.name == "2" and second.persona is None and second.context == {"size": "15"}
    assert second.verification == {} and second.index == 1 and second.set_name == "venues"


def test_load_yaml_with_scenarios_key(tmp_path):
    write(tmp_path, "venues.yaml", "scenarios:\n  - id: a\n    goal: Book\n  - id: b\n    goal: Cancel\n")
    assert [r.goal for r in load_scenario_set("venues", tmp_path)] == ["Book", "Cancel"]


def test_yml_and_base_dir_being_the_scenarios_dir(tmp_path):
    write(tmp_path, "s.yml", "- goal: only\n")
    (rec,) = load_scenario_set("s", tmp_path / "scenarios")
    assert rec.id == "1" and rec.explicit_id is False


def test_missing_file_lists_tried_paths(tmp_path):
    with pytest.raises(ScenarioSetError) as info:
        load_scenario_set("nope", tmp_path)
    msg = str(info.value)
    assert msg.startswith("scenario set 'nope' not found; tried ")
    for ext in ("json", "yaml", "yml"):
        assert str(tmp_path / "scenarios" / f"nope.{ext}") in msg
    assert "\n" not in msg


@pytest.mark.parametrize("data,message", [
    ([{"id": "a", "goal": "x"}, {"id": "a", "goal": "y"}], "record 2: duplicate id 'a' (also record 1)"),
    ([{"id": 1, "goal": "x"}, {"id": "1", "goal": "y"}], "record 2: duplicate id '1' (also record 1)"),
    ([{"id": "a", "goal": "x"}, {"id": "b"}], "record 2 (id 'b') has no goal"),
    ([{"name": "n"}], "record 1 has no goal"),
    ([{"id": "a", "goal": "  "}], "record 1 (id 'a') has no goal"),
    ([{"id": "a", "goal": ["x"]}], "record 1 (id 'a') goal must be a string"),
    (["just text"], "record 1: expected an object, got a string"),
    ({"records": []}, 'expected a list of records or {"scenarios": [...]}'),
    ([], "the scenario set has no records"),
    ({"scenarios": "not a list"}, "expected a list of records, got a string"),
    ([{"id": "a", "goal": "g", "context": 5}], "record 1 (id 'a'): context must be an object or a list of {fact, value}, got int"),
    ([{"id": "a", "goal": "g", "context": [{"fact": "x"}]}], "record 1 (id 'a'): context[0] must be {\"fact\": ..., \"value\": ...}"),
    ([{"id": "a", "goal": "g", "verification": {"max_turns": 0}}], "record 1 (id 'a'): verification.max_turns must be a positive integer, got 0"),
    ([{"id": "a", "goal": "g", "verification": {"call_tool": 3}}], "record 1 (id 'a'): verification.call_tool must be a string, got 3"),
    ([{"id": "a", "goal": "g", "verification": []}], "record 1 (id 'a'): verification must be an object, got a list"),
    ([{"id": "a", "goal": "g", "golas": 1}], "record 1 (id 'a'): unexpected key 'golas'"),
])
def test_malformed_records(tmp_path, data, message):
    path = write(tmp_path, "bad.json", data)
    with pytest.raises(ScenarioSetError) as info:
        load_scenario_set("bad", tmp_path)
    assert str(info.value) == f"{path}: {message}"


def test_malformed_yaml_and_json_name_the_line(tmp_path):
    path = write(tmp_path, "y.yaml", "- id: a\n  goal: [unclosed\n- id: b\n")
    with pytest.raises(ScenarioSetError, match=rf"^{re.escape(str(path))}: line \d+: invalid YAML: "):
        load_scenario_set("y", tmp_path)
    path = write(tmp_path, "j.json", '[\n {"id": "a",}\n]')
    with pytest.raises(ScenarioSetError, match=rf"^{re.escape(str(path))}: line 2: invalid JSON: "):
        load_scenario_set("j", tmp_path)


def test_bad_set_name(tmp_path):
    with pytest.raises(ScenarioSetError, match="not a plain file name"):
        load_scenario_set("../etc", tmp_path)


def test_record_hash_is_stable_and_id_based(tmp_path):
    write(tmp_path, "a.json", RECORDS)
    rec = load_scenario_set("a", tmp_path)[0]
    h = record_hash(rec)
    assert re.fullmatch(r"[0-9a-f]{8}", h) and rec.hash == h
    write(tmp_path, "a.json", [{**RECORDS[0], "goal": "edited goal"}, RECORDS[1]])
    assert record_hash(load_scenario_set("a", tmp_path)[0]) == h  # same id -> same hash
    assert record_hash({"id": "berlin-10", "goal": "whatever"}) == h
    assert record_hash({"id": "other", "goal": "x"}) != h


def test_record_hash_without_id_uses_content(tmp_path):
    write(tmp_path, "b.yaml", "- goal: one\n- goal: two\n")
    one, two = load_scenario_set("b", tmp_path)
    assert record_hash(one) != record_hash(two)
    assert record_hash(one) == record_hash({"goal": "one"})
