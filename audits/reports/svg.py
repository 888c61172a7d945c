"""A small SVG line chart: linear or log axes, lines, markers, error bars, a legend below the axes.

The run report's figures are drawn with it instead of matplotlib: a figure is
a few kilobytes of text written in milliseconds (matplotlib spent about a
second per run report, more than sampling ten million trials), and it is a
pure function of its data, so a rebuilt report is byte for byte the same.
"""
from __future__ import annotations

import math
from html import escape

import numpy as np

#: matplotlib's default colour cycle, so figures look the same as the PNG ones
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
FONT = "font-family:DejaVu Sans,Arial,sans-serif"
LEFT, RIGHT, TOP, BOTTOM = 64, 24, 30, 44  # margins around the axes (pixels)
LEGEND_ROW = 15


def colour(i: int) -> str:
    return COLOURS[i % len(COLOURS)]


def _nice_ticks(low: float, high: float, count: int = 6) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart) covering [low, high]."""
    if not high > low:
        return [low]
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if m * step >= raw)
    first = math.ceil(low / step - 1e-9)
    return [round(k * step, 12) for k in range(first, int(math.floor(high / step + 1e-9)) + 1)]


def _label(value: float, log: bool) -> str:
    if log:
        exponent = round(math.log10(value))
        return f"{value:g}" if -2 <= exponent <= 2 else f"1e{exponent}"
    return f"{value:g}"


class Axis:
    """One axis' mapping from data to pixels (``start`` at ``low``, ``stop`` at ``high``)."""

    def __init__(self, low: float, high: float, start: float, stop: float, log: bool = False):
        if log:
            low, high = math.log10(low), math.log10(high)
        self.low, self.high, self.start, self.stop, self.log = low, high if high > low else low + 1.0, start, stop, log

    def __call__(self, values) -> np.ndarray:
        v = np.asarray(values, dtype=float)
        if self.log:
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.log10(v)
        return self.start + (v - self.low) / (self.high - self.low) * (self.stop - self.start)

    def ticks(self) -> list[float]:
        if self.log:
            return [10.0 ** k for k in range(math.ceil(self.low - 1e-9), math.floor(self.high + 1e-9) + 1)]
        return _nice_ticks(self.low, self.high)


class Chart:
    """Axes of ``width`` × ``height`` pixels (plus the legend below); add series, then :meth:`svg`."""

    def __init__(self, width: int, height: int, xlim, ylim, *, xlog: bool = False, ylog: bool = False,
                 title: str = "", xlabel: str = "", ylabel: str = "", y2lim=None, y2label: str = ""):
        self.width, self.height = width, height
        self.x = Axis(*xlim, LEFT, width - RIGHT - (40 if y2lim else 0), xlog)
        self.y = Axis(*ylim, height - BOTTOM, TOP, ylog)
        self.y2 = None if y2lim is None else Axis(*y2lim, height - BOTTOM, TOP)
        self.title, self.xlabel, self.ylabel, self.y2label = title, xlabel, ylabel, y2label
        self.body: list[str] = []
        self.legend: list[tuple[str, str, str, str]] = []  # (label, colour, dash, marker)

    def line(self, x, y, colour: str, *, width: float = 1.5, dash: str = "", marker: str = "", label: str = "",
             right: bool = False, size: float = 3.0) -> None:
        """A polyline through the finite points (``marker``: "o" dots, "x" crosses, "s" squares, "" none)."""
        px, py = self.x(x), (self.y2 if right else self.y)(y)
        keep = np.isfinite(px) & np.isfinite(py)
        px, py = px[keep], py[keep]
        if width > 0 and px.size > 1:
            points = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(px, py))
            style = f' stroke-dasharray="{dash}"' if dash else ""
            self.body.append(f'<polyline fill="none" stroke="{colour}" stroke-width="{width}"{style} '
                             f'points="{points}"/>')
        for a, b in zip(px, py):
            self.body.append(_marker(marker, a, b, size, colour))
        if label:
            self.legend.append((label, colour, dash if width > 0 else "none", marker))

    def segment(self, x0, y0, x1, y1, colour: str, width: float = 1.0) -> None:
        """A straight segment between two data points (error bars, vertical markers)."""
        (a, c), (b, d) = self.x([x0, x1]), self.y([y0, y1])
        self.body.append(f'<line x1="{a:.1f}" y1="{b:.1f}" x2="{c:.1f}" y2="{d:.1f}" stroke="{colour}" '
                         f'stroke-width="{width}"/>')

    def svg(self) -> bytes:
        """The whole chart as SVG bytes."""
        x0, x1, y0, y1 = self.x.start, self.x.stop, self.y.start, self.y.stop
        rows = len(self.legend)
        full = self.height + (rows * LEGEND_ROW + 8 if rows else 0)
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{full}" '
               f'viewBox="0 0 {self.width} {full}" style="{FONT};font-size:11px">',
               f'<rect width="{self.width}" height="{full}" fill="white"/>']
        for axis, vertical in ((self.x, False), (self.y, True)):
            for tick in axis.ticks():
                p = float(axis([tick])[0])
                line = (f'<line x1="{x0}" y1="{p:.1f}" x2="{x1}" y2="{p:.1f}"' if vertical else
                        f'<line x1="{p:.1f}" y1="{y0}" x2="{p:.1f}" y2="{y1}"')
                out.append(line + ' stroke="#000" stroke-opacity="0.12"/>')
                text = escape(_label(tick, axis.log))
                out.append(f'<text x="{x0 - 4}" y="{p + 4:.1f}" text-anchor="end">{text}</text>' if vertical else
                           f'<text x="{p:.1f}" y="{y0 + 14}" text-anchor="middle">{text}</text>')
        if self.y2 is not None:
            for tick in self.y2.ticks():
                p = float(self.y2([tick])[0])
                out.append(f'<text x="{x1 + 4}" y="{p + 4:.1f}">{escape(_label(tick, False))}</text>')
            out.append(f'<text transform="translate({self.width - 6},{(y0 + y1) / 2:.0f}) rotate(-90)" '
                       f'text-anchor="middle">{escape(self.y2label)}</text>')
        out.append(f'<clipPath id="axes"><rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}"/></clipPath>')
        out.append('<g clip-path="url(#axes)">' + "".join(self.body) + "</g>")
        out.append(f'<rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}" fill="none" stroke="#000"/>')
        out.append(f'<text x="{(x0 + x1) / 2:.0f}" y="16" text-anchor="middle" font-size="12">'
                   f'{escape(self.title)}</text>')
        out.append(f'<text x="{(x0 + x1) / 2:.0f}" y="{y0 + 32}" text-anchor="middle">{escape(self.xlabel)}</text>')
        out.append(f'<text transform="translate(14,{(y0 + y1) / 2:.0f}) rotate(-90)" text-anchor="middle">'
                   f'{escape(self.ylabel)}</text>')
        for i, (label, col, dash, marker) in enumerate(self.legend):
            y = self.height + 4 + i * LEGEND_ROW
            if dash != "none":
                style = f' stroke-dasharray="{dash}"' if dash else ""
                out.append(f'<line x1="{x0}" y1="{y}" x2="{x0 + 28}" y2="{y}" stroke="{col}" stroke-width="1.5"'
                           f'{style}/>')
            out.append(_marker(marker, x0 + 14, y, 3.0, col))
            out.append(f'<text x="{x0 + 36}" y="{y + 4}">{escape(label)}</text>')
        out.append("</svg>")
        return ("\n".join(s for s in out if s) + "\n").encode()


def _marker(kind: str, x: float, y: float, size: float, colour: str) -> str:
    if kind == "o":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{size}" fill="{colour}"/>'
    if kind == "s":
        return f'<rect x="{x - size:.1f}" y="{y - size:.1f}" width="{2 * size}" height="{2 * size}" fill="{colour}"/>'
    if kind == "x":
        return (f'<path d="M{x - size:.1f},{y - size:.1f}L{x + size:.1f},{y + size:.1f}M{x - size:.1f},'
                f'{y + size:.1f}L{x + size:.1f},{y - size:.1f}" stroke="{colour}" stroke-width="2"/>')
    return ""
