"""Lean dependencies: MCP and ACP are extras; using one without it is a one-line error naming the extra
(issue 18, point 5). MCP servers run in their own interpreter, so a server written for mcp 1.x works with
fabtest's mcp 2.x client when its ``command`` names the interpreter that has mcp 1.x.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from fabtest._internal import extras
from fabtest.agents.mcp_tools import parse_mcp_specs
from fabtest.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]


def test_core_dependencies_leave_out_adapters_and_test_tools() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = " ".join(project["dependencies"])
    for name in ("mcp", "agent-client-protocol", "hypothesis", "xdist", "scipy"):
        assert name not in core, name
    extras_table = project["optional-dependencies"]
    assert any(d.startswith("mcp") for d in extras_table["mcp"])
    assert any(d.startswith("agent-client-protocol") for d in extras_table["acp"])
    assert set(extras.EXTRAS) <= set(extras_table)


def _use_realtime() -> None:
    from fabtest.agents.realtime import build_realtime_agent

    build_realtime_agent({"realtime": "wss://voice.example/v1/realtime"}, {}, where="[tool.fabtest.agents.phone]")


def _use_pdf() -> None:
    from fabtest import Attachment
    from fabtest.engine.file_checks import file_text

    file_text(Attachment.from_bytes(b"%PDF-1.4", name="policy.pdf", mime_type="application/pdf"))


def _use_voice() -> None:
    from fabtest.speech.kit import build

    build(tts="espeak")  # the light voice loads; the recogniser's package is missing


def _use_acp() -> None:
    from fabtest.agents.acp import AcpAgent

    AcpAgent(["my-acp-agent"])


def _use_a2a() -> None:
    from fabtest.agents.a2a import A2AAgent

    A2AAgent("http://127.0.0.1:9/")


def _use_ag_ui() -> None:
    from fabtest.agents.ag_ui import AgUiAgent

    AgUiAgent("http://127.0.0.1:9/agent")


#: extra -> the first use of it a project makes (each must fail in one line naming the extra)
USES = {
    "mcp": lambda: parse_mcp_specs([{"command": ["python", "-m", "srv"]}], where="[tool.fabtest.agents.helper]",
                                   root=ROOT),
    "realtime": _use_realtime, "pdf": _use_pdf, "voice": _use_voice, "acp": _use_acp, "a2a": _use_a2a,
    "ag-ui": _use_ag_ui,
}


def test_every_extra_has_a_use_here() -> None:
    assert set(USES) == set(extras.EXTRAS)


@pytest.mark.parametrize("extra", sorted(extras.EXTRAS))
def test_a_missing_extra_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch, extra: str) -> None:
    module = extras.EXTRAS[extra][0]
    real = extras.importlib.util.find_spec
    monkeypatch.setattr(extras.importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    with pytest.raises(UsageError) as caught:
        USES[extra]()
    message = str(caught.value)
    assert "\n" not in message and f"pip install 'pytest-fabtest[{extra}]'" in message


MCP1_SERVER = '''
from mcp.server.fastmcp import FastMCP  # mcp 1.x only (2.x renamed it)

server = FastMCP("one")


@server.tool()
def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key} is 1"


server.run()
'''


@pytest.mark.skipif(not os.environ.get("FABTEST_MCP1_PYTHON"),
                    reason="set FABTEST_MCP1_PYTHON to an interpreter with mcp 1.x installed to run this check")
def test_an_mcp_1x_server_in_its_own_interpreter_works(tmp_path: Path) -> None:
    from fabtest.agents.builtin import build_builtin_agent
    from fabtest.agents.builtin_models import StandInModel
    from fabtest.conversation import Message
    from fabtest.testing import FakeLLM

    (tmp_path / "server.py").write_text(MCP1_SERVER, encoding="utf-8")
    fake = FakeLLM().agent_model([{"call": "lookup", "args": {"key": "alpha"}}, "done"])
    table = {"gemini": "gemini-2.5-flash", "mcp": [{"command": [os.environ["FABTEST_MCP1_PYTHON"], "server.py"]}]}
    agent = build_builtin_agent(table, {"rootdir": str(tmp_path), "fabtest_stand_in_model": StandInModel(fake, True)},
                                where="test")
    try:
        reply = agent.chat([Message("user", "what is alpha?")])
    finally:
        agent.close()
    assert reply.tool_calls[0].name == "lookup" and "alpha is 1" in str(reply.tool_calls[0].result)
