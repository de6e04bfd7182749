"""Tests for fabtest.llm providers, the LLM cache and fabtest.testing.FakeGemini."""
