"""Record/replay cache of LLM calls: reruns are free and CI is deterministic.

Each answer is one JSON file ``<cache_dir>/<sha256>.json``; the key covers provider, model,
system, prompt, temperature (the call's, else the provider's configured one), the schema and a
caller-chosen ``salt`` (the iteration number, so
repeated runs of a scenario stay independent instead of replaying one answer five times, and the
judge sample index, see :func:`sample_view`).

Secrets (:mod:`fabtest._internal.redaction`) never reach a cache file: the stored request and answer show
``***``; the key hashes the real prompt.

Modes: ``on`` reads through and writes through; ``replay`` never calls the LLM and fails on a
miss; ``off`` passes every call straight to the wrapped LLM.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from fabtest._internal import redaction
from fabtest._internal.files import atomic_writer
from fabtest.conversation import TokenUsage, jsonable
from fabtest.llm.base import LLM, Completion, LLMError, json_schema

T = TypeVar("T", bound=BaseModel)
CacheMode = Literal["on", "off", "replay"]
CACHE_MODES: tuple[str, ...] = ("on", "off", "replay")
_FORMAT = 1


def cache_key(
    *,
    provider: str,
    model: str,
    system: str | None,
    prompt: str,
    temperature: float | None,
    schema: dict[str, Any] | None,
    salt: str,
    files: list[str] | None = None,
) -> str:
    """The sha256 hex digest naming one cached answer; ``files`` are the sha256 of the files sent
    with the prompt (the same name with new bytes is another question)."""
    material: dict[str, Any] = {
        "format": _FORMAT,
        "provider": provider,
        "model": model,
        "system": system,
        "prompt": prompt,
        "temperature": temperature,
        "schema": schema,
        "salt": salt,
    }
    if files:  # absent without files: every key recorded before files existed stays valid
        material["files"] = files
    return hashlib.sha256(json.dumps(material, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class CachedLLM:
    """Wrap any :class:`~fabtest.llm.base.LLM` with the record/replay cache (thread-safe).

    Cached answers report zero usage (they cost nothing) with ``metadata["cached"] = True``;
    fresh answers carry ``metadata["cached"] = False``. Both carry ``metadata["cache_key"]``.
    """

    def __init__(
        self, inner: LLM, cache_dir: str | os.PathLike[str] = ".fabtest/cache", mode: CacheMode = "on", salt: str = ""
    ) -> None:
        if mode not in CACHE_MODES:
            raise ValueError(f"unknown LLM cache mode {mode!r}: use one of {', '.join(CACHE_MODES)}")
        self.inner = inner
        self.cache_dir = Path(cache_dir)
        self.mode: CacheMode = mode
        self.salt = str(salt)
        self.provider = inner.provider
        self.model = inner.model

    def __repr__(self) -> str:
        return f"CachedLLM({self.inner!r}, cache_dir={str(self.cache_dir)!r}, mode={self.mode!r}, salt={self.salt!r})"

    def with_salt(self, salt: object) -> CachedLLM:
        """A view on the same inner LLM and directory whose keys use ``salt`` (e.g. the iteration)."""
        return CachedLLM(self.inner, self.cache_dir, self.mode, str(salt))

    def complete(self, prompt: str, *, system: str | None = None, temperature: float | None = None) -> Completion[Any]:
        if self.mode == "off":
            return self.inner.complete(prompt, system=system, temperature=temperature)
        key = self._key(prompt, system, temperature, None)
        hit = self._load(key, None)
        if hit is not None:
            return hit
        completion = self.inner.complete(prompt, system=system, temperature=temperature)
        self._store(key, completion, prompt, system, temperature, None)
        return completion

    def complete_json(
        self, prompt: str, schema: type[T], *, system: str | None = None, temperature: float | None = None
    ) -> Completion[T]:
        if self.mode == "off":
            return self.inner.complete_json(prompt, schema, system=system, temperature=temperature)
        key = self._key(prompt, system, temperature, schema)
        hit = self._load(key, schema)
        if hit is not None:
            return hit
        completion = self.inner.complete_json(prompt, schema, system=system, temperature=temperature)
        self._store(key, completion, prompt, system, temperature, schema)
        return completion

    def path_for(self, key: str) -> Path:
        return self.cache_dir / f"{key}.json"

    # -- internals -----------------------------------------------------------------------

    def _key(self, prompt: str, system: str | None, temperature: float | None, schema: type[BaseModel] | None) -> str:
        return cache_key(
            provider=self.provider,
            model=self.model,
            system=system,
            prompt=prompt,
            temperature=temperature if temperature is not None else self._default_temperature(),
            schema=json_schema(schema) if schema is not None else None,
            salt=self.salt,
            files=_call_files(),
        )

    def _default_temperature(self) -> float | None:
        """The wrapped provider's configured temperature, which applies when a call gives none."""
        settings = getattr(self.inner, "settings", None)
        return getattr(settings, "temperature", None)

    def _load(self, key: str, schema: type[T] | None) -> Completion[Any] | None:
        """The cached completion, or None on a miss (``replay`` raises instead)."""
        path = self.path_for(key)
        entry: _Entry | None = None
        try:
            entry = _Entry.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            pass
        except (OSError, ValueError):
            entry = None  # a damaged or foreign entry is a miss; "on" mode rewrites it
        parsed = None
        if entry is not None and schema is not None:
            try:
                parsed = schema.model_validate_json(entry.parsed_json or entry.text)
            except ValueError:
                entry = None
        if entry is None:
            if self.mode == "replay":
                raise LLMError(
                    f"LLM cache miss for key {key} in {self.cache_dir} ({self.provider} {self.model}) with "
                    "--fabtest-llm-cache replay: run once with --fabtest-llm-cache on to record it"
                )
            return None
        metadata = dict(entry.metadata)
        metadata.update(cached=True, cache_key=key)
        return Completion(text=entry.text, parsed=parsed, usage=TokenUsage(), model=entry.model, metadata=metadata)

    def _store(
        self,
        key: str,
        completion: Completion[Any],
        prompt: str,
        system: str | None,
        temperature: float | None,
        schema: type[BaseModel] | None,
    ) -> None:
        entry = {
            "key": key,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "request": {
                "provider": self.provider,
                "model": self.model,
                "system": system,
                "prompt": prompt,
                "temperature": temperature,
                "schema": schema.__name__ if schema is not None else None,
                "salt": self.salt,
            },
            "text": completion.text,
            "parsed_json": completion.parsed.model_dump_json() if isinstance(completion.parsed, BaseModel) else None,
            "model": completion.model,
            "usage": completion.usage.to_dict(),
            # how this answer was fetched (a hedge) is not part of it: a replay fetches nothing
            "metadata": jsonable({k: v for k, v in completion.metadata.items() if k != "hedged"}),
        }
        completion.metadata.update(cached=False, cache_key=key)
        # Prompts carry playbook env values and agent tokens: the file keeps them as ***, the key
        # (a hash of the real prompt) still tells them apart.
        _atomic_write(self.path_for(key), json.dumps(redaction.redact_obj(entry), indent=2, ensure_ascii=False))


class _Entry(BaseModel):
    """What a cache file must hold to be replayed (validated on read: files can be edited or damaged)."""

    model_config = ConfigDict(extra="ignore", strict=True)
    text: str
    parsed_json: str | None = None
    model: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)


def salted(llm: LLM, salt: object) -> LLM:
    """``llm.with_salt(salt)`` when the LLM is cached, else the LLM itself (uncached calls need no salt)."""
    with_salt = getattr(llm, "with_salt", None)
    return with_salt(salt) if callable(with_salt) else llm


def sample_view(llm: LLM | None, index: int) -> LLM | None:
    """The LLM for judge sample ``index``: sample 0 is the plain call (so a cache recorded without
    sampling still answers it), later samples add ``/sample-N`` to the salt so each is its own
    cache entry instead of replaying the first answer N times."""
    if llm is None or index == 0:
        return llm
    current = getattr(llm, "salt", "")
    return salted(llm, f"{current}/sample-{index}")


def _atomic_write(path: Path, text: str) -> None:
    with atomic_writer(path) as handle:
        handle.write(text)


def _call_files() -> list[str]:
    """The hashes of the files the current call sends (:mod:`fabtest.llm.inline_files`)."""
    from fabtest.llm.calls import current_call

    call = current_call()
    return [f.sha256 for f in call.files] if call is not None else []
