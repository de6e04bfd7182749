"""LLM providers for the judge and the simulator."""

from typing import TYPE_CHECKING

from fabtest.llm.base import (
    LLM,
    Completion,
    LLMBadOutput,
    LLMError,
    LLMNotConfigured,
    LLMSettings,
    LLMTimeout,
)

if TYPE_CHECKING:
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

# Imported on first use: the providers and the cache are not needed to collect or to run
# deterministic checks, and ``pytest --collect-only`` should not pay for them.
_LAZY = {
    "CachedLLM": "fabtest.llm.cache", "salted": "fabtest.llm.cache",
    "PROVIDERS": "fabtest.llm.factory", "build_llm": "fabtest.llm.factory", "llm_available": "fabtest.llm.factory",
    "GeminiLLM": "fabtest.llm.gemini", "OpenAICompatLLM": "fabtest.llm.openai_compat",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
