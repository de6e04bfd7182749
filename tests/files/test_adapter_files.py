"""Files through the protocol adapters (issue 39), in-process: OpenAI chat content parts, the HTTP JSON
body (default and renamed fields), the built-in Gemini agent's inline data, a CLI's working
directory, and ACP's refusal naming the adapter."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from builtin_agent.fake_openai import FakeOpenAI, message

from fabtest.agents.cli_agent import CliAgent
from fabtest.agents.http import HttpAgent
from fabtest.agents.openai_chat import OpenAIChatAgent
from fabtest.agents.registry import make_agent
from fabtest.conversation import Attachment, Message
from fabtest.errors import UsageError
from fabtest.testing import FakeGemini

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
LAMP = Attachment.from_bytes(PNG, name="lamp.png")
PDF = Attachment.from_bytes(b"%PDF-1.4 not really", name="policy.pdf")
ASKED = [Message("user", "first"), Message("agent", "ok"), Message("user", "covered?", (LAMP, PDF))]


def test_openai_chat_sends_content_parts_and_reads_reply_parts() -> None:
    reply = [{"type": "text", "text": "here"},
             {"type": "file", "file": {"filename": "claim.pdf", "file_data": "data:application/pdf;base64,JVBERg=="}}]
    with FakeOpenAI(lambda body: (200, message(reply))) as server:  # type: ignore[arg-type]
        agent = OpenAIChatAgent(server.base_url)
        response = agent.chat(ASKED)
        agent.close()
        sent = server.requests[-1]["messages"]
    assert sent[0] == {"role": "user", "content": "first"}  # a message without files stays a string
    parts = sent[-1]["content"]
    assert parts[0] == {"type": "text", "text": "covered?"}
    assert parts[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}
    assert parts[2]["type"] == "file" and parts[2]["file"]["filename"] == "policy.pdf"
    assert parts[2]["file"]["file_data"].startswith("data:application/pdf;base64,")
    assert response.text == "here"
    [back] = response.attachments
    assert (back.name, back.mime_type, back.data) == ("claim.pdf", "application/pdf", b"%PDF")


def _http(agent: HttpAgent, answer: dict[str, Any]) -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=answer)

    agent._client = httpx.Client(transport=httpx.MockTransport(handle))  # in-process, no socket
    return bodies


def test_http_sends_base64_files_and_reads_files_back_with_configurable_names() -> None:
    agent = HttpAgent("http://agent.test/chat")
    bodies = _http(agent, {"text": "ok", "attachments": [{"name": "a.txt", "mime_type": "text/plain",
                                                          "data": base64.b64encode(b"hi").decode()}]})
    response = agent.chat(ASKED)
    last = bodies[0]["messages"][-1]
    assert last["attachments"][0] == {"name": "lamp.png", "mime_type": "image/png",
                                      "data": base64.b64encode(PNG).decode()}
    assert "attachments" not in bodies[0]["messages"][0]
    assert [(f.name, f.data) for f in response.attachments] == [("a.txt", b"hi")]

    renamed = make_agent({"http": "http://agent.test/chat", "files_field": "files",
                          "file_keys": {"name": "filename", "data": "b64"}}, {}, where="t")
    bodies = _http(renamed, {"text": "ok", "files": [{"filename": "x.png", "b64": base64.b64encode(PNG).decode()}]})
    response = renamed.chat(ASKED)
    assert set(bodies[0]["messages"][-1]["files"][0]) == {"filename", "mime_type", "b64"}
    assert response.attachments[0].mime_type == "image/png"  # guessed from the name when not given
    with pytest.raises(UsageError, match="file_keys"):
        make_agent({"http": "http://agent.test/chat", "file_keys": {"nme": "x"}}, {}, where="t")


def test_builtin_gemini_agent_sends_inline_data(fake: FakeGemini, tmp_path: Path) -> None:
    fake.add_rule(r".", text="a lamp")
    agent = make_agent({"gemini": "gemini-2.5-flash"}, {"agent_name": "helper", "rootdir": str(tmp_path)}, where="t")
    assert agent.chat(ASKED).text == "a lamp"
    parts = fake.requests[-1].contents[-1]["parts"]
    assert parts[0] == {"text": "covered?"}
    assert [base64.b64decode(p["inlineData"]["data"]) for p in parts[1:]] == [PNG, PDF.data]


def test_a_cli_gets_the_files_in_its_working_directory(tmp_path: Path) -> None:
    script = tmp_path / "cli.py"
    script.write_text("import sys, os\nprint(' '.join(f'{p}={os.path.getsize(p)}' for p in sys.argv[1:]))\n")
    agent = CliAgent([sys.executable, str(script), "{files}"], output_format="text", cwd=tmp_path)
    assert agent.chat([ASKED[-1]]).text == f"attachments/lamp.png={len(PNG)} attachments/policy.pdf={len(PDF.data)}"
    assert (tmp_path / "attachments" / "lamp.png").read_bytes() == PNG
    prompt = CliAgent([sys.executable, "-c", "import sys; print(sys.argv[1])", "{prompt}"], output_format="text",
                      cwd=tmp_path)
    assert prompt.chat([ASKED[-1]]).text == "covered? @attachments/lamp.png @attachments/policy.pdf"


def test_acp_refuses_files_naming_the_adapter() -> None:
    from fabtest.agents.file_parts import refuse_files

    refuse_files("acp", ASKED[:2])  # no file: nothing to refuse
    with pytest.raises(UsageError, match="an ACP agent .* cannot be sent files"):
        refuse_files("acp", ASKED)


def test_the_preflight_refuses_files_sent_to_an_acp_agent_naming_step_and_adapter() -> None:
    from fabtest.config.settings import Settings
    from fabtest.engine.preflight import Needs, _fileless_agents

    settings = Settings(agents={"cli": {"acp": ["gemini", "--acp"]}, "bot": "mybot:build"})
    needs = Needs()
    needs.add_scenario([('the agent "cli"', "f.feature:3"), ('the user sends "a.png" with "hi"', "f.feature:4")])
    needs.add_scenario([('the agent "bot"', "f.feature:8"), ('the user sends "a.png" with "hi"', "f.feature:9")])
    [problem] = _fileless_agents(settings, needs)
    assert problem.startswith("f.feature:4: this scenario sends files, but [tool.fabtest.agents] cli is an ACP agent")
