"""Without GEMINI_API_KEY, the agent's Gemini is the scripted FakeGemini of fake_model.py."""

import os

from fake_model import scripted_gemini

_fake = None


def pytest_configure(config):
    global _fake
    if not (os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")):
        _fake = scripted_gemini().start()
        os.environ.update(_fake.env())  # GEMINI_API_KEY and GOOGLE_GEMINI_BASE_URL, read by google-genai


def pytest_unconfigure(config):
    if _fake is not None:
        _fake.stop()
