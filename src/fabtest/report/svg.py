"""Inline SVG bar charts drawn in Python: the report must work offline, with no JS or CDN."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

__all__ = ["delta_chart", "paired_chart", "rate_chart", "rate_color"]

_WIDTH = 760
_LABEL_W = 220
_VALUE_W = 70
_ROW_H = 26
_BAR_H = 16
_FONT = "font-family:-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif;font-size:12px"


def rate_color(rate: float | None) -> str:
    """Green / amber / red by rate, grey when there is nothing to rate: each at least 4.5:1 on the
    report's white and light backgrounds (WCAG AA contrast; the amber was 2.48:1 before)."""
    if rate is None:
        return "#5c656d"
    if rate >= 0.8:
        return "#237032"
    if rate >= 0.6:
        return "#a65300"
    return "#c92a2a"


def _label(text: str, y: float) -> str:
    short = text if len(text) <= 30 else text[:29] + "…"
    return (
        f'<text x="{_LABEL_W - 10}" y="{y}" text-anchor="end" dominant-baseline="middle" fill="#343a40">'
        f"<title>{escape(text)}</title>{escape(short)}</text>"
    )


def _frame(height: int, body: list[str], title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(title)}" '
        f'viewBox="0 0 {_WIDTH} {height}" width="100%" style="max-width:{_WIDTH}px;{_FONT}">'
        + "".join(body)
        + "</svg>"
    )


def rate_chart(
    items: Sequence[tuple[str, float | None, str]], title: str = "rates", colors: Sequence[str] | None = None
) -> str:
    """Horizontal bars of rates in [0, 1]: ``(label, rate, note shown after the value)``.

    Bars are coloured by rate unless ``colors`` gives one colour per item.
    """
    plot_w = _WIDTH - _LABEL_W - _VALUE_W - 50
    height = max(1, len(items)) * _ROW_H + 24
    body = []
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        x = _LABEL_W + tick * plot_w
        body.append(f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height - 20}" stroke="#e9ecef"/>')
        body.append(f'<text x="{x:.1f}" y="{height - 6}" text-anchor="middle" fill="#5c656d">{int(tick * 100)}%</text>')
    for i, (label, rate, note) in enumerate(items):
        y = i * _ROW_H + 4
        mid = y + _BAR_H / 2
        body.append(_label(label, mid))
        body.append(f'<rect x="{_LABEL_W}" y="{y}" width="{plot_w}" height="{_BAR_H}" rx="3" fill="#f1f3f5"/>')
        if rate is not None:
            w = max(0.0, min(1.0, rate)) * plot_w
            fill = colors[i] if colors else rate_color(rate)
            body.append(f'<rect x="{_LABEL_W}" y="{y}" width="{w:.1f}" height="{_BAR_H}" rx="3" fill="{fill}"/>')
        value = "n/a" if rate is None else f"{rate * 100:.1f}%"
        body.append(
            f'<text x="{_LABEL_W + plot_w + 8}" y="{mid}" dominant-baseline="middle" fill="#212529" font-weight="600">'
            f"{value}<tspan fill=\"#5c656d\" font-weight=\"400\"> {escape(note)}</tspan></text>"
        )
    return _frame(height, body, title)


def paired_chart(items: Sequence[tuple[str, float | None, float | None]], title: str = "baseline vs current") -> str:
    """Two bars per label: baseline (grey) above current (blue)."""
    plot_w = _WIDTH - _LABEL_W - _VALUE_W - 50
    row_h = 34
    height = max(1, len(items)) * row_h + 40
    body = [
        f'<rect x="{_LABEL_W}" y="{height - 16}" width="10" height="10" fill="#adb5bd"/>'
        f'<text x="{_LABEL_W + 14}" y="{height - 7}" fill="#495057">baseline</text>'
        f'<rect x="{_LABEL_W + 90}" y="{height - 16}" width="10" height="10" fill="#1c7ed6"/>'
        f'<text x="{_LABEL_W + 104}" y="{height - 7}" fill="#495057">current</text>'
    ]
    for i, (label, base, cur) in enumerate(items):
        y = i * row_h + 4
        body.append(_label(label, y + 12))
        for j, (value, color) in enumerate(((base, "#adb5bd"), (cur, "#1c7ed6"))):
            by = y + j * 13
            body.append(f'<rect x="{_LABEL_W}" y="{by}" width="{plot_w}" height="11" rx="2" fill="#f1f3f5"/>')
            if value is not None:
                body.append(f'<rect x="{_LABEL_W}" y="{by}" width="{max(0.0, min(1.0, value)) * plot_w:.1f}" '
                            f'height="11" rx="2" fill="{color}"/>')
            text = "n/a" if value is None else f"{value * 100:.1f}%"
            body.append(f'<text x="{_LABEL_W + plot_w + 8}" y="{by + 6}" dominant-baseline="middle" '
                        f'fill="#495057">{text}</text>')
    return _frame(height, body, title)


def delta_chart(items: Sequence[tuple[str, float | None]], title: str = "deltas") -> str:
    """Diverging bars of changes in percentage points around a zero line (green up, red down)."""
    plot_w = _WIDTH - _LABEL_W - _VALUE_W - 50
    values = [abs(d) for _, d in items if d is not None]
    scale = max([0.1, *values])
    height = max(1, len(items)) * _ROW_H + 24
    zero = _LABEL_W + plot_w / 2
    body = [f'<line x1="{zero:.1f}" y1="0" x2="{zero:.1f}" y2="{height - 20}" stroke="#adb5bd"/>']
    for tick in (-scale, 0.0, scale):
        x = zero + tick / scale * plot_w / 2
        body.append(f'<text x="{x:.1f}" y="{height - 6}" text-anchor="middle" '
                    f'fill="#5c656d">{tick * 100:+.0f}pp</text>')
    for i, (label, delta) in enumerate(items):
        y = i * _ROW_H + 4
        mid = y + _BAR_H / 2
        body.append(_label(label, mid))
        if delta is None:
            body.append(f'<text x="{zero + 6:.1f}" y="{mid}" dominant-baseline="middle" '
                        'fill="#5c656d">not compared</text>')
            continue
        w = abs(delta) / scale * plot_w / 2
        x = zero if delta >= 0 else zero - w
        color = "#237032" if delta > 0.01 else "#c92a2a" if delta < -0.01 else "#5c656d"
        body.append(f'<rect x="{x:.1f}" y="{y}" width="{max(w, 1.5):.1f}" height="{_BAR_H}" rx="3" fill="{color}"/>')
        body.append(
            f'<text x="{_LABEL_W + plot_w + 8}" y="{mid}" dominant-baseline="middle" fill="{color}" font-weight="600">'
            f"{delta * 100:+.1f}pp</text>"
        )
    return _frame(height, body, title)
