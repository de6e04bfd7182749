"""The parts of the console summary that grow with the run: variance over many iterations and
many failures, each kept to a bounded number of lines (issue 31, "console at scale").

A summary that prints a line per iteration or per failure scrolls away under a long run; these
sections say the same as a distribution (pass rates per run as a histogram line) and as groups
(failures by scenario and message, with counts, the first few in full). Everything else stays in
the experiment JSON and ``fabtest view``.
"""

from __future__ import annotations

from typing import Any

from fabtest.experiment.fmt import count, pct
from fabtest.experiment.spool import MESSAGE_CHARS  # the streamed summary keeps no more of a message

__all__ = ["failure_lines", "rate_histogram"]

_GROUPS = 10  # failure groups listed
_FULL = 3  # of which shown with their whole message
_FULL_LINES = 6  # lines of a message shown in full
_LINE_CHARS = 160
_BARS = " ▁▂▃▄▅▆▇█"
_BANDS = 11  # 0-9 %, 10-19 %, ..., 90-99 %, 100 %


def rate_histogram(rates: list[float | None], label: str) -> list[str]:
    """Pass rates per run as a distribution: one bar per 10 % band, the bands' counts, min/median/max."""
    known = sorted(r for r in rates if r is not None)
    if not known:
        return []
    bands = [0] * _BANDS
    for rate in known:
        bands[min(int(rate * 10 + 1e-9), _BANDS - 1)] += 1
    top = max(bands)
    bars = "".join(_BARS[0 if n == 0 else max(1, round(n / top * (len(_BARS) - 1)))] for n in bands)
    median = known[len(known) // 2] if len(known) % 2 else (known[len(known) // 2 - 1] + known[len(known) // 2]) / 2
    filled = ", ".join(f"{_band(i)}: {count(n)}" for i, n in enumerate(bands) if n)
    return [f"  {label} per run: 0% ▕{bars}▏ 100%   min {pct(known[0])}, median {pct(median)}, max {pct(known[-1])}",
            f"    runs per band: {filled}"]


def _band(i: int) -> str:
    return "100%" if i == _BANDS - 1 else f"{i * 10}-{i * 10 + 9}%"


def _headline(message: str) -> str:
    """The first line of a failure: its step (``file:line: words``) or the whole short message."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    return first.strip()


def _clip(line: str) -> str:
    return line if len(line) <= _LINE_CHARS else line[: _LINE_CHARS - 1] + "…"


def failure_lines(results: list[Any]) -> list[str]:
    """Failed runs grouped by scenario and the first line of their message (the failing step),
    most frequent first; the first few groups with their whole message, the rest one line each."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in results:
        if not isinstance(entry, dict) or entry.get("passed") is not False or entry.get("skipped"):
            continue
        message = str(entry.get("failure_message") or "")[:MESSAGE_CHARS]
        name = str(entry.get("name") or entry.get("id") or "?")
        key = (name, _headline(message) or f"({entry.get('failure_type') or 'failed'}, no message)")
        group = groups.setdefault(key, {"runs": 0, "messages": set(), "first": message,
                                        "type": entry.get("failure_type") or "failed"})
        group["runs"] += 1
        group["messages"].add(message)
    if not groups:
        return []
    failed = sum(g["runs"] for g in groups.values())
    scenarios = len({name for name, _ in groups})
    lines = ["", f"Failures: {count(failed)} failed run{'s' if failed != 1 else ''} in {scenarios} scenario"
                 f"{'s' if scenarios != 1 else ''}, {len(groups)} distinct (scenario, failing step); "
                 "most frequent first"]
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1]["runs"], kv[0]))
    width = len(str(ranked[0][1]["runs"])) + 1
    for i, ((name, headline), group) in enumerate(ranked[:_GROUPS]):
        times = f"{group['runs']}x".rjust(width)
        variants = len(group["messages"])
        also = f" ({variants} different messages; the first shown)" if variants > 1 and i < _FULL else ""
        if i < _FULL:
            lines.append(f"  {times}  {name} [{group['type']}]{also}")
            body = group["first"].strip().splitlines() or [headline]
            lines += ["  " + " " * (width + 2) + _clip(text) for text in body[:_FULL_LINES]]
            if len(body) > _FULL_LINES:
                lines.append("  " + " " * (width + 2) + f"... ({len(body) - _FULL_LINES} more lines in the JSON)")
        else:
            kind = group["type"]
            lines.append(f"  {times}  " + _clip(f"{name} [{kind}]: {headline}"))
    if len(ranked) > _GROUPS:
        rest = ranked[_GROUPS:]
        lines.append(f"  ... and {len(rest)} more group(s), {count(sum(g['runs'] for _, g in rest))} failed run(s) "
                     "(every one in the JSON's scenario_results and in fabtest view)")
    return lines
