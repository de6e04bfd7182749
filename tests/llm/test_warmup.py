"""The LLM warm-up runs only when a role will call Gemini, and loads the SDK off the main thread."""

from __future__ import annotations

import subprocess
import sys

import pytest

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


@pytest.mark.parametrize(("key", "loads_sdk"), [("not-a-real-key", False), ("auth_tokens/an-ephemeral-one", True)])
def test_warm_up_builds_the_clients_in_the_background_and_the_sdk_only_where_needed(key: str, loads_sdk: bool) -> None:
    """A plain key: the judge's and simulator's own client, google-genai never loaded; a key the
    direct path leaves to the SDK (an ephemeral token): the SDK is loaded off the main thread."""
    code = ("import sys; from fabtest.llm import warmup; from fabtest.config.settings import Settings; "
            "from fabtest.engine.llms import configured_llms; from pathlib import Path; "
            "assert 'google.genai' not in sys.modules; "
            "t = warmup.start(Settings(), build=lambda: configured_llms(Settings(), Path('.'))); "
            "t.join(60); print(t.name, 'httpx' in sys.modules, 'google.genai' in sys.modules)")
    env = {"GEMINI_API_KEY": key, "PATH": "/usr/bin:/bin", "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["fabtest-llm-warm-up", "True", str(loads_sdk)]


def test_a_run_shorter_than_the_warm_up_ends_after_it_not_during_it(pytester, monkeypatch) -> None:
    """A daemon thread still importing the SDK's C extensions when the interpreter shuts down can
    crash the process after the summary (SIGSEGV, seen once in CI): the session's close joins the
    warm-up, so by the last unconfigure hook it has ended; a --collect-only run starts none."""
    monkeypatch.setenv("GEMINI_API_KEY", "not-a-real-key")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9")  # never the internet
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\npythonpath = ["."]\n\n'
                                         '[tool.fabtest]\nagent = "bot:build"\nresults_dir = "results"\n')
    pytester.makepyfile(bot="def build(context):\n    return lambda messages: 'hello'\n")
    pytester.makefile(".feature", hi='Feature: F\n  Scenario: Hi\n    When the user says "hi"\n'
                                     '    Then the response must match "hello"\n')
    pytester.makeconftest('''
import threading, pytest

@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    alive = [t.name for t in threading.enumerate() if t.name == "fabtest-llm-warm-up"]
    print("WARM-UP ALIVE AT EXIT:", alive, flush=True)
''')
    ran = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-s", "--fabtest-no-preflight")
    assert ran.ret == 0, ran.stdout.str()
    assert "WARM-UP ALIVE AT EXIT: []" in ran.stdout.str()
    collected = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-s", "--collect-only")
    assert "WARM-UP ALIVE AT EXIT: []" in collected.stdout.str()
