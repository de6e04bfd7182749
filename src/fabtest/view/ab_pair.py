"""The two experiments of one ``fabtest ab`` in the view: found by their ``experiment.ab`` records,
marked as a pair in the list, and their comparison led by the A/B decision itself.

The decision (paired runs, bought on both arms) is not the fixed gate the comparison page computes
from two experiment files: the page shows both, the A/B decision first, because it is the one
``fabtest ab`` exited with.
"""

from __future__ import annotations

from collections.abc import Sequence

from fabtest.view.catalog import ExperimentRow
from fabtest.view.layout import compare_path, e, link

__all__ = ["ab_pair", "ab_pairs", "ab_panel", "ab_tag"]

_TONE = {"worse": "down", "not worse": "up", "undecided": "muted"}


def _arm(row: ExperimentRow) -> str:
    return str((row.ab or {}).get("arm") or "")


def ab_pair(base: ExperimentRow, cur: ExperimentRow) -> bool:
    """Whether ``base`` and ``cur`` are the baseline and current arm of the same ``fabtest ab``: each
    names the other (``experiment.ab.other``)."""
    if base.ab is None or cur.ab is None or _arm(base) != "baseline" or _arm(cur) != "current":
        return False
    return base.ab.get("other") == cur.id and cur.ab.get("other") == base.id


def ab_pairs(rows: Sequence[ExperimentRow]) -> list[tuple[ExperimentRow, ExperimentRow]]:
    """Every (baseline, current) pair of ``fabtest ab`` arms among ``rows``."""
    by_id = {r.id: r for r in rows}
    pairs = []
    for base in rows:
        other = by_id.get(str((base.ab or {}).get("other") or ""))
        if other is not None and ab_pair(base, other):
            pairs.append((base, other))
    return pairs


def ab_tag(row: ExperimentRow, rows: Sequence[ExperimentRow], root: str = "") -> str:
    """The list's mark of an A/B arm: its arm and ref, and a link to the pair's comparison ("" when
    ``row`` is no arm of a pair found in ``rows``)."""
    for base, cur in ab_pairs(rows):
        if row.id in (base.id, cur.id):
            ref = str((row.ab or {}).get("ref") or "")
            outcome = str((cur.ab or {}).get("outcome") or "")
            return (f'<span class="topic ab" title="fabtest ab: {e(_arm(row))} arm of {e(base.id)} → {e(cur.id)}">'
                    f'A/B {e(_arm(row))}{" " + e(ref) if ref else ""}</span> '
                    + link(root, compare_path(base.id, cur.id), f"A/B decision{': ' + outcome if outcome else ''}"))
    return ""


def ab_panel(base: ExperimentRow, cur: ExperimentRow) -> str:
    """The A/B decision that leads the pair's comparison page: verdict, why it stopped, rounds, runs
    per arm, and each arm's ref and commit ("" unless the two are one ``fabtest ab``'s arms)."""
    if not ab_pair(base, cur):
        return ""
    rec = cur.ab or {}
    outcome = str(rec.get("outcome") or "undecided")
    verdict = rec.get("verdict") or outcome
    arms = "".join(
        f'<tr><th scope="row">{e(_arm(r))}</th><td><code>{e((r.ab or {}).get("ref") or "–")}</code></td>'
        f'<td><code>{e(str((r.ab or {}).get("commit") or "–")[:8])}{"*" if (r.ab or {}).get("dirty") else ""}'
        f'</code></td><td class="num">{e(r.scenarios)}</td></tr>' for r in (base, cur))
    return ('<div class="panel" id="ab-decision"><h3>A/B decision (<code>fabtest ab</code>: both arms run, '
            'the same scenarios and iterations paired)</h3>'
            f'<p class="verdict {_TONE.get(outcome, "muted")}"><b>{e(verdict)}</b></p>'
            f'<p>Outcome: <b>{e(outcome)}</b>. Stopped: {e(rec.get("stopped") or "–")}. '
            f'Rounds: {e(rec.get("rounds") or "–")}. '
            f'Runs: baseline {e(base.scenarios)}, current {e(cur.scenarios)}.</p>'
            '<table><thead><tr><th scope="col">Arm</th><th scope="col">Ref</th><th scope="col">Commit</th>'
            f'<th scope="col" class="num">Runs</th></tr></thead><tbody>{arms}</tbody></table>'
            '<p class="muted">The sections below compare the two experiment files as '
            '<code>fabtest-compare</code> does; its gate there is the fixed one, not this paired decision.</p></div>')
