"""Retries with backoff and concurrency limits, shared by every provider.

Providers raise :class:`TransientFailure` from one HTTP attempt when the failure is worth
retrying (408/429/5xx, timeouts, dropped connections); :func:`call_with_retries` sleeps with
exponential backoff plus jitter and gives up with :class:`LLMError` / :class:`LLMTimeout`.
SDK-level retries stay off, so a call is never retried twice over. :func:`provider_semaphore`
bounds the calls in flight per endpoint: per process, or for a whole ``-n`` run once
:func:`share_across_processes` is set (see :mod:`fabtest.llm.shared_limit`).
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from fabtest.conversation import TokenUsage
from fabtest.errors import TransientFailure
from fabtest.llm.base import Completion, LLMBadOutput, LLMError, LLMSettings, LLMTimeout
from fabtest.llm.retry_budget import RetryBudget, budget_spent_message
from fabtest.llm.stalls import latency_tracker

R = TypeVar("R")
T = TypeVar("T", bound=BaseModel)

#: HTTP statuses worth another attempt: request timeout, rate limit, server-side trouble.
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


def is_retryable_status(status: int | None) -> bool:
    """True for 408, 429 and any 5xx."""
    return status is not None and (status in RETRYABLE_STATUSES or 500 <= status <= 599)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry. ``max_retries`` counts attempts after the first."""

    max_retries: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0

    def delay(self, retry_number: int, retry_after_s: float | None = None) -> float:
        """Full-jitter exponential delay before retry ``retry_number`` (1-based)."""
        cap = min(self.backoff_max_s, self.backoff_base_s * (2 ** (retry_number - 1)))
        delay = cap / 2 + random.uniform(0, cap / 2)
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, self.backoff_max_s))
        return float(max(0.0, delay))


def call_with_retries(
    attempt: Callable[[], R],
    *,
    policy: RetryPolicy,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
    budget: RetryBudget | None = None,
) -> R:
    """Run ``attempt`` until it stops raising :class:`TransientFailure` or retries run out.

    ``what`` names the call in error messages ("gemini gemini-2.5-flash"). Raises
    :class:`LLMTimeout` when every attempt timed out, :class:`LLMError` otherwise. Every retry
    is paid from ``budget`` (the suite's retry budget) when one is given; once it is spent the
    transient failure ends the call at once with :class:`~fabtest.llm.retry_budget.RetryBudgetSpent`.
    """
    failures: list[TransientFailure] = []
    attempts = max(0, policy.max_retries) + 1
    for number in range(1, attempts + 1):
        try:
            return attempt()
        except TransientFailure as failure:
            failures.append(failure)
            if number < attempts:
                if budget is not None and not budget.spend():
                    raise budget.exhausted(f"{what}: {failure}") from failure
                sleep(policy.delay(number, failure.retry_after_s))
    last = failures[-1]
    summary = f"{what}: gave up after {attempts} attempt(s); last error: {last}"
    if all(f.timeout for f in failures):
        raise LLMTimeout(summary) from last
    raise LLMError(summary) from last


class Limiter(Protocol):
    """What bounds in-flight calls: a ``threading.BoundedSemaphore`` or a
    :class:`~fabtest.llm.shared_limit.SharedSemaphore`."""

    def acquire(self, blocking: bool = ..., timeout: float | None = ...) -> bool: ...

    def release(self) -> None: ...

    def __enter__(self) -> bool: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...

    @property
    def held(self) -> int:
        """Slots this process holds now: its LLM calls in flight (the progress display reads it)."""
        ...


class CountingSemaphore(threading.BoundedSemaphore):
    """A process-local bounded semaphore that knows how many slots are held (``held``)."""

    def __init__(self, value: int = 1) -> None:
        super().__init__(value)
        self._count_lock = threading.Lock()
        self._held = 0

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        got = super().acquire(blocking, timeout)
        if got:
            with self._count_lock:
                self._held += 1
        return got

    __enter__ = acquire

    def release(self, n: int = 1) -> None:
        super().release(n)
        with self._count_lock:
            self._held -= n

    @property
    def held(self) -> int:
        return self._held


class _Registry:
    """Lazily created limiters keyed by (provider, base_url); first creator fixes the size.

    With a shared pool (:func:`share_across_processes`, set on every ``-n`` worker) a limiter is
    a :class:`~fabtest.llm.shared_limit.SharedSemaphore` whose slots every process of the run
    draws from; otherwise a process-local semaphore.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._limiters: dict[tuple[str, str], Limiter] = {}
        self._pool: str | None = None

    def share(self, pool: str | None) -> None:
        with self._lock:
            self._pool = pool
            self._limiters.clear()

    @property
    def shared(self) -> bool:
        return self._pool is not None

    def held(self) -> int:
        with self._lock:
            limiters = list(self._limiters.values())
        return sum(limiter.held for limiter in limiters)

    def get(self, provider: str, base_url: str | None, size: int) -> Limiter:
        key = (provider, (base_url or "").rstrip("/"))
        with self._lock:
            limiter = self._limiters.get(key)
            if limiter is None:
                if self._pool is not None:
                    from fabtest.llm.shared_limit import SharedSemaphore, slot_dir

                    limiter = SharedSemaphore(slot_dir(self._pool, provider, base_url), size)
                else:
                    limiter = CountingSemaphore(max(1, size))
                self._limiters[key] = limiter
            return limiter


_REGISTRY = _Registry()


def provider_semaphore(provider: str, base_url: str | None, size: int) -> Limiter:
    """The limiter bounding in-flight calls to one endpoint.

    Shared by every LLM instance (judge, simulator, worker threads) talking to the same
    provider and base URL, so together they never exceed ``size`` concurrent requests; under
    :func:`share_across_processes` that holds for every process of the run together. The size is
    taken from the first caller for a key.
    """
    return _REGISTRY.get(provider, base_url, size)


def share_across_processes(pool: str | None) -> None:
    """Draw every endpoint's slots from the slot directory ``pool`` (None: back to per process).

    Called once per process before any LLM is built: the xdist controller creates the directory
    (:func:`fabtest.llm.shared_limit.create_pool_dir`) and each worker passes it here.
    """
    _REGISTRY.share(pool)


def shares_across_processes() -> bool:
    """True once :func:`share_across_processes` was given a pool."""
    return _REGISTRY.shared


def calls_in_flight() -> int:
    """LLM calls this process has in flight now, over every endpoint (judge, simulator, built-in agents)."""
    return _REGISTRY.held()


def exception_is_timeout(exc: BaseException) -> bool:
    """Recognise timeouts from httpx, httpx2 or the stdlib without importing either library."""
    if isinstance(exc, TimeoutError):
        return True
    return any(cls.__name__ in ("TimeoutException", "ReadTimeout", "ConnectTimeout") for cls in type(exc).__mro__)


def exception_is_connection_error(exc: BaseException) -> bool:
    """Recognise dropped or refused connections (httpx/httpx2 transport errors, OSError)."""
    if isinstance(exc, ConnectionError):
        return True
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"NetworkError", "RemoteProtocolError"})


@dataclass
class RawAnswer:
    """What one successful HTTP attempt produced, before validation."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def parse_json_answer(text: str, schema: type[T]) -> T:
    """Validate ``text`` against ``schema``, tolerating a Markdown code fence around it."""
    fenced = _FENCE.match(text)
    return schema.model_validate_json(fenced.group(1) if fenced else text.strip())


def complete_validated(
    fetch: Callable[[], RawAnswer],
    *,
    schema: type[T] | None,
    policy: RetryPolicy,
    bad_output_retries: int,
    what: str,
    semaphore: Limiter,
    sleep: Callable[[float], None] = time.sleep,
    budget: RetryBudget | None = None,
) -> Completion[Any]:
    """One logical call: transport retries inside, then re-ask on empty or invalid output.

    The semaphore is held only while a request is in flight, never during backoff sleeps.
    Usage counts one call and the tokens of every attempt that answered; when the output never
    validates, :class:`LLMBadOutput` carries that usage as ``.usage``. Transport retries and
    re-asks are both paid from ``budget`` (see :mod:`fabtest.llm.retry_budget`).
    """

    def limited() -> RawAnswer:
        with semaphore:
            return fetch()

    usage = TokenUsage(calls=1)
    problem = ""
    attempts = max(0, bad_output_retries) + 1
    if budget is not None:
        budget.record_call()
    for number in range(attempts):
        if number and budget is not None and not budget.spend():
            error = LLMBadOutput(f"{what}: {problem}; not asked again: {budget_spent_message(budget)}")
            error.usage = usage  # type: ignore[attr-defined]
            raise error
        raw = call_with_retries(limited, policy=policy, what=what, sleep=sleep, budget=budget)
        usage.input_tokens += raw.input_tokens
        usage.output_tokens += raw.output_tokens
        if not raw.text.strip():
            problem = blocked_reason(raw.metadata) or "empty answer"
            continue
        if schema is None:
            return Completion(text=raw.text, usage=usage, model=raw.model, metadata=raw.metadata)
        try:
            parsed = parse_json_answer(raw.text, schema)
        except ValueError as exc:
            problem = f"answer does not match {schema.__name__}: {_shorten(str(exc))}; got {_shorten(raw.text)!r}"
            continue
        return Completion(text=raw.text, parsed=parsed, usage=usage, model=raw.model, metadata=raw.metadata)
    error = LLMBadOutput(f"{what}: no usable answer after {attempts} attempt(s); last problem: {problem}")
    error.usage = usage  # type: ignore[attr-defined]
    raise error


#: finish reasons that mean the provider refused to answer (Gemini's FinishReason, OpenAI's content_filter)
_BLOCKING_FINISH = frozenset({"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION", "IMAGE_SAFETY",
                              "content_filter"})


def blocked_reason(metadata: dict[str, Any]) -> str:
    """Why an empty answer is empty when the provider blocked it (a prompt block or a safety
    finish reason), named so the user can tell a refusal from a broken model; "" otherwise."""
    if metadata.get("block_reason"):
        return (f"the provider blocked the prompt (prompt_feedback.block_reason={metadata['block_reason']}): "
                "a safety filter refused it; rephrase the criterion or the conversation, or choose another "
                "model (fabtest sends no safety settings: the provider's defaults apply)")
    finish = str(metadata.get("finish_reason") or "")
    if finish.rsplit(".", 1)[-1] in _BLOCKING_FINISH:
        return (f"the answer was blocked for safety (finish_reason={finish.rsplit('.', 1)[-1]}): the provider "
                "withheld it; rephrase the criterion or the conversation, or choose another model (fabtest sends "
                "no safety settings: the provider's defaults apply)")
    return ""


def _shorten(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ProviderBase:
    """What every provider shares: settings, retry policy, the endpoint's semaphore, and the
    two protocol methods, which both go through the provider's one ``_call``."""

    provider: str

    def _setup(self, settings: LLMSettings, base_url: str | None, *, backoff_base_s: float, backoff_max_s: float,
               bad_output_retries: int, retry_budget: RetryBudget | None = None) -> None:
        self.settings = settings
        self.model = settings.model
        self.base_url = base_url
        self._policy = RetryPolicy(settings.max_retries, backoff_base_s, backoff_max_s)
        self._bad_output_retries = bad_output_retries
        self._semaphore = provider_semaphore(self.provider, base_url, settings.max_concurrency)
        self._latency = latency_tracker(self.provider, base_url)
        self._latency_files = latency_tracker(self.provider, base_url, files=True)
        self._budget = retry_budget

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def complete(self, prompt: str, *, system: str | None = None, temperature: float | None = None) -> Completion[Any]:
        """Free text."""
        return self._call(prompt, None, system, temperature)

    def complete_json(
        self, prompt: str, schema: type[T], *, system: str | None = None, temperature: float | None = None
    ) -> Completion[T]:
        """Structured output for ``schema``, validated by pydantic."""
        return self._call(prompt, schema, system, temperature)

    def probe(self) -> None:
        """One cheap call (a few output tokens, at most two retries, no retry budget) proving that
        the host, the key and the model answer; raises :class:`LLMError` naming why not."""
        policy = RetryPolicy(min(2, self._policy.max_retries), self._policy.backoff_base_s, self._policy.backoff_max_s)

        def limited() -> None:
            with self._semaphore:
                self._probe_attempt()

        call_with_retries(limited, policy=policy, what=f"{self.provider} {self.model}")

    def _call(self, prompt: str, schema: type[T] | None, system: str | None,
              temperature: float | None) -> Completion[Any]:
        raise NotImplementedError

    def _probe_attempt(self) -> None:
        raise NotImplementedError


#: What the pre-flight probe asks; recognisable in a fake server's request log.
PROBE_PROMPT = "fabtest preflight check: reply with the word OK."
