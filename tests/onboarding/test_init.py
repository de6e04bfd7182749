"""``fabtest init`` end to end, as a new user runs it: init in a fresh directory, then ``pytest features/``
green offline (no key), with ``--agent`` for an existing agent, into an existing pyproject, and refusing
to overwrite anything (issue 18, "your own project green in five minutes").
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

_KEYS = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "FABTEST_AGENT",
         "FABTEST_RESULTS_DIR", "FABTEST_JUDGE_PROVIDER", "FABTEST_SIMULATOR_PROVIDER", "PYTHONPATH")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _KEYS}


def _init(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabtest.cli", "init", *args], cwd=root, env=_env(),
                          capture_output=True, text=True, timeout=120)


def _pytest(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "features/", "-p", "no:randomly", "-p", "no:cacheprovider"],
                          cwd=root, env=_env(), capture_output=True, text=True, timeout=300)


def test_init_in_an_empty_directory_then_pytest_is_green_offline(tmp_path: Path) -> None:
    done = _init(tmp_path)
    assert done.returncode == 0, done.stderr
    for name in ("pyproject.toml", "my_agent.py", "features/getting_started.feature", "features/offline_llm.yaml"):
        assert (tmp_path / name).is_file(), name
        assert name in done.stdout  # it says what it wrote
    assert "pytest features/" in done.stdout and "export GEMINI_API_KEY=" in done.stdout  # and what comes next
    assert "  fabtest view " in done.stdout  # ending where the runs are seen (issue 31)
    table = tomllib.loads((tmp_path / "pyproject.toml").read_text())["tool"]["fabtest"]
    assert table["agent"] == "my_agent:agent"

    run = _pytest(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout and "skipped" not in run.stdout.splitlines()[-1]
    assert "scripted" in run.stdout  # the summary says the simulated user and judge were the offline script


def test_init_with_an_existing_agent_and_pyproject(tmp_path: Path) -> None:
    original = '[project]\nname = "rebooking"\nversion = "0.1"\n'
    (tmp_path / "pyproject.toml").write_text(original, encoding="utf-8")
    (tmp_path / "airline.py").write_text("def assistant(messages):\n    return 'Your flight is rebooked.'\n",
                                         encoding="utf-8")
    done = _init(tmp_path, "--agent", "airline:assistant")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "my_agent.py").exists()
    text = (tmp_path / "pyproject.toml").read_text()
    assert text.startswith(original)  # the project's own table is kept as it was
    assert tomllib.loads(text)["tool"]["fabtest"]["agent"] == "airline:assistant"
    run = _pytest(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout


_LANGGRAPH_SHOP = '''
from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph


def make_graph():
    """A LangGraph factory, as an async telecom shop's code exposes it: a function building the graph."""
    builder = StateGraph(MessagesState)
    builder.add_node("shop", lambda state: {"messages": [AIMessage("Hello! I can help you pick a phone plan.")]})
    builder.add_edge(START, "shop")
    return builder.compile()
'''


def test_init_wires_a_langgraph_factory_as_a_framework_table(tmp_path: Path) -> None:
    """A LangGraph factory is not a plain agent (it would be called with the messages): init writes
    ``agent = { langgraph = "..." }`` and the first run is green through the LangGraph adapter (issue 31)."""
    pytest.importorskip("langgraph")
    (tmp_path / "shop.py").write_text(_LANGGRAPH_SHOP, encoding="utf-8")
    done = _init(tmp_path, "--agent", "shop:make_graph")
    assert done.returncode == 0, done.stderr
    assert "the agent as a langgraph table" in done.stdout
    assert tomllib.loads((tmp_path / "pyproject.toml").read_text())["tool"]["fabtest"]["agent"] == {
        "langgraph": "shop:make_graph"}
    run = _pytest(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout


def test_init_refuses_an_agent_that_does_not_import_and_writes_nothing(tmp_path: Path) -> None:
    done = _init(tmp_path, "--agent", "no_such_module:bot")
    assert done.returncode == 2
    assert "--agent" in done.stderr and "no_such_module:bot" in done.stderr and "does not import" in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("existing", "named"), [
    ({"features/getting_started.feature": "Feature: mine\n"}, "getting_started.feature"),
    ({"pyproject.toml": "[tool.fabtest]\nagent = 'x:y'\n"}, "pyproject.toml"),
    ({"my_agent.py": "# mine\n"}, "my_agent.py"),
])
def test_init_never_overwrites(tmp_path: Path, existing: dict[str, str], named: str) -> None:
    for name, text in existing.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    before = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    done = _init(tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "nothing was written" in lines[0], done.stderr
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == before
    for name, text in existing.items():
        assert (tmp_path / name).read_text() == text
