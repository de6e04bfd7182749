"""Line charts over experiments, drawn server-side as inline SVG.

Why SVG from Python and not a bundled JS charting library: the static build must open from a CI
artifact or a file:// URL with nothing to fetch, every page is already rendered in Python, and
the charts need only lines, points, a band and tooltips. An SVG ``<a>`` around each point makes it
a link to its experiment and a ``<title>`` is its tooltip, with no script at all; there is no
third-party code, licence or minified bundle to ship and keep up to date.

For the keyboard and screen readers a chart is one tab stop (the ``<svg>``, labelled with what it
plots), its points are out of the tab order (a 299-point chart would be 299 stops), and a data
table in a closed disclosure under it gives every value and links every experiment.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

__all__ = ["PALETTE", "Point", "Series", "line_chart"]

PALETTE = ("#1c7ed6", "#2f9e44", "#f08c00", "#ae3ec9", "#0c8599", "#e8590c", "#5c940d", "#c2255c", "#495057")

_W, _H = 900, 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 96, 16, 16, 64
_FONT = "font-family:-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif;font-size:12px"


@dataclass(frozen=True, slots=True)
class Point:
    """One experiment's value; ``low``/``high`` the spread over its iterations when it ran several."""

    x: float
    value: float
    href: str
    tip: str
    low: float | None = None
    high: float | None = None
    #: the regression gate of fabtest-compare tripped against the previous experiment
    regressed: bool = False
    #: the row of the chart's data table this point is in (its experiment) and its value as text there
    label: str = ""
    shown: str = ""


@dataclass(slots=True)
class Series:
    name: str
    points: list[Point] = field(default_factory=list)


def _nice_max(value: float) -> float:
    """The round number (1, 2, 2.5 or 5 times a power of ten) at or above ``value``."""
    if value <= 0:
        return 1.0
    step = 10 ** math.floor(math.log10(value))
    return float(next(step * m for m in (1, 2, 2.5, 5, 10) if value <= step * m * (1 + 1e-9)))


def line_chart(
    series: Sequence[Series],
    title: str,
    ticks: Sequence[tuple[float, str]],
    y_format: Callable[[float], str],
    y_max: float | None = None,
    y_label: str = "",
    x_label: str = "",
) -> str:
    """One SVG chart: a line and points per series over shared x positions (``ticks`` labels
    them), y from 0 to ``y_max`` (else a round number above the data); a shaded band where a point
    has a spread; regressed points ringed in red. Every string is escaped."""
    xs = [p.x for s in series for p in s.points] or [0.0]
    x_lo, x_hi = min(xs), max(xs)
    tops = [p.high if p.high is not None else p.value for s in series for p in s.points]
    top = y_max if y_max is not None else _nice_max(max(tops, default=0.0))
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def sx(x: float) -> float:
        return _LEFT + (plot_w / 2 if x_hi == x_lo else (x - x_lo) / (x_hi - x_lo) * plot_w)

    def sy(y: float) -> float:
        return _TOP + plot_h - max(0.0, min(1.0, y / top)) * plot_h

    body: list[str] = [f"<title>{escape(title)}</title>"]
    shown_y: set[str] = set()
    for i in range(5):  # y grid and labels; a label the format rounds to one already drawn is left out
        v = top * i / 4
        y = sy(v)
        body.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_W - _RIGHT}" y2="{y:.1f}" stroke="#e9ecef"/>')
        if (text := y_format(v)) not in shown_y:
            shown_y.add(text)
            body.append(f'<text x="{_LEFT - 6}" y="{y:.1f}" text-anchor="end" dominant-baseline="middle" '
                        f'fill="#5c656d">{escape(text)}</text>')
    body.append(f'<line x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{_W - _RIGHT}" y2="{_TOP + plot_h}" stroke="#adb5bd"/>')
    every = max(1, len(ticks) // 12)  # at most about a dozen x labels, each once (many experiments a day share a date)
    last = None
    for i, (x, label) in enumerate(ticks):
        if i % every or label == last:
            continue
        last = label
        px = sx(x)
        short = label if len(label) <= 14 else label[:13] + "…"
        body.append(f'<line x1="{px:.1f}" y1="{_TOP + plot_h}" x2="{px:.1f}" y2="{_TOP + plot_h + 4}" '
                    'stroke="#adb5bd"/>')
        body.append(f'<text class="xtick" x="{px:.1f}" y="{_TOP + plot_h + 16}" text-anchor="end" fill="#5c656d" '
                    f'transform="rotate(-30 {px:.1f} {_TOP + plot_h + 16})"><title>{escape(label)}</title>'
                    f'{escape(short)}</text>')
    if y_label:
        body.append(f'<text x="12" y="{_TOP + plot_h / 2:.1f}" text-anchor="middle" fill="#495057" '
                    f'transform="rotate(-90 12 {_TOP + plot_h / 2:.1f})">{escape(y_label)}</text>')
    if x_label:
        body.append(f'<text x="{_W - _RIGHT}" y="{_H - 4}" text-anchor="end" fill="#495057">{escape(x_label)}</text>')
    for k, s in enumerate(series):
        color = PALETTE[k % len(PALETTE)]
        for run in _spread_runs(s.points):  # a band over consecutive points that have a spread
            upper = " ".join(f"{sx(p.x):.1f},{sy(p.high or 0):.1f}" for p in run)
            lower = " ".join(f"{sx(p.x):.1f},{sy(p.low or 0):.1f}" for p in reversed(run))
            body.append(f'<polygon class="band" points="{upper} {lower}" fill="{color}" fill-opacity="0.15" '
                        'stroke="none">'
                        f"<title>{escape(s.name)}: spread over iterations (min–max)</title></polygon>")
        for p in s.points:  # a whisker shows each point's spread, alone or in a band
            if p.low is None or p.high is None:
                continue
            body.append(f'<line x1="{sx(p.x):.1f}" y1="{sy(p.low):.1f}" x2="{sx(p.x):.1f}" y2="{sy(p.high):.1f}" '
                        f'stroke="{color}" stroke-opacity="0.5"/>')
        if len(s.points) >= 2:
            path = " ".join(f"{sx(p.x):.1f},{sy(p.value):.1f}" for p in s.points)
            body.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        # the points' colours once on their group, not on each of hundreds of points (issue 31: a static
        # build of 500 experiments in at most 50 MB); fill and stroke are inherited
        body.append(f'<g fill="{color}" stroke="#fff" stroke-width="1.5">')
        for p in s.points:
            ring = (f'<circle cx="{sx(p.x):.1f}" cy="{sy(p.value):.1f}" r="8" fill="none" stroke="#e03131" '
                    'stroke-width="2"/>'
                    if p.regressed else "")
            body.append(  # out of the tab order: the chart is one stop, its data table has the links
                f'<a class="point" href="{escape(p.href)}" tabindex="-1" data-series="{escape(s.name)}">{ring}'
                f'<circle cx="{sx(p.x):.1f}" cy="{sy(p.value):.1f}" r="4.5">'
                f"<title>{escape(p.tip)}</title></circle></a>"
            )
        body.append("</g>")
    count = len({p.href for s in series for p in s.points})
    label = f"{title}: {', '.join(s.name for s in series)} over {count} experiments (the data table follows)"
    return (
        '<figure class="chart"><svg xmlns="http://www.w3.org/2000/svg" role="group" tabindex="0" '
        f'aria-label="{escape(label)}" '
        f'viewBox="0 0 {_W} {_H}" width="100%" style="max-width:{_W}px;{_FONT}">' + "".join(body) + "</svg>"
        + _legend(series) + _data_table(series, title, y_format) + "</figure>"
    )


def _data_table(series: Sequence[Series], title: str, y_format: Callable[[float], str]) -> str:
    """The chart as a table (one row per experiment, a column per series), in a closed disclosure:
    what a screen reader or keyboard user reads instead of the points (WCAG 1.1.1 and 2.1.1)."""
    rows: dict[tuple[float, str], dict[str, Point]] = {}
    for s in series:
        for p in s.points:
            rows.setdefault((p.x, p.href), {})[s.name] = p
    head = "".join(f'<th scope="col">{escape(s.name)}</th>' for s in series)
    body = []
    for (_, href), cells in sorted(rows.items(), key=lambda kv: kv[0][0]):
        first = next(iter(cells.values()))
        values = []
        for s in series:
            values.append(f'<td class="num">{escape(_cell_text(cells.get(s.name), y_format))}</td>')
        body.append(f'<tr><th scope="row"><a href="{escape(href)}">{escape(first.label or href)}</a></th>'
                    f'{"".join(values)}</tr>')
    return (f'<details class="chart-data"><summary>{escape(title)}: data table</summary>'
            f'<table><thead><tr><th scope="col">experiment</th>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></details>')


def _cell_text(p: Point | None, y_format: Callable[[float], str]) -> str:
    if p is None:
        return ""
    text = p.shown or y_format(p.value)
    if p.low is not None and p.high is not None:
        text += f" (spread {y_format(p.low)}–{y_format(p.high)})"
    return text + (" REGRESSION" if p.regressed else "")


def _spread_runs(points: Sequence[Point]) -> list[list[Point]]:
    runs: list[list[Point]] = [[]]
    for p in points:
        if p.low is not None and p.high is not None:
            runs[-1].append(p)
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if len(r) >= 2]


def _legend(series: Sequence[Series]) -> str:
    items = [f'<span class="key"><i style="background:{PALETTE[k % len(PALETTE)]}"></i>{escape(s.name)}</span>'
             for k, s in enumerate(series)]
    if any(p.low is not None for s in series for p in s.points):
        items.append('<span class="key"><i style="background:#1c7ed6;opacity:.2"></i>spread over iterations</span>')
    if any(p.regressed for s in series for p in s.points):
        items.append('<span class="key"><i class="ring"></i>'
                     'regression (fabtest-compare gate vs the previous experiment)</span>')
    return '<figcaption class="legend">' + "".join(items) + "</figcaption>"
