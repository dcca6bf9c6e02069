"""The run's chart: loss (training, and validation at each evaluation with the best one starred) and tokens/s per
logged step, a change of world size marked on both, as an SVG document. Plain text, no plotting library: the trainer's
image writes it beside the model, and the local run writes the same chart.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from trainer.base.metrics.file import Record
from trainer.record.summary import latest_per_step, loss_series

CHART_FILE = "loss_and_throughput.svg"

WIDTH, PANEL_HEIGHT = 800, 240
LEFT, RIGHT, TOP, GAP, BOTTOM = 80, 20, 40, 50, 40
HEIGHT = TOP + 2 * PANEL_HEIGHT + GAP + BOTTOM
COLOURS = {"training": "#1f77b4", "validation": "#ff7f0e", "tokens/s": "#2ca02c", "marker": "#d62728"}
TICKS = 5


def nice_ticks(low: float, high: float, count: int = TICKS) -> list[float]:
    """About `count` round values (1, 2 or 5 times a power of ten apart) spanning [low, high]."""
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    return [first + i * step for i in range(math.ceil((high - first) / step) + 1)]


def label(value: float) -> str:
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.3g}"
    return f"{value:,.6g}"


@dataclass(frozen=True)
class Panel:
    """One plot area: its top edge and the data ranges its axes span."""

    top: float
    x_ticks: list[float]
    y_ticks: list[float]

    def x(self, value: float) -> float:
        low, high = self.x_ticks[0], self.x_ticks[-1]
        return LEFT + (value - low) / (high - low) * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        low, high = self.y_ticks[0], self.y_ticks[-1]
        return self.top + PANEL_HEIGHT - (value - low) / (high - low) * PANEL_HEIGHT

    def axes(self, y_name: str, x_name: str | None) -> list[str]:
        right, bottom = WIDTH - RIGHT, self.top + PANEL_HEIGHT
        parts = [
            f'<rect x="{LEFT}" y="{self.top}" width="{right - LEFT}" height="{PANEL_HEIGHT}" fill="none" '
            'stroke="#333"/>'
        ]
        for tick in self.y_ticks:
            y = self.y(tick)
            parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#ddd"/>')
            parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{label(tick)}</text>')
        for tick in self.x_ticks:
            x = self.x(tick)
            parts.append(f'<line x1="{x:.1f}" y1="{self.top}" x2="{x:.1f}" y2="{bottom}" stroke="#eee"/>')
            if x_name is not None:
                parts.append(f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle">{label(tick)}</text>')
        middle = self.top + PANEL_HEIGHT / 2
        parts.append(
            f'<text x="16" y="{middle}" transform="rotate(-90 16 {middle})" text-anchor="middle">{y_name}</text>'
        )
        if x_name is not None:
            parts.append(f'<text x="{(LEFT + right) / 2}" y="{bottom + 34}" text-anchor="middle">{x_name}</text>')
        return parts

    def line(self, xs: list[int], ys: list[float], colour: str, name: str, dots: bool) -> list[str]:
        points = " ".join(f"{self.x(x):.1f},{self.y(y):.1f}" for x, y in zip(xs, ys, strict=True))
        parts = [f'<polyline class="{name}" points="{points}" fill="none" stroke="{colour}" stroke-width="1.5"/>']
        if dots:
            parts += [
                f'<circle cx="{self.x(x):.1f}" cy="{self.y(y):.1f}" r="3" fill="{colour}"/>'
                for x, y in zip(xs, ys, strict=True)
            ]
        return parts


def svg_chart(records: list[Record], title: str) -> str:
    """The chart of a metrics file's records (at least one), as an SVG document."""
    steps = latest_per_step(records)
    series = loss_series(steps)
    speeds = [float(record["tokens_per_second"]) for record in steps]
    xs = [int(record["step"]) for record in steps]
    best_step, best_loss = records[-1].get("best_val_step"), records[-1].get("best_val_loss")
    best = (int(best_step), float(best_loss)) if best_step is not None and best_loss is not None else None
    losses = [y for _, ys in series.values() for y in ys] + ([best[1]] if best else [])
    x_ticks = nice_ticks(min(xs), max(xs))
    loss = Panel(TOP, x_ticks, nice_ticks(min(losses), max(losses)))
    speed = Panel(TOP + PANEL_HEIGHT + GAP, x_ticks, nice_ticks(0.0, max(speeds)))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" '
        'font-size="11">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="22" text-anchor="middle" font-size="14">{escape(title)}</text>',
        *loss.axes("loss", None),
        *speed.axes("tokens/s", "step"),
    ]
    for name, (line_xs, line_ys) in series.items():
        parts += loss.line(line_xs, line_ys, COLOURS[name], name, dots=name == "validation")
    if best:
        x, y = loss.x(best[0]), loss.y(best[1])
        parts.append(
            f'<text class="best" x="{x:.1f}" y="{y + 5:.1f}" text-anchor="middle" font-size="16" '
            f'fill="{COLOURS["marker"]}">&#9733;</text>'
        )
    parts += speed.line(xs, speeds, COLOURS["tokens/s"], "tokens-per-second", dots=False)
    for before, after in itertools.pairwise(steps):
        if before["world_size"] != after["world_size"]:
            for panel in (loss, speed):
                x = panel.x(after["step"])
                parts.append(
                    f'<line class="world-size" x1="{x:.1f}" y1="{panel.top}" x2="{x:.1f}" '
                    f'y2="{panel.top + PANEL_HEIGHT}" stroke="{COLOURS["marker"]}" stroke-dasharray="4 3"/>'
                )
            parts.append(
                f'<text x="{speed.x(after["step"]) + 4:.1f}" y="{speed.top + 14}">world size '
                f"{after['world_size']}</text>"
            )
    if len(series) > 1 or best:
        legend = [(name, COLOURS[name]) for name in series] + ([("best validation", COLOURS["marker"])] if best else [])
        for row, (name, colour) in enumerate(legend):
            y = TOP + 16 + row * 16
            parts.append(f'<rect x="{WIDTH - RIGHT - 130}" y="{y - 9}" width="10" height="10" fill="{colour}"/>')
            parts.append(f'<text x="{WIDTH - RIGHT - 115}" y="{y}">{name}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def write_chart(records: list[Record], path: Path, title: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(svg_chart(records, title))
    return path
