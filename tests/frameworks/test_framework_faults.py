"""``fabtest faults`` on framework agents (issue 40 item 2): a pair the agent cannot have injected
(a handoff, a tool without ``@fabtest.tool``) is ``not injectable`` and left out of the coverage,
never counted as the agent breaking; an agent none of whose tools a fault reaches is refused at
once, in one line, exit 2."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fabtest.agents import stubs
from fabtest.cli import main
from fabtest.engine.stubbing import not_injectable
from fabtest.experiment.coverage import fault_coverage

from .helpers import require

require("openai_agents")

PLAIN = '''
from agents import Agent, function_tool


@function_tool
def quote_tea(item: str) -> str:
    """A price."""
    return "3 EUR"


agent = Agent(name="shop", instructions="Sell tea.", tools=[quote_tea])
'''


def _project(root: Path, agent_table: str) -> None:
    (root / "pyproject.toml").write_text(textwrap.dedent(f'''
        [tool.pytest.ini_options]
        pythonpath = ["."]

        [tool.fabtest]
        results_dir = "results"

        [tool.fabtest.agents.shop]
        {agent_table}
        '''), encoding="utf-8")
    (root / "features").mkdir()


def test_an_agent_none_of_whose_tools_is_decorated_is_refused_before_any_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(stubs, "_REGISTRY", {})
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "plain_shop.py").write_text(PLAIN, encoding="utf-8")
    _project(tmp_path, 'openai_agents = "plain_shop:agent"')
    monkeypatch.chdir(tmp_path)
    assert main(["faults", "features"]) == 2
    captured = capsys.readouterr()
    assert not captured.out and captured.err.count("\n") == 1
    assert captured.err.startswith("fabtest faults: no fault can be injected: [tool.fabtest.agents] shop "
                                   "(OpenAIAgentsAgent) has no tool a fault reaches (none of its tools is decorated "
                                   "with @fabtest.tool)")
    assert captured.err.endswith("; nothing run (an agent that asks for approvals can still have them decided: "
                                 "--faults approve,reject)\n") and not (tmp_path / "results").exists()


def test_a_stub_the_agent_refused_is_not_injectable_and_out_of_the_coverage() -> None:
    refused = ('f.feature:3: --fabtest-fault transfer_to_faq_agent=error: no tool "transfer_to_faq_agent" to stub: '
               'the agent has "update_seat", "faq_lookup_tool"')
    assert not_injectable(refused) == ('"transfer_to_faq_agent" is not a tool a fault reaches (a handoff, or a tool '
                                       'without @fabtest.tool); the agent\'s are "update_seat", "faq_lookup_tool"')
    assert not_injectable("f.feature:9: And the response must match ...") is None
    rows = [{"tool": "update_seat", "fault": "error", "outcome": "held"},
            {"tool": "transfer_to_faq_agent", "fault": "error", "outcome": "not injectable"}]
    assert fault_coverage(rows) == {"declared": 1, "held": ["update_seat=error"], "broke": [], "rate": 1.0,
                                    "not_injectable": ["transfer_to_faq_agent=error"]}
