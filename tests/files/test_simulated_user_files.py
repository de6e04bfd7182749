"""A simulated user with files (issue 39): the prompt lists them by name, type and size after what the
user knows (captured from the request FakeGemini receives), the answer names the files to attach,
a name the user does not have is asked again, and the chosen files reach the agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fabtest.config.settings import Settings
from fabtest.conversation import AgentResponse, Attachment, Conversation, Turn
from fabtest.engine.attachments import FileRef
from fabtest.engine.scenario import LLMRoles, ScenarioState
from fabtest.engine.simulator import FILES_JSON, Simulator, SimulatorConfig
from fabtest.llm.base import LLMSettings
from fabtest.llm.gemini import GeminiLLM
from fabtest.testing import FakeGemini

RECEIPT = Attachment.from_bytes(b"\xff\xd8\xff" + b"0" * 997, name="receipt.jpg")
INVOICE = Attachment.from_bytes(b"%PDF-1.4", name="invoice.pdf")


def _llm(fake: FakeGemini) -> GeminiLLM:
    return GeminiLLM(LLMSettings(model="gemini-2.5-flash", max_retries=0, base_url=fake.base_url), api_key="k")


def test_the_prompt_lists_the_files_and_the_answer_names_which_to_attach() -> None:
    answers = iter([{"thinking": "", "status": "continue", "message": "here", "files": ["bank.pdf"]},
                    {"thinking": "asked for it", "status": "continue", "message": "here it is",
                     "files": ["receipt.jpg"]}])
    with FakeGemini(handler=lambda request: next(answers)) as fake:
        simulator = Simulator(_llm(fake), SimulatorConfig(goal="get a refund", facts={"order": "A-1"},
                                                          files=("receipt.jpg", "invoice.pdf")),
                              files={"receipt.jpg": RECEIPT, "invoice.pdf": INVOICE})
        result = simulator.next_message(Conversation(), opening=True)
        first, retry = fake.requests
    assert result.text == "here it is" and result.files == ("receipt.jpg",)
    prompt = first.prompt
    knows, files, rules = prompt.index("WHAT YOU KNOW"), prompt.index("YOUR FILES"), prompt.index("\nRULES\n")
    assert knows < files < rules  # what the user has, before how it behaves
    assert "- receipt.jpg (image/jpeg, 1.0 kB)\n- invoice.pdf (application/pdf, 8 B)" in prompt
    assert FILES_JSON in prompt and "files" in (first.schema or {})["properties"]
    assert "you attached 'bank.pdf', which you do not have" in retry.prompt


def test_without_files_the_prompt_and_schema_are_unchanged() -> None:
    with FakeGemini(handler=lambda request: {"thinking": "", "status": "continue", "message": "hi"}) as fake:
        Simulator(_llm(fake), SimulatorConfig(goal="get a refund")).next_message(Conversation(), opening=True)
        [request] = fake.requests
    assert "YOUR FILES" not in request.prompt and "files" not in (request.schema or {})["properties"]


class _Shop:
    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def chat(self, messages: Any) -> AgentResponse:
        self.seen.append([a.name for a in messages[-1].attachments])
        return AgentResponse("Please send the receipt." if len(self.seen) == 1 else "Refund done.")


def test_the_simulated_user_sends_the_file_it_chose(tmp_path: Path) -> None:
    (tmp_path / "receipt.jpg").write_bytes(RECEIPT.data)
    (tmp_path / "invoice.pdf").write_bytes(INVOICE.data)
    answers = iter([{"status": "continue", "message": "I want a refund", "files": []},
                    {"status": "continue", "message": "here", "files": ["receipt.jpg"]},
                    {"status": "done", "message": ""}])
    with FakeGemini(handler=lambda request: next(answers)) as fake:
        agent = _Shop()
        state = ScenarioState(settings=Settings(simulator_fidelity="off"), rootdir=tmp_path, workdir=tmp_path,
                              context={}, llms=LLMRoles(simulator=_llm(fake)), where="t", default_agent=agent)
        state.configure_simulator(goal="get a refund")
        state.give_files([FileRef("receipt.jpg"), FileRef("invoice.pdf")])
        state.simulate()
    assert agent.seen == [[], ["receipt.jpg"]]
    assert state.conversation.turns[1].attachments[0].sha256 == RECEIPT.sha256
    assert "You: here [attached: receipt.jpg]" in json.dumps([r.prompt for r in fake.requests]).replace("\\n", "\n")


def test_an_offline_script_line_can_attach_files(tmp_path: Path) -> None:
    from fabtest.testing.scripted import load_fake_llm

    script = tmp_path / "fake.yaml"
    script.write_text('simulated_user:\n  - "hi"\n  - {message: "here", files: ["receipt.jpg"]}\n')
    fake = load_fake_llm(str(script), root=tmp_path)
    simulator = Simulator(fake, SimulatorConfig(goal="refund", files=("receipt.jpg",)), files={"receipt.jpg": RECEIPT})
    conversation = Conversation()
    assert simulator.next_message(conversation, opening=True).files == ()
    conversation.turns.append(Turn(1, "hi", AgentResponse("send it")))
    assert simulator.next_message(conversation).files == ("receipt.jpg",)
