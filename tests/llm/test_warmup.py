"""The LLM warm-up runs only when a role will call Gemini, and loads the SDK off the main thread."""

from __future__ import annotations

import subprocess
import sys

from fabtest.llm import warmup
from fabtest.config.settings import Settings


def test_no_key_means_no_warm_up(monkeypatch) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert warmup.will_call_gemini(Settings()) is False
    assert warmup.start(Settings()) is None


def test_openai_roles_need_no_gemini_warm_up(monkeypatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    settings = Settings.model_validate({"judge": {"provider": "openai"}, "simulator": {"provider": "openai"}})
    assert warmup.will_call_gemini(settings) is False


def test_warm_up_imports_the_sdk_in_the_background() -> None:
    code = ("import sys; from fabtest.llm import warmup; from fabtest.config.settings import Settings; "
            "assert 'google.genai' not in sys.modules; t = warmup.start(Settings()); t.join(60); "
            "print(t.name, 'google.genai' in sys.modules)")
    env = {"GEMINI_API_KEY": "not-a-real-key", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "fabtest-llm-warm-up True"
