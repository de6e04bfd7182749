"""Loading and validating playbooks: the schema ships with the package and errors are one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabtest.playbook.load import SCHEMA_PATH, Playbook, PlaybookError, load_playbook

SEED = Path("/work/shared/seeds/playbook.schema.json")

STEPS = [{"user_input": "hi", "expected_outcome": "greets"}]
PERSONA = {"initial_user_input": "hello", "context": "You are Ana.", "success_criteria": {"llm_checks": ["done"]}}


def write(tmp_path: Path, data, name="pb.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.mark.skipif(not SEED.exists(), reason="seed schema not present")
def test_shipped_schema_is_the_seed():
    """The seed, plus one optional extension (a step's ``files``, docs/how-to/files.md): every playbook
    the seed accepts is accepted as it was."""
    shipped = json.loads(SCHEMA_PATH.read_text())
    step = shipped["properties"]["steps"]["items"]
    assert step["properties"].pop("files")["items"] == {"type": "string"} and "files" not in step["required"]
    assert shipped == json.loads(SEED.read_text())


def test_steps_playbook_with_defaults(tmp_path):
    pb = load_playbook(write(tmp_path, {"name": "basic", "steps": STEPS}))
    assert isinstance(pb, Playbook)
    assert pb.name == "basic" and pb.timeout == 60 and pb.env == [] and pb.mode == "steps"
    assert pb.steps[0].user_input == "hi" and pb.persona is None and pb.tmpdir is None
    assert pb.source == str(tmp_path / "pb.json")
    assert "source" not in pb.model_dump()


def test_persona_playbook_from_yaml(tmp_path):
    text = """
name: autonomous
agent_model: gemini-2.5-pro
evaluator_model: gemini-2.5-flash
timeout: 30
env: [TOKEN]
tmpdir:
  link_paths: [src, README.md]
persona:
  initial_user_input: "Configure the fabric"
  context: "You know the token ${TOKEN}"
  max_turns: 4
  success_criteria:
    llm_checks: ["summary printed"]
    flow_contains: ["Configuration saved"]
    files_exist: ["fabric.yaml"]
    files_contain: {"fabric.yaml": ["vlan: 100"]}
    tool_calls_contain: {"write_file": ["fabric.yaml"]}
"""
    for suffix in ("pb.yaml", "pb.yml"):
        pb = load_playbook(write(tmp_path, text, suffix))
        assert pb.mode == "persona" and pb.persona.max_turns == 4 and pb.timeout == 30
        assert pb.link_paths == ["src", "README.md"]
        crit = pb.persona.success_criteria
        assert crit.files_contain == {"fabric.yaml": ["vlan: 100"]} and crit.tool_calls_contain == {"write_file": ["fabric.yaml"]}
    defaults = load_playbook(write(tmp_path, {"name": "p", "persona": {**PERSONA, "success_criteria": {}}}))
    assert defaults.persona.max_turns == 10 and defaults.persona.success_criteria.llm_checks == []


BAD = [
    ({"steps": STEPS}, "name: required"),
    ({"name": "x"}, "(top level): needs 'steps' or 'persona'"),
    ({"name": "x", "steps": [STEPS[0], STEPS[0], {"user_input": "a"}]}, "steps[2].expected_outcome: required"),
    ({"name": "x", "steps": [{"expected_outcome": "a"}]}, "steps[0].user_input: required"),
    ({"name": "x", "steps": [{**STEPS[0], "extra": 1}]}, "steps[0].extra: unexpected key"),
    ({"name": "x", "steps": STEPS, "colour": "red"}, "colour: unexpected key"),
    ({"name": "x", "steps": STEPS, "timeout": "soon"}, "timeout: expected integer, got string"),
    ({"name": "x", "steps": STEPS, "timeout": 0}, "timeout: must be >= 1, got 0"),
    ({"name": 3, "steps": STEPS}, "name: expected string, got integer"),
    ({"name": "x", "steps": "hi"}, "steps: expected array, got string"),
    ({"name": "x", "steps": STEPS, "env": ["A", 2]}, "env[1]: expected string, got integer"),
    ({"name": "x", "steps": STEPS, "tmpdir": {"links": []}}, "tmpdir.links: unexpected key"),
    ({"name": "x", "persona": {"context": "c", "success_criteria": {}}},
     "persona.initial_user_input: required (needed when there are no steps)"),
    ({"name": "x", "persona": {"initial_user_input": "i", "success_criteria": {}}}, "persona.context: required"),
    ({"name": "x", "persona": {**PERSONA, "max_turns": 0}}, "persona.max_turns: must be >= 1, got 0"),
    ({"name": "x", "persona": {**PERSONA, "success_criteria": {"files_contain": {"a.txt": "x"}}}},
     'persona.success_criteria.files_contain["a.txt"]: expected array, got string'),
    ({"name": "x", "persona": {**PERSONA, "success_criteria": {"llm_check": []}}},
     "persona.success_criteria.llm_check: unexpected key"),
    ([1, 2], "(top level): expected object, got array"),
    ({"name": "x", "persona": {**PERSONA, "success_criteria": {"tool_calls_contain": ["A100"]}}},
     "persona.success_criteria.tool_calls_contain: expected object, got array (A mapping of tool names to a list "
     "of strings that must be found within their arguments)"),
]


@pytest.mark.parametrize("data,message", BAD, ids=[m for _, m in BAD])
def test_schema_violations_are_one_line(tmp_path, data, message):
    path = write(tmp_path, data)
    with pytest.raises(PlaybookError) as info:
        load_playbook(path)
    assert str(info.value) == f"{path}: {message}"
    assert "\n" not in str(info.value)


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path, "name: x\nsteps:\n  - user_input: [unclosed\n    expected_outcome: y\n", "bad.yaml")
    with pytest.raises(PlaybookError) as info:
        load_playbook(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: line ") and "invalid YAML" in msg and "\n" not in msg


def test_json_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path, '{\n  "name": "x",\n  "steps": [,]\n}')
    with pytest.raises(PlaybookError) as info:
        load_playbook(path)
    assert str(info.value) == f"{path}: line 3: invalid JSON: Expecting value (column 13)"


def test_missing_file_and_bad_extension(tmp_path):
    with pytest.raises(PlaybookError, match=r"nope\.json: file not found$"):
        load_playbook(tmp_path / "nope.json")
    with pytest.raises(PlaybookError, match=r"unsupported playbook file type '.txt'"):
        load_playbook(write(tmp_path, "{}", "pb.txt"))


def test_empty_yaml_file(tmp_path):
    path = write(tmp_path, "", "empty.yaml")
    with pytest.raises(PlaybookError) as info:
        load_playbook(path)
    assert str(info.value) == f"{path}: (top level): expected object, got null"
