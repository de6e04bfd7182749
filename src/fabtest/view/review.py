"""The review panel of an experiment's page: the judge's agreement with the labels so far (Cohen's
kappa with its 95 % interval) and a queue of judged checks worth a person's look.

The queue puts first what a label is most likely to change: checks whose judge samples split (the
judge's least confident), then checks in scenarios that flaked, then checks of a criterion the
robustness audit (``fabtest rejudge --perturb``) flagged; checks already labelled leave it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fabtest.judging.render import split_note
from fabtest.view.labels import agreement, judged_checks
from fabtest.view.layout import as_dict, conversation_path, e, link

__all__ = ["kappa_interval", "review_panel", "review_queue"]

_SHOWN = 50


def kappa_interval(examples: list[dict[str, Any]]) -> tuple[float, float] | None:
    """The 95 % interval of the judge's kappa against the labels, from Cohen's (1960) large-sample
    standard error sqrt(p_o (1 - p_o) / (n (1 - p_e)^2)); None below two labels or when kappa is
    undefined (one class only)."""
    pairs = [(str(x.get("verdict")), str(x.get("judge"))) for x in examples if x.get("judge") in ("passed", "failed")]
    n = len(pairs)
    if n < 2:
        return None
    p_o = sum(a == b for a, b in pairs) / n
    p_e = sum((sum(a == c for a, _ in pairs) / n) * (sum(b == c for _, b in pairs) / n) for c in ("passed", "failed"))
    if p_e >= 1:
        return None
    kappa = (p_o - p_e) / (1 - p_e)
    se = math.sqrt(p_o * (1 - p_o) / (n * (1 - p_e) ** 2))
    return max(-1.0, kappa - 1.96 * se), min(1.0, kappa + 1.96 * se)


def review_queue(
    doc: Mapping[str, Any], labelled: set[tuple[str, int, int]]
) -> list[tuple[str, dict[str, Any], int, Mapping[str, Any]]]:
    """(why, run, check index, check) of every unlabelled judged check worth a look, most useful first."""
    var = as_dict(doc.get("variance"))
    flaky = {str(i) for i in var.get("flaky") or []}
    flagged = {str(n) for n in as_dict(doc.get("robustness")).get("flagged") or []}
    found: list[tuple[int, str, dict[str, Any], int, Mapping[str, Any]]] = []
    for run in doc.get("scenario_results") or []:
        if not isinstance(run, dict):
            continue
        sid, it = str(run.get("id")), int(run.get("iteration") or 1)
        for index, check in judged_checks(run):
            if (sid, it, index) in labelled:
                continue
            note = split_note(dict(check))
            if note:
                found.append((0, f"the judge's samples split ({note})", run, index, check))
            elif sid in flaky:
                found.append((1, "the scenario is flaky", run, index, check))
            elif str(check.get("criterion")) in flagged:
                found.append((2, "the robustness audit flagged the criterion", run, index, check))
    found.sort(key=lambda f: f[0])
    return [(why, run, index, check) for _, why, run, index, check in found]


def review_panel(doc: Mapping[str, Any], examples: list[dict[str, Any]]) -> str:
    """The panel: agreement so far and the queue (its first 50), or how to start labelling."""
    exp_id = str(as_dict(doc.get("experiment")).get("id"))
    labelled = {(str(x.get("scenario")), int(x.get("iteration") or 1), int(x.get("check") or 0))
                for x in examples if x.get("kind") != "conversation"}
    runs = sum(1 for x in examples if x.get("kind") == "conversation")
    queue = review_queue(doc, labelled)
    so_far = agreement(examples)
    if so_far["labels"]:
        interval = kappa_interval(examples)
        kappa = "undefined (one verdict only so far)" if so_far["kappa"] is None else f"{so_far['kappa']:.2f}" + (
            f" (95 % interval {interval[0]:.2f} to {interval[1]:.2f})" if interval else "")
        whole = (f" ({runs} on a whole run: the person against the run's outcome)" if runs else "")
        head = (f'<p id="agreement">{so_far["labels"]} label(s) in <code>{e(exp_id)}.labels.yaml</code>{whole}: '
                'the judge agrees '
                f'with {so_far["agreement"]:.0%}; Cohen\'s kappa {e(kappa)}. Run <code>fabtest calibrate '
                f"results/{e(exp_id)}.labels.yaml</code> to judge them again.</p>")
    else:
        head = ('<p id="agreement" class="muted">No labels yet: open a conversation in the served view and mark the '
                "judge's verdicts right or wrong.</p>")
    def where(run: dict[str, Any]) -> str:
        it = int(run.get("iteration") or 1)
        return link("../", conversation_path(exp_id, str(run.get("id")), it), f"{run.get('name')} · run {it}")

    items = "".join(
        f'<li>{where(run)} · <b>{e(check.get("criterion"))}</b> {e(check.get("status"))}'
        + (f" on turn {e(check.get('turn'))}" if check.get("turn") is not None else "")
        + f' <span class="muted">({e(why)})</span></li>'
        for why, run, _, check in queue[:_SHOWN])
    more = f'<p class="muted">and {len(queue) - _SHOWN} more.</p>' if len(queue) > _SHOWN else ""
    listed = (f'<h3>Worth reviewing ({len(queue)})</h3><ul class="plain" id="review-queue">{items}</ul>{more}' if queue
              else '<p class="muted">Nothing in the review queue '
              '(no split, flaky or flagged judged check left unlabelled).</p>')
    return f'<h2>Review</h2><div class="panel" id="review">{head}{listed}</div>'
