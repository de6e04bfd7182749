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

from fabtest._internal import lazy as _lazy  # after the imports it reads

# Every name above is exported; those under TYPE_CHECKING are imported on first use: the providers
# and the cache are not needed to collect or to run deterministic checks, and ``pytest
# --collect-only`` should not pay for them.
__all__, __getattr__ = _lazy.exports(__name__, __file__)
