"""LLM providers for the judge and the simulator."""

from fabtest.llm.base import (
    LLM,
    Completion,
    LLMBadOutput,
    LLMError,
    LLMNotConfigured,
    LLMSettings,
    LLMTimeout,
)
from fabtest.llm.cache import CachedLLM, salted
from fabtest.llm.factory import PROVIDERS, build_llm, llm_available
from fabtest.llm.gemini import GeminiLLM
from fabtest.llm.openai_compat import OpenAICompatLLM

__all__ = [
    "LLM",
    "PROVIDERS",
    "CachedLLM",
    "Completion",
    "GeminiLLM",
    "LLMBadOutput",
    "LLMError",
    "LLMNotConfigured",
    "LLMSettings",
    "LLMTimeout",
    "OpenAICompatLLM",
    "build_llm",
    "llm_available",
    "salted",
]
