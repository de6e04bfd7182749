"""OpenTelemetry traces of a run (``[tool.fabtest] otel = true`` or ``--fabtest-otel``; the
``pytest-fabtest[otel]`` extra): the one module the engine calls for tracing.

Span tree (docs/otel.md)::

    fabtest.scenario <name>            fabtest.scenario.id, .verdicts, .failure_type ...
      chat <model>                     the simulator's (or judge's) LLM calls: gen_ai.* semantic conventions
      fabtest.turn <n>                 fabtest.turn.number, fabtest.topic
        invoke_agent <agent>           gen_ai.operation.name=invoke_agent, the agent's tokens
          <the agent's own spans>      a Python agent's spans nest here (context propagation)
          execute_tool <tool>          each tool call the agent reported
        chat <model>                   topic classification, criteria judged on the turn
      chat <model>                     the judge's late (soft) verdicts, on their worker threads

Everything is a no-op until :func:`enable`: without the setting the ``opentelemetry`` packages
are never imported. Context crosses threads only where fabtest carries it: :func:`carry` copies
the caller's ``contextvars`` (so the current span) into work handed to another thread, which the
agent worker thread and the judge's executor use; nothing relies on implicit propagation.
No message text, tool argument or result is put on a span (they may hold secrets): names,
numbers, verdicts and ids only; an error's message is redacted (:mod:`fabtest._internal.redaction`).
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from fabtest._internal.extras import install_command
from fabtest.errors import UsageError

if TYPE_CHECKING:
    from fabtest.conversation import AgentResponse
    from fabtest.experiment.model import ScenarioResult

__all__ = [
    "TracedLLM",
    "agent_span",
    "carry",
    "current_ids",
    "enable",
    "enabled",
    "end_scenario",
    "inject_headers",
    "scenario_active",
    "shutdown",
    "start_scenario",
    "traced",
    "turn_span",
]

_T = TypeVar("_T")
_tracer: Any = None  # an opentelemetry Tracer once enabled
_provider: Any = None  # the SDK TracerProvider fabtest made (flushed and shut down at the end)

EXTRA_HINT = install_command("otel")


def enabled() -> bool:
    return _tracer is not None


def enable(exporter: Any = None, where: str = "[tool.fabtest] otel") -> None:
    """Start tracing: spans go to ``exporter`` (tests: the SDK's in-memory exporter), else to the
    OTLP exporter the standard ``OTEL_EXPORTER_OTLP_*`` variables configure (protocol
    ``http/protobuf`` by default, ``grpc`` when that exporter is installed). A process that
    already set an SDK tracer provider keeps it (its exporters get fabtest's spans too). Without
    the extra: a one-line :class:`UsageError` naming it."""
    global _tracer, _provider
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError:
        raise UsageError(f"{where}: OpenTelemetry is not installed; {EXTRA_HINT}") from None
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider) and exporter is None:
        provider = current
    else:
        service = os.environ.get("OTEL_SERVICE_NAME", "fabtest")
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(SimpleSpanProcessor(exporter) if exporter is not None
                                    else BatchSpanProcessor(_otlp_exporter(where)))
        if not isinstance(current, TracerProvider):
            trace.set_tracer_provider(provider)  # a Python agent's trace.get_tracer() exports alongside
        _provider = provider
    _tracer = provider.get_tracer("fabtest")


def _otlp_exporter(where: str) -> Any:
    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf")
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        package = ("opentelemetry-exporter-otlp-proto-grpc" if protocol == "grpc"
                   else "opentelemetry-exporter-otlp-proto-http")
        raise UsageError(f"{where}: OTEL_EXPORTER_OTLP_PROTOCOL={protocol} needs {package} ({EXTRA_HINT})") from None
    return OTLPSpanExporter()  # endpoint, headers, timeout, compression: OTEL_EXPORTER_OTLP_* variables


def shutdown() -> None:
    """Flush and stop what :func:`enable` started (the end of the session)."""
    global _tracer, _provider
    if _provider is not None:
        _provider.force_flush()
        _provider.shutdown()
    _tracer = _provider = None


# -- scenario ----------------------------------------------------------------------------------------
class ScenarioSpan:
    """A started scenario span and the token that made it current on the scenario's thread."""

    def __init__(self, span: Any, token: Any) -> None:
        self.span, self.token = span, token


def start_scenario(name: str, attributes: Mapping[str, Any]) -> ScenarioSpan | None:
    """Start the scenario's span and make it current on this thread (None when not tracing)."""
    if _tracer is None:
        return None
    from opentelemetry import context, trace

    span = _tracer.start_span(f"fabtest.scenario {name}", attributes=_clean(attributes))
    return ScenarioSpan(span, context.attach(trace.set_span_in_context(span)))


def scenario_active(handle: ScenarioSpan | None) -> None:
    """The steps have run: the span stops being current (it ends with :func:`end_scenario`)."""
    if handle is not None and handle.token is not None:
        from opentelemetry import context

        context.detach(handle.token)
        handle.token = None


def end_scenario(handle: ScenarioSpan | None, result: ScenarioResult) -> None:
    """The scenario's outcome on its span (status, failure type, verdict counts), then end it."""
    if handle is None:
        return
    scenario_active(handle)
    from opentelemetry.trace import Status, StatusCode

    checks = [*result.evaluations, *result.expectations]
    verdicts = {s: sum(1 for c in checks if c.status == s)
                for s in ("passed", "failed", "inconclusive", "not_applicable", "skipped")}
    span = handle.span
    span.set_attributes(_clean({
        "fabtest.scenario.id": result.id, "fabtest.scenario.iteration": result.iteration,
        "fabtest.scenario.outcome": "skipped" if result.skipped else "passed" if result.passed else "failed",
        "fabtest.failure_type": result.failure_type, "fabtest.turns": result.turns,
        **{f"fabtest.verdicts.{k}": v for k, v in verdicts.items()},
        "fabtest.failed_checks": [c.criterion for c in checks if c.status == "failed"],
    }))
    if not result.passed and not result.skipped:
        span.set_status(Status(StatusCode.ERROR, _safe(result.failure_message or result.failure_type or "failed")))
    span.end()


# -- turns, agent calls, tool calls ----------------------------------------------------------------
@contextmanager
def turn_span(number: int) -> Iterator[Any]:
    """A span around one turn (current inside the block); yields it, or None when not tracing."""
    if _tracer is None:
        yield None
        return
    with _span(f"fabtest.turn {number}", {"fabtest.turn.number": number}) as span:
        yield span


def set_attribute(span: Any, key: str, value: Any) -> None:
    if span is not None and value is not None:
        span.set_attribute(key, value)


@contextmanager
def agent_span(agent: Any) -> Iterator[Callable[[AgentResponse], None]]:
    """A span around one agent call; yields ``record(response)``, which puts the agent's model and
    tokens on it and a child ``execute_tool`` span per tool call the agent reported."""
    if _tracer is None:
        yield lambda response: None
        return
    name = getattr(agent, "name", None) or type(agent).__name__
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": str(name)}
    with _span(f"invoke_agent {name}", attrs) as span:
        yield lambda response: _record_response(span, response)


def _record_response(span: Any, response: AgentResponse) -> None:
    from fabtest.experiment.cost import agent_turn_usage

    meta = response.metadata if isinstance(response.metadata, Mapping) else {}
    usage = agent_turn_usage(meta)
    model = meta.get("model")
    span.set_attributes(_clean({
        "gen_ai.response.model": model if isinstance(model, str) else None,
        "gen_ai.usage.input_tokens": usage[1] if usage else None,
        "gen_ai.usage.output_tokens": usage[2] if usage else None,
        "fabtest.tool_calls": len(response.tool_calls),
    }))
    for call in response.tool_calls:
        call_meta = call.metadata if isinstance(call.metadata, Mapping) else {}
        call_id = call_meta.get("id") or call_meta.get("tool_call_id")
        _tracer.start_span(f"execute_tool {call.name}", attributes=_clean({
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": str(call_id) if call_id is not None else None,
            "fabtest.tool.status": str(call_meta["status"]) if "status" in call_meta else None,
        })).end()


def inject_headers(headers: dict[str, str]) -> dict[str, str]:
    """``headers`` with the W3C ``traceparent`` (and ``tracestate``) of the current span, for an
    HTTP agent: its server's spans join the turn's trace."""
    if _tracer is not None:
        from opentelemetry.propagate import inject

        inject(headers)
    return headers


def current_ids() -> tuple[str, str] | None:
    """The current span's trace id and span id in hex (what :func:`inject_headers` sends), or None
    when not tracing: an agent's exported spans are found under them (:mod:`fabtest.agents.trace_calls`)."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"


def carry(fn: Callable[[], _T]) -> Callable[[], _T]:
    """``fn`` run in a copy of this thread's context (the current span, fabtest's call tags):
    what a thread started by fabtest or an executor runs keeps its parent explicitly."""
    ctx = contextvars.copy_context()
    return lambda: ctx.run(fn)


# -- LLM calls ---------------------------------------------------------------------------------------
class TracedLLM:
    """A judge or simulator LLM whose every call is a GenAI ``chat`` span (model, tokens, the
    call's purpose); everything else is the wrapped LLM's."""

    def __init__(self, llm: Any, role: str) -> None:
        self._llm, self._role = llm, role
        self.provider, self.model = getattr(llm, "provider", ""), getattr(llm, "model", "")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)

    def with_salt(self, salt: object) -> TracedLLM:
        from fabtest.llm.cache import salted

        return TracedLLM(salted(self._llm, salt), self._role)

    def complete(self, prompt: str, **kwargs: Any) -> Any:
        return self._traced(lambda: self._llm.complete(prompt, **kwargs))

    def complete_json(self, prompt: str, schema: Any, **kwargs: Any) -> Any:
        return self._traced(lambda: self._llm.complete_json(prompt, schema, **kwargs))

    def _traced(self, call: Callable[[], Any]) -> Any:
        if _tracer is None:
            return call()
        from fabtest.llm.calls import current_call

        tag = current_call()
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": self.provider or None,
                 "gen_ai.system": self.provider or None, "gen_ai.request.model": self.model or None,
                 "fabtest.role": self._role, "fabtest.llm.purpose": tag.purpose if tag else None,
                 "fabtest.criteria": tag.criterion_names if tag and tag.criteria else None}
        with _span(f"chat {self.model}".strip(), attrs) as span:
            completion = call()
            usage = getattr(completion, "usage", None)
            metadata = getattr(completion, "metadata", None)
            span.set_attributes(_clean({
                "gen_ai.response.model": getattr(completion, "model", None) or None,
                "gen_ai.usage.input_tokens": getattr(usage, "input_tokens", None),
                "gen_ai.usage.output_tokens": getattr(usage, "output_tokens", None),
                # a first attempt sent twice (fabtest.llm.hedging): why, and which answer was kept
                "fabtest.llm.hedged": metadata.get("hedged") if isinstance(metadata, dict) else None,
            }))
            return completion


def traced(llm: _T | None, role: str) -> _T | None:
    """``llm`` wrapped in :class:`TracedLLM` when tracing, else itself."""
    if llm is None or _tracer is None or isinstance(llm, TracedLLM):
        return llm
    return TracedLLM(llm, role)  # type: ignore[return-value]


@contextmanager
def _span(name: str, attrs: Mapping[str, Any]) -> Iterator[Any]:
    """A current span; an exception escaping it sets ``error.type`` and an ERROR status with the
    redacted message (the SDK's own exception event would carry unredacted text: an HTTP agent's
    URL with its token, an agent's reply)."""
    from opentelemetry.trace import Status, StatusCode

    with _tracer.start_as_current_span(name, attributes=_clean(attrs), record_exception=False,
                                       set_status_on_exception=False) as span:
        try:
            yield span
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR, _safe(str(exc))))
            raise


def _safe(message: str) -> str:
    """A message for a span: secrets replaced (fabtest._internal.redaction), cut to 300 characters."""
    from fabtest._internal.redaction import redact

    return redact(message)[:300]


def _clean(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes without None values (OpenTelemetry rejects them)."""
    return {k: v for k, v in attrs.items() if v is not None}
