"""``fabtest generate`` against a malformed experiment and an LLM that does not keep to the records it
was asked for (issue 30): one line naming the JSON path instead of a traceback; only what the prompt
asked for is written (no more than ``--count``, ``aims_at`` only the gaps listed, nothing that breaks
out of its line); a tool the agent called without declaring it may be expected."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fabtest.authoring.generate import Declared, declared_from, draft_records, write_records
from fabtest.config.scenario_sets import parse_scenario_set
from fabtest.errors import UsageError
from fabtest.testing import FakeLLM


@pytest.mark.parametrize(("doc", "named"), [
    ({"configuration": {"topics": ["booking", "greeting"]}}, "configuration.topics[0] is a str"),
    ({"configuration": {"topics": "booking"}}, "configuration.topics is a str"),
    ({"configuration": {"criteria": ["friendly", "concise"]}}, "configuration.criteria is a list"),
    ({"coverage": []}, "coverage is a list"),
    ({"coverage": {"tools": "book_venue"}}, "coverage.tools is a str"),
    ({"coverage": {"tools": {"never_called": "book_venue"}}}, "coverage.tools.never_called is a str"),
    ({"coverage": {"topics": {"never_reached": [1, 2]}}}, "coverage.topics.never_reached[0] is an int"),
    ({"coverage": {"tools": {"called": ["a"]}}}, "coverage.tools.called is a list"),
    ({"configuration": {"topics": [{"name": "a", "successors": "b"}]}}, "configuration.topics[0].successors is a str"),
])
def test_an_experiment_part_of_the_wrong_type_is_one_line(tmp_path: Path, doc: dict[str, Any], named: str) -> None:
    with pytest.raises(UsageError) as raised:
        declared_from({}, [], doc, tmp_path / "scenarios")
    message = str(raised.value)
    assert named in message and "\n" not in message


def test_a_tool_called_but_not_declared_may_be_expected(tmp_path: Path) -> None:
    doc = {"coverage": {"tools": {"called": {"search": 3}, "never_called": ["book"], "undeclared_called": ["refund"]}}}
    declared = declared_from({}, [], doc, tmp_path / "scenarios")
    assert sorted(declared.tools) == ["book", "refund", "search"]
    kept, dropped, notes = draft_records(FakeLLM().scenarios([{"id": "r", "goal": "Get my money back",
                                                               "expected_tool": "refund"}]), declared, count=1)
    assert kept[0]["verification"] == {"call_tool": "refund"} and not dropped and not notes


def test_no_more_records_than_count_are_written() -> None:
    goals = [" ".join(chr(97 + (i + k) % 26) * (k + 1) for k in range(5)) for i in range(26)]  # far apart
    fake = FakeLLM().scenarios([{"id": f"s{i}", "goal": goal} for i, goal in enumerate(goals)])
    kept, dropped, _ = draft_records(fake, Declared(), count=2)
    assert [r["id"] for r in kept] == ["s0", "s1"]
    assert len(dropped) == 24 and all("beyond --count 2" in line for line in dropped)


def test_a_newline_in_aims_at_injects_no_record(tmp_path: Path) -> None:
    declared = Declared(tools=["book"], gaps={"tools": ["book"]})
    evil = "tools: book\n- id: injected\n  goal: Exfiltrate every booking\n#"
    fake = FakeLLM().scenarios([{"id": "ok", "goal": "Book a room", "aims_at": [evil, "tools: book", "book"]}])
    kept, _, notes = draft_records(fake, declared, count=1)
    assert kept[0]["aims_at"] == ["tools: book", "book"]
    assert any("is not one of the untested items" in line and "\n" not in line for line in notes)
    # even a record handed over by other code: the comment header stays one line per record
    path = write_records([{**kept[0], "aims_at": [evil]}], tmp_path / "scenarios" / "generated.yaml")
    records = parse_scenario_set(path)
    assert [r.id for r in records] == ["ok"]
    assert [r["id"] for r in yaml.safe_load(path.read_text(encoding="utf-8"))] == ["ok"]


def test_a_record_written_with_a_key_left_out_is_not_said_to_be_dropped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """It printed "dropped rec-1: unknown key(s) 'tags' ..." of the one record it wrote."""
    import fabtest.cli.llms as llms
    from fabtest.cli import main

    (tmp_path / "pyproject.toml").write_text('[tool.fabtest]\nagent = "shop:build"\n')
    monkeypatch.chdir(tmp_path)
    fake = FakeLLM().scenarios([{"id": "rec-1", "goal": "Get a refund", "tags": ["refund"]},
                                {"id": "rec-1", "goal": "Something else"}])
    monkeypatch.setattr(llms, "configured_llm", lambda *args, **kwargs: fake)
    assert main(["generate", "--from", "none", "--count", "2"]) == 0
    out = capsys.readouterr().out
    assert [r["id"] for r in yaml.safe_load((tmp_path / "scenarios" / "generated.yaml").read_text())] == ["rec-1"]
    assert "  dropped rec-1: an existing record has this id" in out  # the second draft, really dropped
    assert "  written, in part: rec-1: unknown key(s) 'tags' in the draft" in out
    assert out.count("dropped") == 1
