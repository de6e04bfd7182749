"""Test utilities for fabtest users and fabtest's own tests.

:class:`FakeGemini` is a scripted, local Gemini REST server (127.0.0.1) that the real
google-genai client and the Gemini CLI can talk to, so LLM-backed paths run without the
internet. See :mod:`fabtest.testing.fake_gemini` for the rules, faults and records it offers.
"""

from fabtest.testing.fake_gemini import FakeGemini, FakeRequest, Fault, Reply, Rule

__all__ = ["FakeGemini", "FakeRequest", "Fault", "Reply", "Rule"]
