"""What ``fabtest mutate`` costs before it runs, and its table after: numbers from :mod:`.mutation`.

The estimate prices the judge calls the mutants need at the tokens an average judge call of the
recorded run spent (the same prompts on slightly changed text), with the price table of
:mod:`fabtest.experiment.cost`; a run that recorded no judge tokens, or a model without a price,
gives an unknown cost, never $0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from fabtest.experiment.cost import Price, find_price
from fabtest.experiment.model import ScenarioResult

__all__ = ["Estimate", "estimate", "render_mutation_text"]


@dataclass(frozen=True)
class Estimate:
    """The judge calls the mutants need and what they should cost (None: unknown, and why)."""

    calls: int
    model: str | None
    input_per_call: int | None
    output_per_call: int | None
    usd: float | None
    why_unknown: str = ""

    @property
    def line(self) -> str:
        """The line printed before anything is spent."""
        calls = f"{self.calls} judge call{'' if self.calls == 1 else 's'}"
        model = f" to {self.model}" if self.model else ""
        if self.calls == 0:
            return f"{calls}: the mutants need no judge, estimated cost $0"
        if self.usd is None:
            return f"{calls}{model}, estimated cost unknown ({self.why_unknown})"
        return (f"{calls}{model}, estimated cost ${self.usd:.4f} (about {self.input_per_call} input and "
                f"{self.output_per_call} output tokens a call, as the recorded run's judge calls)")

    def to_dict(self) -> dict[str, Any]:
        return {"judge_calls": self.calls, "model": self.model, "input_tokens_per_call": self.input_per_call,
                "output_tokens_per_call": self.output_per_call,
                "usd": None if self.usd is None else round(self.usd, 6), "unknown_because": self.why_unknown or None}


def estimate(results: Sequence[ScenarioResult], calls: int, model: str | None, prices: Mapping[str, Price]) -> Estimate:
    """``calls`` judge calls of ``model``, each as large as the recorded run's judge calls on average."""
    spent = [r.usage["judge"] for r in results if "judge" in r.usage]
    n = sum(u.calls for u in spent)
    if not n:
        return Estimate(calls, model, None, None, None, "the recorded run has no judge tokens to go by")
    inp = round(sum(u.input_tokens for u in spent) / n)
    out = round(sum(u.output_tokens for u in spent) / n)
    price = find_price(prices, model)
    if price is None:
        return Estimate(calls, model, inp, out, None,
                        f"no price for {model or 'the judge model'}: add it to [tool.fabtest.prices]")
    return Estimate(calls, model, inp, out, calls * price.usd(inp, out))


def _pct(share: float | None) -> str:
    return "n/a" if share is None else f"{share:.0%}"


def render_mutation_text(table: dict[str, Any], *, source: str, path: str | None) -> str:
    """The score, per operator and feature, per check (vacuous ones marked), and the lists."""
    overall = table["overall"]
    if not overall["mutants"]:
        return f"No mutant of {source}: no recorded run with turns.\n"
    lines = [f"Mutation score of {source}: {overall['caught']} of {overall['mutants']} mutants caught "
             f"({_pct(overall['score'])})", ""]
    for key, title in (("operators", "Operator"), ("features", "Feature")):
        lines.append(tabulate([[name, e["mutants"], e["caught"], _pct(e["score"])] for name, e in table[key].items()],
                              headers=[title, "Mutants", "Caught", "Score"]))
        lines.append("")
    lines.append(tabulate([[name, e["checks"], e["exposed"], e["caught"], _pct(e["share"])]
                           for name, e in table["criteria"].items()],
                          headers=["Criterion or check", "Checks", "Exposed", "Caught", "Share"]))
    lines.append("")
    lines.append(tabulate([[r["check"], r["exposed"], r["caught"], _pct(r["share"]), r["status"]]
                           for r in table["checks"]],
                          headers=["Check", "Exposed", "Caught", "Share", "Status"]))
    control = table.get("control") or {}
    if control.get("samples"):
        lines += ["", f"Control: the judge re-judged the {control['runs']} mutated run(s) unmutated, "
                      f"{control['samples']} time(s) each: {control['flipped']} of {control['rejudged']} verdicts "
                      f"flipped; {control['failures_not_counted']} failure(s) on mutants by noisy checks not counted "
                      f"as catches ({control['mutants_not_counted']} mutant(s) caught by noise alone)"]
    noisy = [f"{r['check']} (failed {r['flipped']} of {r['rejudged']} unmutated re-judgings)"
             for r in control.get("noisy") or ()]
    if noisy:
        lines += ["", "Noisy (failed their own unchanged run: their failures on mutants are the judge's noise):",
                  *[f"  - {label}" for label in noisy]]
    for title, key, why in (
        ("Vacuous", "vacuous", "changed by a mutant, never failed: it would not notice these mistakes"),
        ("Untouched", "untouched", "no mutant changed what they look at"),
        ("Not re-checkable", "not_recheckable", "cannot be run again from the record"),
    ):
        if table[key]:
            lines += ["", f"{title} ({why}):", *[f"  - {label}" for label in table[key]]]
    lines += ["", "Exposed: mutants that changed what the check looks at; caught: of those, the ones it failed."]
    if path:
        lines.append(f"Written to {path}")
    return "\n".join(lines) + "\n"
