"""The judge sees the conversation's files (issue 39): the captured request to FakeGemini holds each
file inline right after the transcript line that names it (evidence beside the text it belongs
to); a file over ``judge_max_file_bytes`` is described only and the verdict's reason says so; the
LLM cache key includes the files' hashes."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from fabtest.config.criteria import Criterion
from fabtest.conversation import AgentResponse, Attachment, Conversation, Turn
from fabtest.engine import transcript
from fabtest.engine.judge import Judge
from fabtest.llm.base import LLMSettings
from fabtest.llm.cache import CachedLLM
from fabtest.llm.calls import LLMCall, llm_call
from fabtest.llm.gemini import GeminiLLM
from fabtest.llm.inline_files import interleave
from fabtest.testing import FakeGemini

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
LAMP = Attachment.from_bytes(PNG, name="lamp.png")
BIG = Attachment.from_bytes(b"%PDF" + b"x" * 2000, name="manual.pdf")


def _conversation() -> Conversation:
    return Conversation(turns=[
        Turn(1, "Is this covered?", AgentResponse("Which policy?"), attachments=(LAMP,)),
        Turn(2, "This one", AgentResponse("Yes, lamps are covered.", attachments=[LAMP]), attachments=(BIG,)),
    ])


def _verdict(request: Any) -> dict[str, Any]:
    return {"verdicts": [{"criterion": "looks", "reasoning": "it read the photo", "verdict": "passed"}]}


def test_the_judge_gets_each_file_inline_after_its_line_and_a_big_file_by_name_only() -> None:
    subject = transcript.for_judge(_conversation(), max_file_bytes=1000)
    assert subject.splitlines() == [
        'turn 1 user: "Is this covered?"',
        'turn 1 user file: "lamp.png" image/png 70 B [attached: file 1]',
        'turn 1 agent: "Which policy?"',
        'turn 2 user: "This one"',
        'turn 2 user file: "manual.pdf" application/pdf 2.0 kB [not attached: over the judge\'s limit of 1.0 kB; '
        'judge it by its name, type and size only]',
        'turn 2 agent: "Yes, lamps are covered."',
        'turn 2 agent file: "lamp.png" image/png 70 B [the same file as attached file 1]',
    ]
    with FakeGemini(handler=_verdict) as fake:
        llm = GeminiLLM(LLMSettings(model="gemini-2.5-flash", max_retries=0, base_url=fake.base_url), api_key="k")
        result = Judge(llm).evaluate_criteria([Criterion("looks", "The agent looked at the photo")],
                                              subject=subject, scope="conversation")
        [request] = fake.requests
    [content] = request.contents
    parts = content["parts"]
    # the prompt up to the line naming the file, the file, then the rest of the prompt
    assert parts[0]["text"].endswith('turn 1 user file: "lamp.png" image/png 70 B [attached: file 1]\n')
    assert base64.b64decode(parts[1]["inlineData"]["data"]) == PNG
    assert parts[2]["text"].startswith('turn 1 agent: "Which policy?"') and len(parts) == 3
    [verdict] = result.value
    assert verdict.reasoning == ("it read the photo [the judge saw only the name, type and size of manual.pdf "
                                 "(2.0 kB): over judge_max_file_bytes]")


def test_without_files_the_prompt_is_one_text_as_before() -> None:
    turns = [Turn(1, "hi", AgentResponse("hello"))]
    with FakeGemini(handler=_verdict) as fake:
        llm = GeminiLLM(LLMSettings(model="gemini-2.5-flash", max_retries=0, base_url=fake.base_url), api_key="k")
        Judge(llm).evaluate_criteria([Criterion("looks", "x")], subject=transcript.for_judge(turns),
                                     scope="conversation")
        [request] = fake.requests
    assert [list(p) for p in request.contents[0]["parts"]] == [["text"]]


def test_interleave_puts_unnamed_files_last_and_ignores_a_marker_inside_quoted_text() -> None:
    prompt = 'turn 1 agent: "see [attached: file 1]"\nturn 1 user file: "a.png" image/png 70 B [attached: file 1]\nend'
    assert interleave(prompt, [LAMP, BIG]) == [prompt[: prompt.index("end")], LAMP, "end", BIG]


def test_the_cache_key_includes_the_files_hashes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fabtest.llm.cache import cache_key

    base = dict(provider="gemini", model="m", system=None, prompt="p", temperature=0.0, schema=None, salt="")
    assert cache_key(**base) == cache_key(**base, files=[])  # keys recorded before files stay valid
    assert cache_key(**base, files=[LAMP.sha256]) != cache_key(**base, files=[BIG.sha256])
    with FakeGemini() as fake:
        fake.add_rule(".", text="ok")
        llm = CachedLLM(GeminiLLM(LLMSettings(base_url=fake.base_url), api_key="k"), cache_dir=tmp_path)
        other = Attachment.from_bytes(b"new bytes", name="lamp.png")  # the same name, other content
        for file in (LAMP, LAMP, other):
            with llm_call(LLMCall("criteria", files=(file,))):
                llm.complete("judge this")
        assert fake.request_count == 2
