"""Bad agent responses: every agent in ``corpus/agent/badbots.py`` fails its own scenario as an
``error`` whose one-line message names the field (or hook) and what came instead; the good
scenarios between them pass and nothing crashes the session. One pytest run holds every case."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.child import child_env

CORPUS = Path(__file__).parent / "corpus" / "agent"

# agent in badbots.py -> texts its scenario's failure message must hold
CASES: dict[str, tuple[str, ...]] = {
    "returns_int": ("the agent returned int (42)", "expected str or AgentResponse (or a mapping with 'text'"),
    "returns_none": ("the agent returned NoneType",),
    "returns_list": ("the agent returned list",),
    "returns_bytes": ("the agent returned bytes",),
    "returns_dict_without_text": ("the agent returned dict", "a mapping needs a 'text' key; it has 'reply'"),
    "text_is_int": ("text: expected a string, got int (3)",),
    "text_is_none": ("text: expected a string, got NoneType",),
    "dict_text_is_list": ("text: expected a string, got list",),
    "tool_calls_is_str": ("tool_calls: expected a list of tool calls, got str ('notalist')",),
    "tool_calls_is_dict": ("tool_calls: expected a list of tool calls, got dict",),
    "tool_calls_is_int": ("tool_calls: expected a list of tool calls, got int",),
    "tool_call_is_int": ("tool_calls[0]: expected a ToolCall or a mapping", "got int (5)"),
    "tool_call_is_str": ("tool_calls[0]: expected a ToolCall or a mapping", "got str"),
    "tool_call_name_int": ("tool_calls[0].name", "got int (5)"),
    "tool_call_name_empty": ("tool_calls[0].name", "at least 1 character"),
    "tool_call_name_missing": ("tool_calls[0].name", "got NoneType"),
    "tool_call_arguments_list": ("tool_calls[0].arguments", "valid dictionary", "got list"),
    "tool_call_arguments_bad_json": ("tool_calls[0].arguments: not valid JSON",),
    "tool_call_args_json_list": ("tool_calls[0].arguments", "got list"),
    "openai_arguments_bad_json": ("tool_calls[0].function.arguments: not valid JSON",),
    "openai_name_missing": ("tool_calls[0].name", "got NoneType"),
    "tool_call_metadata_str": ("tool_calls[0].metadata", "got str ('fast')"),
    "tool_call_metadata_list": ("tool_calls[0].metadata", "got list"),
    "second_tool_call_bad": ("tool_calls[1].name", "got NoneType"),
    "metadata_is_str": ("metadata: expected a mapping, got str ('model-x')",),
    "metadata_is_list": ("metadata: expected a mapping, got list",),
    "metadata_is_circular": ("metadata: not JSON data",),
    "arguments_circular": ("tool_calls[0].arguments: not JSON data",),
    "reports_garbage": ("on_tool_call(call #1): expected a ToolCall or a mapping", "got int (42)"),
    "reports_nameless": ("on_tool_call(call #1).name", "got NoneType"),
    "MetadataReturnsStr": ("metadata(): expected a mapping, got str ('v1')",),
    "MetadataRaises": ("the agent's metadata() raised RuntimeError: metadata exploded",),
    "MetadataNotJson": ("metadata(): not JSON data",),
    "exits": ("the agent raised SystemExit: 3",),
    "factory_raises": ("the agent factory raised LookupError: no tenant",),
    "factory_returns_int": ("the agent factory returned int, which has no chat() or respond() method",),
}


def _project(root: Path) -> None:
    shutil.copy(CORPUS / "badbots.py", root / "badbots.py")
    (root / "goodbot.py").write_text("def build(context):\n    return lambda messages: 'hello'\n", encoding="utf-8")
    agents = "\n".join(f'{name} = "badbots:{name}"' for name in CASES)
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\npythonpath = ["."]\n\n[tool.fabtest]\nagent = "goodbot:build"\n'
        f'results_dir = "results"\n\n[tool.fabtest.agents]\n{agents}\n', encoding="utf-8")
    scenarios = []
    for name in CASES:
        scenarios.append(f'  Scenario: Bad {name}\n    Given the agent "{name}"\n    When the user says "hi"\n')
        scenarios.append(f'  Scenario: Good after {name}\n    When the user says "hi"\n'
                         '    Then the response must match "hello"\n')
    (root / "features").mkdir()
    (root / "features" / "bad_agents.feature").write_text("Feature: Bad agents\n" + "\n".join(scenarios),
                                                         encoding="utf-8")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("bad_agents")
    _project(root)
    env = child_env("FABTEST_", "GEMINI_", "GOOGLE_")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "features", "--fabtest-experiment-id", "exp_bad_agents"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "INTERNALERROR" not in output, output
    doc = json.loads((root / "results" / "exp_bad_agents.json").read_text(encoding="utf-8"))
    return output, {s["name"]: s for s in doc["scenario_results"]}


@pytest.mark.parametrize("agent", sorted(CASES))
def test_bad_agent_response_is_its_scenarios_error_naming_the_field(run: tuple[str, dict[str, Any]], agent: str) -> None:
    output, scenarios = run
    bad = scenarios[f"Bad {agent}"]
    assert (bad["passed"], bad["failure_type"]) == (False, "error"), bad["failure_message"]
    for text in CASES[agent]:
        assert text in bad["failure_message"], bad["failure_message"]
    assert "Traceback" not in output
    assert scenarios[f"Good after {agent}"]["passed"], scenarios[f"Good after {agent}"]["failure_message"]
