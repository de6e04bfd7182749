"""docs/reference/experiment.schema.json is the readers' own model, kept in step, and real files pass it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from fabtest.experiment.validate import document_problem, json_schema

PUBLISHED = Path(__file__).resolve().parents[2] / "docs" / "reference" / "experiment.schema.json"


def test_the_published_schema_is_the_one_the_readers_use() -> None:
    published = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    assert published == json_schema(), (
        "docs/reference/experiment.schema.json is stale: regenerate it with\n"
        "python -c \"import json; from fabtest.experiment.validate import json_schema; "
        "print(json.dumps(json_schema(), indent=2, sort_keys=True))\" > docs/reference/experiment.schema.json")
    jsonschema.Draft202012Validator.check_schema(published)


def test_a_real_experiment_file_validates(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\npythonpath = ["."]\n\n'
                                         '[tool.fabtest]\nagent = "bot:build"\nresults_dir = "results"\n')
    pytester.makepyfile(bot="def build(context):\n    return lambda messages: 'Hello, which city?'\n")
    pytester.makefile(".feature", hello='Feature: F\n  Scenario: Hi\n    When the user says "hi"\n'
                                        '    Then the response must match "(?i)city"\n'
                                        '  Scenario: Bye\n    When the user says "bye"\n'
                                        '    Then the response must match "nothing like this"\n')
    pytester.runpytest("-p", "no:randomly", "--fabtest-no-preflight", "--fabtest-iterations", "2").assert_outcomes(
        passed=2, failed=2)
    [path] = (pytester.path / "results").glob("exp_*.json")
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, json.loads(PUBLISHED.read_text()))
    assert document_problem(doc) is None


@pytest.mark.parametrize("broken", [
    {"format_version": 99},
    {"experiment": {"id": "has a space"}},
    {"summary": {"total_scenarios": "5"}},
])
def test_what_the_schema_refuses_fabtest_refuses_too(broken: dict, tmp_path: Path) -> None:
    doc = {"format_version": 1, "experiment": {"id": "exp_1"}, "summary": {}, "scenario_results": []}
    for key, value in broken.items():
        doc[key] = {**doc[key], **value} if isinstance(value, dict) else value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, json.loads(PUBLISHED.read_text()))
    assert document_problem(doc) is not None
