"""The environment and FakeGemini rules the real Gemini CLI needs to run offline over ACP."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from fabtest.testing import FakeGemini
from fabtest.testing.fake_gemini import FakeRequest

GEMINI = os.environ.get("FABTEST_GEMINI_CLI") or shutil.which("gemini")
NOT_INSTALLED = "the Gemini CLI is not installed (npm install -g @google/gemini-cli@0.61, or set FABTEST_GEMINI_CLI)"


def answer_router(fake: FakeGemini) -> None:
    """Each prompt first asks ``:generateContent`` to rate its complexity (a JSON schema with
    ``complexity_reasoning`` and ``complexity_score``); answer that before any other rule."""

    def router(request: FakeRequest) -> Any:
        schema = json.dumps(request.schema or {})
        if not request.stream and "complexity_score" in schema:
            return {"complexity_reasoning": "a simple request", "complexity_score": 10}
        return None

    fake.add_rule(r"", callback=router)


def cli_env(home: Path, base_url: str) -> dict[str, str]:
    """A HOME whose settings select gemini-api-key auth and turn off telemetry and updates, plus the
    variables that point the CLI at the fake (proxies at a dead port as a second fence)."""
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    return {
        "HOME": str(home),
        "GEMINI_API_KEY": "fake-key",
        "GOOGLE_GEMINI_BASE_URL": base_url,
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
        "NO_COLOR": "1",
        "GOOGLE_CLOUD_PROJECT": "",
        "GOOGLE_API_KEY": "",
        "GOOGLE_GENAI_USE_VERTEXAI": "",
    }
