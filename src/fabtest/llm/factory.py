"""Build the LLM a role asks for, and tell whether one is available, without paying for imports.

Neither function imports google-genai: :func:`llm_available` only reads the environment, and
:func:`build_llm` defers the SDK import to the first call.
"""

from __future__ import annotations

import os
from typing import Any, cast

from fabtest.llm.base import LLM, Completion, LLMNotConfigured, LLMSettings
from fabtest.llm.cache import CACHE_MODES, CachedLLM, CacheMode
from fabtest.llm.gemini import GeminiLLM, gemini_api_key, missing_key_message
from fabtest.llm.openai_compat import OpenAICompatLLM, openai_base_url

PROVIDERS: tuple[str, ...] = ("gemini", "openai")


def build_llm(
    settings: LLMSettings,
    *,
    cache_mode: CacheMode | str = "off",
    cache_dir: str | os.PathLike[str] = ".fabtest/cache",
    **options: Any,
) -> LLM:
    """The LLM for ``settings``, wrapped in :class:`CachedLLM` unless ``cache_mode`` is ``off``.

    ``options`` go to the provider's constructor (``backoff_base_s``, ``backoff_max_s``,
    ``bad_output_retries``). Raises ``ValueError`` for an unknown provider or cache mode and
    :class:`LLMNotConfigured` when Gemini has no key, except in ``replay`` mode, which needs
    no key because it never calls out.
    """
    if cache_mode not in CACHE_MODES:
        raise ValueError(f"unknown LLM cache mode {cache_mode!r}: use one of {', '.join(CACHE_MODES)}")
    _check_provider(settings.provider)
    inner: LLM
    try:
        if settings.provider == "gemini":
            inner = GeminiLLM(settings, **options)
        else:
            inner = OpenAICompatLLM(settings, **options)
    except LLMNotConfigured as exc:
        if cache_mode != "replay":
            raise
        inner = _Unconfigured(settings, str(exc))
    if cache_mode == "off":
        return inner
    return CachedLLM(inner, cache_dir=cache_dir, mode=cache_mode)  # type: ignore[arg-type]


def llm_available(settings: LLMSettings, *, cache_mode: CacheMode | str = "off") -> tuple[bool, str]:
    """``(True, what will be used)`` or ``(False, why not, naming the variable to set)``.

    Reads only the environment (no SDK import, no network). An OpenAI-compatible endpoint
    counts as available: it is usually keyless and only a real call can tell whether it runs.
    ``replay`` mode is available without a key. Raises ``ValueError`` for an unknown provider.
    """
    _check_provider(settings.provider)
    if settings.provider == "openai":
        return True, f"openai-compatible {settings.model} at {openai_base_url(settings)}"
    key, name = gemini_api_key(settings)
    if key:
        return True, f"gemini {settings.model} (key from {name})"
    if cache_mode == "replay":
        return True, f"gemini {settings.model} replayed from the LLM cache (no key set)"
    return False, missing_key_message(settings)


def role_llm(
    settings: LLMSettings,
    *,
    offline_llm: str | None = None,
    cache_mode: CacheMode | str = "off",
    cache_dir: str | os.PathLike[str] = ".fabtest/cache",
    **options: Any,
) -> LLM:
    """The LLM for one role: the configured provider when it is available (a key is set, an
    OpenAI-compatible endpoint, or a ``replay`` cache), else the in-process ``offline_llm``
    (``[tool.fabtest] offline_llm``, ``module:attr``), else :class:`LLMNotConfigured`.

    A real provider always wins over the offline stand-in, so setting ``GEMINI_API_KEY`` is all it
    takes to move from the demo heuristics to a real judge and simulator.
    """
    available, _ = llm_available(settings, cache_mode=cache_mode)
    if available or not offline_llm:
        return build_llm(settings, cache_mode=cache_mode, cache_dir=cache_dir, **options)
    return load_llm_object(offline_llm, where="[tool.fabtest] offline_llm")


def load_llm_object(spec: str, *, where: str) -> LLM:
    """``module:attr`` naming an LLM object, or a function or class that returns one when called
    without arguments. Raises :class:`fabtest.errors.UsageError` naming ``where``."""
    from fabtest._internal.targets import import_object
    from fabtest.errors import UsageError

    obj = import_object(spec, where=where, what="LLM")
    if not hasattr(obj, "complete_json") or isinstance(obj, type):
        if not callable(obj):
            raise UsageError(f"{where}: {spec!r} is neither an LLM (complete, complete_json) "
                             "nor a function returning one")
        try:
            obj = obj()
        except Exception as exc:  # the user's factory: one line, not a traceback
            raise UsageError(f"{where}: calling {spec!r} failed: {type(exc).__name__}: {exc}") from None
    if not (hasattr(obj, "complete_json") and hasattr(obj, "complete")):
        raise UsageError(f"{where}: {spec!r} gave {type(obj).__name__}, which has no complete/complete_json methods")
    return cast(LLM, obj)


def describe_llm(llm: Any) -> tuple[str | None, str | None, str | None]:
    """``(provider, model, note)`` of a built LLM for the experiment; ``note`` says what a demo or
    scripted stand-in is (an attribute ``note`` on the LLM, or on the LLM a cache wraps)."""
    if llm is None:
        return None, None, None
    inner = getattr(llm, "inner", None)
    note = getattr(llm, "note", None) or getattr(inner, "note", None)
    return getattr(llm, "provider", None), getattr(llm, "model", None), note


def _check_provider(provider: str) -> None:
    if provider not in PROVIDERS:
        raise ValueError(f"unknown LLM provider {provider!r}: allowed providers are {', '.join(PROVIDERS)}")


class _Unconfigured:
    """Stands in for a provider without credentials behind a ``replay`` cache; never reached on a hit."""

    def __init__(self, settings: LLMSettings, reason: str) -> None:
        self.provider = settings.provider
        self.model = settings.model
        # the cache key reads the configured temperature from here (CachedLLM._default_temperature),
        # as it does from the provider that recorded: without it a keyless replay missed every entry
        self.settings = settings
        self._reason = reason

    def complete(self, prompt: str, **_: Any) -> Completion[Any]:
        raise LLMNotConfigured(self._reason)

    def complete_json(self, prompt: str, schema: Any, **_: Any) -> Completion[Any]:
        raise LLMNotConfigured(self._reason)
