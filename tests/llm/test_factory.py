"""build_llm and llm_available: provider choice, keys, cache modes, no eager SDK import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fabtest.llm.base import LLMError, LLMNotConfigured, LLMSettings
from fabtest.llm.cache import CachedLLM
from fabtest.llm.factory import build_llm, llm_available
from fabtest.llm.gemini import GeminiLLM
from fabtest.llm.openai_compat import OpenAICompatLLM


def test_unknown_provider() -> None:
    with pytest.raises(ValueError, match="gemini, openai"):
        build_llm(LLMSettings(provider="claude"))
    with pytest.raises(ValueError, match="gemini, openai"):
        llm_available(LLMSettings(provider="claude"))
    with pytest.raises(ValueError, match="cache mode"):
        build_llm(LLMSettings(), cache_mode="maybe")


def test_gemini_without_key() -> None:
    with pytest.raises(LLMNotConfigured, match="GEMINI_API_KEY"):
        build_llm(LLMSettings())
    ok, reason = llm_available(LLMSettings())
    assert not ok and "GEMINI_API_KEY" in reason
    ok, reason = llm_available(LLMSettings(api_key_env="JUDGE_KEY"))
    assert not ok and "JUDGE_KEY" in reason


def test_gemini_with_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    assert llm_available(LLMSettings()) == (True, "gemini gemini-2.5-flash (key from GOOGLE_API_KEY)")
    assert isinstance(build_llm(LLMSettings()), GeminiLLM)
    cached = build_llm(LLMSettings(), cache_mode="on", cache_dir=tmp_path)
    assert isinstance(cached, CachedLLM) and isinstance(cached.inner, GeminiLLM)
    assert cached.cache_dir == tmp_path and cached.provider == "gemini"


def test_openai_needs_no_key() -> None:
    ok, reason = llm_available(LLMSettings(provider="openai", model="llama3"))
    assert ok and "127.0.0.1:8000" in reason
    assert isinstance(build_llm(LLMSettings(provider="openai")), OpenAICompatLLM)


def test_replay_works_without_key(tmp_path: Path) -> None:
    assert llm_available(LLMSettings(), cache_mode="replay")[0]
    llm = build_llm(LLMSettings(), cache_mode="replay", cache_dir=tmp_path)
    with pytest.raises(LLMError, match="cache miss"):
        llm.complete("anything")


def test_importing_fabtest_llm_does_not_import_google_genai() -> None:
    code = (
        "import sys; from fabtest.llm import base, factory; import fabtest.testing;"
        "factory.llm_available(base.LLMSettings()); factory.build_llm(base.LLMSettings(provider='openai'));"
        "print('google.genai' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"
