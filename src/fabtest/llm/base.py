"""The LLM protocol the judge and simulator talk to, and its errors.

Providers (Gemini, OpenAI-compatible) implement :class:`LLM`. Every call returns a
:class:`Completion` carrying the token usage, so callers can charge it to a role.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from fabtest.conversation import TokenUsage
from fabtest.errors import LLMError as LLMError  # defined with the whole tree; importable from here too
from fabtest.errors import LLMNotConfigured as LLMNotConfigured

T = TypeVar("T", bound=BaseModel)


def json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """``schema.model_json_schema()``, built once per class: pydantic rebuilds it on every call
    (about 1.5 ms, as much CPU as the rest of an LLM call's client side). A fresh copy each time,
    so a caller may change it."""
    copy: dict[str, Any] = json.loads(_schema_text(schema))
    return copy


@functools.lru_cache(maxsize=128)
def _schema_text(schema: type[BaseModel]) -> str:
    return json.dumps(schema.model_json_schema())


class LLMTimeout(LLMError):
    """An LLM call exceeded its per-call timeout on every attempt."""


class LLMBadOutput(LLMError):
    """The LLM answered, but never with something usable (invalid JSON, empty, off-schema)."""


def spent(exc: BaseException) -> TokenUsage:
    """What a failed LLM call cost before it failed (``.usage``, set where requests were made): a
    failure is charged like an answer, so "judge calls 0" is never printed after 60 requests."""
    usage = getattr(exc, "usage", None)
    return usage if isinstance(usage, TokenUsage) else TokenUsage()


def with_spent(exc: BaseException, usage: TokenUsage) -> BaseException:
    """``exc`` carrying ``usage`` added to what it already carried (returned, to be raised)."""
    total = TokenUsage()
    total.add(usage)
    total.add(spent(exc))
    exc.usage = total  # type: ignore[attr-defined]
    return exc


@dataclass
class Completion(Generic[T]):
    """One answer: the raw text, the validated model for ``complete_json``, and its cost."""

    text: str
    parsed: T | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)
    model: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class LLM(Protocol):
    """A text and structured-output completion endpoint."""

    provider: str
    model: str

    def complete(self, prompt: str, *, system: str | None = None, temperature: float | None = None) -> Completion[Any]:
        """Return free text."""
        ...

    def complete_json(
        self, prompt: str, schema: type[T], *, system: str | None = None, temperature: float | None = None
    ) -> Completion[T]:
        """Return an answer validated against ``schema`` (``Completion.parsed``); raise LLMBadOutput otherwise."""
        ...


@dataclass(frozen=True)
class LLMSettings:
    """How to build one role's LLM. ``None`` fields fall back to provider defaults."""

    provider: str = "gemini"
    model: str = "gemini-2.5-flash"
    temperature: float | None = None
    timeout_s: float = 60.0
    max_retries: int = 4
    base_url: str | None = None
    api_key_env: str | None = None
    max_concurrency: int = 8
