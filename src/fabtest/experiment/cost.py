"""What a run cost: a dated price table per model, and the cost of every role (agent, judge,
simulator) per scenario, per experiment and between two experiments.

Prices are USD per million tokens. The defaults cover the Gemini models fabtest names; a project
overrides or adds models in ``[tool.fabtest.prices]`` (README "Cost"). Tokens of a model with no
price are still shown, their cost is ``None`` ("n/a") and the model is listed under ``unpriced``
with how to add it: an unknown price is never counted as 0. Cost is computed when the experiment
document is built, from the tokens each scenario recorded, so a stored experiment keeps the
prices it was costed with (``summary.cost.prices``).

Agent tokens come from each turn's ``AgentResponse.metadata["usage"]`` (the built-in agent, the
Gemini CLI's ``result.stats``, ACP's ``_meta.quota.token_count``, an HTTP response's
``metadata.usage``), priced with the turn's ``metadata["model"]``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "DEFAULT_PRICES",
    "PRICES_NOTE",
    "PRICES_TAKEN",
    "Price",
    "agent_turn_lines",
    "agent_turn_usage",
    "cost_delta",
    "cost_delta_by_id",
    "experiment_cost",
    "find_price",
    "price_table",
    "scenario_cost",
    "scenario_tokens",
    "summary_cost",
    "total_text",
    "unpriced_note",
]


class _Usage(Protocol):
    """One role's tokens (:class:`fabtest.experiment.model.UsageRecord` is one)."""

    @property
    def calls(self) -> int: ...

    @property
    def input_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...


class _Turn(Protocol):
    @property
    def metadata(self) -> Mapping[str, Any]: ...


class CostedResult(Protocol):
    """What costing reads of a scenario run (:class:`fabtest.experiment.model.ScenarioResult` is one).

    A protocol rather than an import keeps ``cost`` below ``model``, which counts agent tokens with it.
    """

    @property
    def usage(self) -> Mapping[str, _Usage]: ...

    @property
    def transcript(self) -> Sequence[_Turn]: ...

#: The day the default prices were taken.
PRICES_TAKEN = "2026-11-22"
#: Where they come from, and how sure they are.
PRICES_NOTE = (
    f"defaults taken {PRICES_TAKEN}: Gemini API paid tier, standard text rates for prompts up to 200k tokens "
    "(https://ai.google.dev/gemini-api/docs/pricing), read from third-party copies of that page, not from "
    "Google's page itself; longer prompts, cached input and batch discounts are not modelled. "
    "Check them and override in [tool.fabtest.prices]"
)
_DEFAULT_SOURCE = f"default ({PRICES_TAKEN})"


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million input and output tokens (thinking tokens are billed as output)."""

    input: float
    output: float
    source: str = _DEFAULT_SOURCE

    def usd(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


DEFAULT_PRICES: dict[str, Price] = {
    # gemini-2.5-pro: prompts over 200k tokens cost 2.50 / 15.00, not modelled here
    "gemini-2.5-pro": Price(1.25, 10.00),
    "gemini-2.5-flash": Price(0.30, 2.50),
    "gemini-2.5-flash-lite": Price(0.10, 0.40),
    "gemini-2.0-flash": Price(0.10, 0.40),  # deprecated by Google (shutdown announced for 2026-06-01)
    "gemini-2.0-flash-lite": Price(0.075, 0.30),
}


def price_table(overrides: Mapping[str, Any] | None = None) -> dict[str, Price]:
    """The defaults, with ``[tool.fabtest.prices]`` entries (``{input, output}``) replacing or adding models."""
    table = dict(DEFAULT_PRICES)
    for model, entry in (overrides or {}).items():
        data = entry if isinstance(entry, Mapping) else {"input": entry.input, "output": entry.output}
        table[str(model)] = Price(float(data["input"]), float(data["output"]), "[tool.fabtest.prices]")
    return table


def find_price(prices: Mapping[str, Price], model: str | None) -> Price | None:
    """The price of ``model`` (``models/gemini-2.5-flash`` is ``gemini-2.5-flash``), or None."""
    if not model:
        return None
    if model in prices:
        return prices[model]
    short = model.removeprefix("models/")
    return prices.get(short)


def _count(value: Any) -> int | None:
    """A token count, or None when it is not one: not a number, negative, NaN or infinite (an
    infinite count would end in ``OverflowError`` far from the field that held it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or not math.isfinite(value):
        return None
    return int(value)


def agent_turn_usage(metadata: Mapping[str, Any] | None) -> tuple[int, int, int] | None:
    """``(calls, input_tokens, output_tokens)`` an agent reported for one turn, or None.

    Reads ``metadata["usage"]``: ``{input_tokens, output_tokens, calls?}`` (OpenAI's
    ``prompt_tokens``/``completion_tokens`` too). ``calls`` defaults to 1. A usage that is not
    an object or has no readable token count is None (not counted).
    """
    usage = (metadata or {}).get("usage") if isinstance(metadata, Mapping) else None
    if not isinstance(usage, Mapping):
        return None
    inp = _count(usage.get("input_tokens", usage.get("prompt_tokens")))
    out = _count(usage.get("output_tokens", usage.get("completion_tokens")))
    if inp is None and out is None:
        return None
    calls = _count(usage.get("calls"))
    return (1 if calls is None else calls), inp or 0, out or 0


def usage_problem(metadata: Mapping[str, Any] | None) -> str | None:
    """The field of an agent turn's ``usage`` that is there but cannot be read as a token count
    (``usage.input_tokens = 'lots'``, ``inf``, ``-5``), or None. Such a turn's cost is unknown, not $0."""
    usage = (metadata or {}).get("usage") if isinstance(metadata, Mapping) else None
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        return f"usage = {_short(usage)} (not an object)"
    for key in ("input_tokens", "prompt_tokens", "output_tokens", "completion_tokens"):
        if key in usage and usage[key] is not None and _count(usage[key]) is None:
            return f"usage.{key} = {_short(usage[key])}"
    if agent_turn_usage(metadata) is None and usage:
        return f"usage = {_short(usage)} (no input_tokens or output_tokens)"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _agent_model(metadata: Mapping[str, Any] | None) -> str | None:
    model = (metadata or {}).get("model") if isinstance(metadata, Mapping) else None
    return model if isinstance(model, str) and model else None


def agent_turn_lines(metadata: Mapping[str, Any] | None) -> list[tuple[str | None, int, int, int]]:
    """``(model, calls, input_tokens, output_tokens)`` per model for one agent turn.

    ``usage.models`` (``{name: {input_tokens, output_tokens}}``, as the Gemini CLI's
    ``result.stats.models`` gives it) splits the turn by model; otherwise the whole turn is
    ``metadata["model"]``'s (None when not named).
    """
    counted = agent_turn_usage(metadata)
    if counted is None:
        return []
    models = metadata["usage"].get("models") if metadata else None
    split: list[tuple[str | None, int, int, int]] = []
    if isinstance(models, Mapping):
        for name, entry in models.items():
            part = agent_turn_usage({"usage": entry}) if isinstance(entry, Mapping) else None
            if part is None or not isinstance(name, str) or not name:
                split = []
                break
            split.append((name, 0, part[1], part[2]))
    if split:
        split[0] = (split[0][0], counted[0], split[0][2], split[0][3])
        return split
    return [(_agent_model(metadata), *counted)]


@dataclass(slots=True)
class _Line:
    """Tokens of one role on one model, and their cost (None: no price)."""

    role: str
    model: str | None
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float | None = 0.0

    def add(self, calls: int, inp: int, out: int, price: Price | None) -> None:
        self.calls += calls
        self.input_tokens += inp
        self.output_tokens += out
        if inp or out:
            self.usd = None if price is None or self.usd is None else self.usd + price.usd(inp, out)


def _lines(result: CostedResult, role_models: Mapping[str, str | None],
           prices: Mapping[str, Price]) -> list[_Line]:
    """One scenario's usage as (role, model) lines: agent turns by their own model, other roles
    by the model the experiment names for them (or the model their usage record names)."""
    lines: dict[tuple[str, str | None], _Line] = {}

    def line(role: str, model: str | None) -> _Line:
        return lines.setdefault((role, model), _Line(role, model))

    for role, usage in result.usage.items():
        if role == "agent":
            continue
        model = getattr(usage, "model", None) or role_models.get(role)
        line(role, model).add(usage.calls, usage.input_tokens, usage.output_tokens, find_price(prices, model))
    for turn in result.transcript:
        for model, calls, inp, out in agent_turn_lines(turn.metadata):
            line("agent", model).add(calls, inp, out, find_price(prices, model))
    if "agent" in result.usage and not any(role == "agent" for role, _ in lines):
        usage = result.usage["agent"]  # charged by a custom step, not reported per turn
        model = getattr(usage, "model", None)
        line("agent", model).add(usage.calls, usage.input_tokens, usage.output_tokens, find_price(prices, model))
    return list(lines.values())


def _sum(values: Iterable[float | None]) -> float:
    return sum(v for v in values if v is not None)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 8)


def scenario_cost(result: CostedResult, role_models: Mapping[str, str | None],
                  prices: Mapping[str, Price]) -> dict[str, Any]:
    """``{"usd", "complete", "roles": {role: {"model", "usd"}}}`` for one scenario run.

    ``usd`` sums the priced tokens; ``complete`` is false when some tokens had no price (their
    role's ``usd`` is None). A role spread over several models has ``model`` None and ``models``.
    """
    all_lines = _lines(result, role_models, prices)
    roles: dict[str, dict[str, Any]] = {}
    for ln in all_lines:
        entry = roles.setdefault(ln.role, {"model": ln.model, "usd": 0.0})
        if entry["model"] != ln.model:
            entry.setdefault("models", [entry["model"]]).append(ln.model)
            entry["model"] = None
        entry["usd"] = None if entry["usd"] is None or ln.usd is None else entry["usd"] + ln.usd
    for entry in roles.values():
        entry["usd"] = _round(entry["usd"])
    return {"usd": _round(_sum(ln.usd for ln in all_lines)), "complete": all(ln.usd is not None for ln in all_lines),
            "roles": dict(sorted(roles.items()))}


def scenario_tokens(result: CostedResult) -> int:
    """Input and output tokens of every role of one scenario run (what :func:`scenario_cost` prices)."""
    return sum(ln.input_tokens + ln.output_tokens for ln in _lines(result, {}, {}))


def experiment_cost(results: Sequence[CostedResult], role_models: Mapping[str, str | None],
                    prices: Mapping[str, Price]) -> dict[str, Any]:
    """The summary ``cost`` block: per role and model tokens and USD, the total, what had no price.

    ``total_usd`` sums what could be priced; ``complete`` says whether that is everything.
    """
    merged: dict[tuple[str, str | None], _Line] = {}
    for result in results:
        for ln in _lines(result, role_models, prices):
            into = merged.setdefault((ln.role, ln.model), _Line(ln.role, ln.model))
            into.calls += ln.calls
            into.input_tokens += ln.input_tokens
            into.output_tokens += ln.output_tokens
            into.usd = None if into.usd is None or ln.usd is None else into.usd + ln.usd
    rows = sorted(merged.values(), key=lambda ln: (ln.role, ln.model or ""))
    roles: dict[str, dict[str, Any]] = {}
    for ln in rows:
        entry = roles.setdefault(ln.role, {"models": [], "calls": 0, "input_tokens": 0, "output_tokens": 0, "usd": 0.0})
        entry["models"].append(ln.model)
        entry["calls"] += ln.calls
        entry["input_tokens"] += ln.input_tokens
        entry["output_tokens"] += ln.output_tokens
        entry["usd"] = None if entry["usd"] is None or ln.usd is None else entry["usd"] + ln.usd
    for entry in roles.values():
        entry["usd"] = _round(entry["usd"])
    used = {ln.model for ln in rows if ln.model and (ln.input_tokens or ln.output_tokens)}
    return {
        "currency": "USD",
        "total_usd": _round(_sum(ln.usd for ln in rows)),
        "complete": all(ln.usd is not None for ln in rows),
        "roles": roles,
        "lines": [{"role": ln.role, "model": ln.model, "calls": ln.calls, "input_tokens": ln.input_tokens,
                   "output_tokens": ln.output_tokens, "usd": _round(ln.usd)} for ln in rows],
        "unpriced": [{"role": ln.role, "model": ln.model, "input_tokens": ln.input_tokens,
                      "output_tokens": ln.output_tokens} for ln in rows if ln.usd is None],
        "prices": {m: {"input": p.input, "output": p.output, "source": p.source}
                   for m in sorted(used) if (p := find_price(prices, m)) is not None},
        "note": PRICES_NOTE,
    }


def summary_cost(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """``summary.cost`` when it has the shape renderers need, else None (an older or hand-edited file)."""
    spent = summary.get("cost")
    if not isinstance(spent, dict) or not isinstance(spent.get("lines"), list) or not spent["lines"]:
        return None
    keys = {"role": str, "calls": int, "input_tokens": int, "output_tokens": int}
    for ln in spent["lines"]:
        if not isinstance(ln, dict) or any(not isinstance(ln.get(k), t) for k, t in keys.items()) \
                or not isinstance(ln.get("usd"), (int, float, type(None))) or isinstance(ln.get("usd"), bool):
            return None
    if (not isinstance(spent.get("total_usd"), (int, float, type(None)))
            or not isinstance(spent.get("unpriced", []), list)):
        return None
    if not all(isinstance(e, dict) for e in spent.get("unpriced", [])):
        return None
    return spent


def total_text(spent: Mapping[str, Any]) -> str:
    """The summary's total: dollars, saying so when some tokens had no price."""
    from fabtest.experiment.fmt import usd

    if spent.get("complete", True):
        return usd(spent.get("total_usd"))
    if not any(ln.get("usd") for ln in spent.get("lines") or []):
        return "n/a (no price for any tokens)"
    return f"{usd(spent.get('total_usd'))} (priced tokens only; the n/a rows are not included)"


def unpriced_note(entry: Mapping[str, Any]) -> str:
    """One line saying why tokens have no cost and how to give them one."""
    role, model = entry.get("role"), entry.get("model")
    tokens = f"{entry.get('input_tokens', 0):,} in / {entry.get('output_tokens', 0):,} out tokens"
    if not model:
        return (f"cost n/a for the {role} ({tokens}): it reported tokens without naming its model; "
                "return metadata {\"model\": \"...\", \"usage\": {...}} (docs: \"Plug in a Python agent\")")
    return (f"cost n/a for model {model!r} ({role}, {tokens}): add it to pyproject.toml, e.g. "
            f"[tool.fabtest.prices] \"{model}\" = {{ input = 0.30, output = 2.50 }} (USD per million tokens)")


def cost_delta(baseline: Iterable[Mapping[str, Any]], current: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Cost of the scenarios both experiments ran (by stable id), baseline vs current.

    Entries are scenario results (or lean index entries) with ``cost``/``cost_usd``. Only
    scenarios costed completely on both sides are summed; the others are counted as
    ``unpriced``. None when neither side recorded any cost (older files).
    """
    def per_id(entries: Iterable[Mapping[str, Any]]) -> dict[str, tuple[float, bool]] | None:
        out: dict[str, tuple[float, bool]] = {}
        seen = False
        for e in entries:
            usd, complete = _entry_cost(e)
            if usd is None:
                continue
            seen = True
            prev = out.get(str(e.get("id")), (0.0, True))
            out[str(e.get("id"))] = (prev[0] + usd, prev[1] and complete)
        return out if seen else None

    return cost_delta_by_id(per_id(baseline), per_id(current))


def cost_delta_by_id(b: dict[str, tuple[float, bool]] | None,
                     c: dict[str, tuple[float, bool]] | None) -> dict[str, Any] | None:
    """``cost_delta`` from each side's ``{id: (usd of every run, complete)}`` (None: a side
    recorded no cost), for a caller that added the costs up already (a streamed comparison)."""
    if b is None and c is None:
        return None
    b, c = b or {}, c or {}
    shared = set(b) & set(c)
    priced = sorted(sid for sid in shared if b[sid][1] and c[sid][1])
    b_usd, c_usd = sum(b[s][0] for s in priced), sum(c[s][0] for s in priced)
    return {
        "label": "cost of the shared scenarios (USD, every run of each)",
        "scenarios": len(priced),
        "unpriced": len(shared) - len(priced),
        "baseline_usd": _round(b_usd),
        "current_usd": _round(c_usd),
        "delta_usd": _round(c_usd - b_usd),
        "ratio": _round(c_usd / b_usd) if b_usd else None,
    }


def _entry_cost(entry: Mapping[str, Any]) -> tuple[float | None, bool]:
    if "cost_usd" in entry:  # a lean index entry
        usd = entry.get("cost_usd")
        return (float(usd) if isinstance(usd, (int, float)) else None), bool(entry.get("cost_complete", True))
    cost = entry.get("cost")
    if isinstance(cost, Mapping) and isinstance(cost.get("usd"), (int, float)):
        return float(cost["usd"]), bool(cost.get("complete", True))
    return None, True
