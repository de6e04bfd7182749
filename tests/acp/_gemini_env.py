"""The environment and FakeGemini rules the real Gemini CLI needs to run offline over ACP."""

from __future__ import annotations

import json
import os
import shutil
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
