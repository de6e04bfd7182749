"""The run exits within seconds of its summary whatever an agent left running (issue 30, hangs at
exit): an async agent's executor thread still blocked, a LangGraph node that blocks synchronously
past the agent timeout, a plain non-daemon thread. fabtest owns none of them and waits on none."""

from __future__ import annotations

import time

import pytest

PYPROJECT = '''
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.fabtest]
results_dir = "results"
agent_timeout = 2
agent = {{{agent}}}
'''

AGENTS = {
    "async executor": ('factory = "stuck:build"', '''
import asyncio, threading
from fabtest import AgentResponse


class Stuck:
    async def chat(self, messages):
        # fire and forget: the executor's worker blocks for ever
        asyncio.get_running_loop().run_in_executor(None, threading.Event().wait)
        return AgentResponse(text="hello")


def build(context):
    return Stuck()
'''),
    "plain thread": ('factory = "stuck:build"', '''
import threading
from fabtest import AgentResponse


class Stuck:
    def chat(self, messages):
        threading.Thread(target=threading.Event().wait, name="agent-poller", daemon=False).start()
        return AgentResponse(text="hello")


def build(context):
    return Stuck()
'''),
    "langgraph sync node": ('langgraph = "stuck:graph"', '''
import threading
from langgraph.graph import END, START, MessagesState, StateGraph


def node(state):
    threading.Event().wait()  # blocks synchronously, past the agent timeout
    return {"messages": []}


builder = StateGraph(MessagesState)
builder.add_node("node", node)
builder.add_edge(START, "node")
builder.add_edge("node", END)
graph = builder.compile()
'''),
}


@pytest.mark.parametrize("case", AGENTS)
def test_the_run_exits_soon_after_its_summary_whatever_the_agent_left_running(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    if case.startswith("langgraph"):
        pytest.importorskip("langgraph")
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FABTEST_EXIT_GRACE_S", "1")
    table, module = AGENTS[case]
    pytester.makefile(".toml", pyproject=PYPROJECT.format(agent=table))
    pytester.makepyfile(stuck=module)
    pytester.makefile(".feature", stuck='Feature: Stuck\n  Scenario: hi\n    When the user says "hi"\n'
                                        '    Then the response must match "hello"\n')
    started = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider",
                                           "--fabtest-experiment-id", "exp_stuck", "--fabtest-no-preflight",
                                           timeout=60)
    elapsed = time.monotonic() - started
    output = result.stdout.str() + result.stderr.str()
    expected = 1 if case.startswith("langgraph") else 0  # the blocked node is the scenario's timeout
    assert result.ret == expected, output
    assert "Results saved to: results/exp_stuck.json" in output
    assert "fabtest: exiting without waiting for" in output and "fabtest does not own them" in output
    assert elapsed < 30, f"took {elapsed:.1f}s"



def test_the_process_ends_with_the_status_of_the_last_session() -> None:
    """An outer session (fabtest dormant) around an in-process run that armed the guard: the process
    ends with the outer status, not the inner one's, even when the guard has to end it."""
    import os
    import subprocess
    import sys

    script = ("import threading\nfrom fabtest._internal import exit_guard\n"
              "exit_guard.arm(0)\nexit_guard.update(3)\n"
              "threading.Thread(target=threading.Event().wait, daemon=False).start()\n")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "FABTEST_EXIT_GRACE_S": "1"})
    assert done.returncode == 3, done.stderr
    assert "fabtest: exiting without waiting for 1 thread(s)" in done.stderr
    assert time.monotonic() - started < 20
