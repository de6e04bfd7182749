"""CachedLLM: record/replay of LLM calls, keyed with a salt per iteration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from fabtest.conversation import TokenUsage
from fabtest.llm.base import Completion, LLMError, LLMSettings
from fabtest.llm.cache import CachedLLM, salted
from fabtest.llm.gemini import GeminiLLM
from fabtest.llm.base import LLM
from fabtest.testing import FakeGemini


class Verdict(BaseModel):
    passed: bool
    reason: str


class CountingLLM:
    """An in-memory LLM that numbers its answers, so a cache hit is visible."""

    provider = "stub"
    model = "stub-1"

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, prompt: str, *, system: str | None = None, temperature: float | None = None) -> Completion[Any]:
        self.calls += 1
        return Completion(text=f"answer {self.calls}", usage=TokenUsage(1, 10, 2), model=self.model)

    def complete_json(self, prompt: str, schema: Any, *, system: str | None = None, temperature: float | None = None) -> Completion[Any]:
        self.calls += 1
        parsed = schema(passed=True, reason=f"answer {self.calls}")
        return Completion(text=parsed.model_dump_json(), parsed=parsed, usage=TokenUsage(1, 10, 2), model=self.model)


def test_on_mode_reads_and_writes_through(tmp_path: Path) -> None:
    inner = CountingLLM()
    cached = CachedLLM(inner, cache_dir=tmp_path, mode="on")
    assert isinstance(cached, LLM)
    first = cached.complete("q", system="s")
    again = cached.complete("q", system="s")
    assert (first.text, again.text) == ("answer 1", "answer 1")
    assert inner.calls == 1
    assert first.usage.calls == 1 and first.metadata["cached"] is False
    assert again.usage == TokenUsage() and again.metadata["cached"] is True
    assert again.metadata["cache_key"] == first.metadata["cache_key"]
    # Everything in the key matters.
    cached.complete("q", system="other")
    cached.complete("q", system="s", temperature=0.5)
    cached.complete("other", system="s")
    assert inner.calls == 4
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 4 and not list(tmp_path.glob("*.tmp"))
    entry = json.loads((tmp_path / f"{first.metadata['cache_key']}.json").read_text())
    assert entry["text"] == "answer 1" and entry["request"]["prompt"] == "q"


def test_json_round_trip_and_schema_in_key(tmp_path: Path) -> None:
    inner = CountingLLM()
    cached = CachedLLM(inner, cache_dir=tmp_path)
    first = cached.complete_json("judge", Verdict)
    hit = cached.complete_json("judge", Verdict)
    assert hit.parsed == first.parsed and isinstance(hit.parsed, Verdict)
    assert inner.calls == 1
    cached.complete("judge")  # free text is a different key from the JSON call
    assert inner.calls == 2


def test_salt_keeps_iterations_independent(tmp_path: Path) -> None:
    inner = CountingLLM()
    base = CachedLLM(inner, cache_dir=tmp_path)
    run1, run2 = base.with_salt(1), base.with_salt(2)
    assert run1.complete("q").text == "answer 1"
    assert run2.complete("q").text == "answer 2"
    assert base.with_salt("1").complete("q").text == "answer 1"  # same salt replays
    assert inner.calls == 2
    assert salted(inner, 3) is inner  # uncached LLMs need no salt
    assert salted(base, 3).salt == "3"


def test_replay_mode_hits_and_fails_on_miss(tmp_path: Path) -> None:
    inner = CountingLLM()
    CachedLLM(inner, cache_dir=tmp_path, mode="on").complete("recorded")
    replay = CachedLLM(inner, cache_dir=tmp_path, mode="replay")
    assert replay.complete("recorded").metadata["cached"] is True
    with pytest.raises(LLMError, match="--fabtest-llm-cache on") as caught:
        replay.complete("never recorded")
    assert "cache miss for key" in str(caught.value)
    assert inner.calls == 1


def test_off_mode_passes_through(tmp_path: Path) -> None:
    inner = CountingLLM()
    off = CachedLLM(inner, cache_dir=tmp_path, mode="off")
    assert [off.complete("q").text for _ in range(2)] == ["answer 1", "answer 2"]
    assert not tmp_path.exists() or not list(tmp_path.iterdir())
    with pytest.raises(ValueError, match="replay"):
        CachedLLM(inner, mode="sometimes")  # type: ignore[arg-type]


def test_damaged_entry_is_a_miss(tmp_path: Path) -> None:
    inner = CountingLLM()
    cached = CachedLLM(inner, cache_dir=tmp_path)
    key = cached.complete("q").metadata["cache_key"]
    (tmp_path / f"{key}.json").write_text("{ not json")
    assert cached.complete("q").text == "answer 2"
    assert cached.complete("q").text == "answer 2"


def test_cache_over_gemini(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    with FakeGemini() as fake:
        fake.add_rule("Judge", json={"passed": True, "reason": "good"})
        llm = CachedLLM(GeminiLLM(LLMSettings(base_url=fake.base_url)), cache_dir=tmp_path)
        first = llm.with_salt(0).complete_json("Judge", Verdict)
        second = llm.with_salt(0).complete_json("Judge", Verdict)
        assert fake.request_count == 1
    assert first.usage.calls == 1 and first.usage.input_tokens > 0
    assert second.parsed == first.parsed and second.usage == TokenUsage()


@pytest.mark.parametrize("temperature", [None, 0.7])
def test_what_was_recorded_with_a_key_replays_without_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          temperature: float | None) -> None:
    """The documented offline CI flow (docs/how-to/record-replay.md): record with a key and
    ``on``, replay with no key. The key of an answer is what decides it, never whether a key is set:
    the configured temperature used to come from the provider object, which a keyless replay does
    not build, so every call that gave no temperature of its own missed."""
    from fabtest.llm.factory import build_llm

    settings = {"temperature": temperature} if temperature is not None else {}
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    with FakeGemini() as fake:
        fake.add_rule("Judge", json={"passed": True, "reason": "good"})
        recorded = build_llm(LLMSettings(base_url=fake.base_url, **settings), cache_mode="on", cache_dir=tmp_path)
        first = salted(recorded, 1).complete_json("Judge", Verdict)
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    replayed = build_llm(LLMSettings(**settings), cache_mode="replay", cache_dir=tmp_path)
    again = salted(replayed, 1).complete_json("Judge", Verdict)
    assert again.metadata["cached"] is True and again.parsed == first.parsed


def test_cache_files_never_hold_a_secret_but_keys_still_tell_secrets_apart(tmp_path: Path) -> None:
    from fabtest._internal import redaction

    secret, other = "s3cr3t-Value-42", "another-Secret-99"
    redaction.register(secret, other)
    try:
        inner = CountingLLM()
        cached = CachedLLM(inner, cache_dir=tmp_path, mode="on")
        first = cached.complete(f"user says: my city is {secret}", system=f"sys {secret}")
        second = cached.complete(f"user says: my city is {other}", system=f"sys {other}")
        assert first.metadata["cache_key"] != second.metadata["cache_key"]
        verdict = cached.complete_json(f'judge "{secret}"', Verdict)
        stored = "".join(p.read_text(encoding="utf-8") for p in tmp_path.glob("*.json"))
        assert secret not in stored and other not in stored and "***" in stored
        assert cached.complete(f"user says: my city is {secret}", system=f"sys {secret}").metadata["cached"] is True
        assert cached.complete_json(f'judge "{secret}"', Verdict).parsed == verdict.parsed
        assert inner.calls == 3
    finally:
        redaction.clear()


@pytest.mark.parametrize("content", ['[1, 2]', '{"text": 5}', '"just a string"', '{"metadata": []}', "\xff"])
def test_a_foreign_or_damaged_cache_file_is_a_miss_not_a_crash(tmp_path: Path, content: str) -> None:
    inner = CountingLLM()
    cached = CachedLLM(inner, cache_dir=tmp_path, mode="on")
    key = cached.complete("q").metadata["cache_key"]
    (tmp_path / f"{key}.json").write_text(content, encoding="utf-8")
    again = cached.complete("q")
    assert again.text == "answer 2" and again.metadata["cached"] is False  # called again, entry rewritten
    with pytest.raises(LLMError, match="cache miss"):
        (tmp_path / f"{key}.json").write_text(content, encoding="utf-8")
        CachedLLM(inner, cache_dir=tmp_path, mode="replay").complete("q")
