"""A bar chart's geometry, for a template to draw as inline SVG (docs/console.md): drawn
on the server, no script and nothing loaded from elsewhere (D35's Content-Security-Policy
is unchanged). Each bar carries its day and value as text (its <title>), the scale's lines
are labelled with their values, and the most and the last day's values are written
beside their bars, so that the chart reads without colour."""

from __future__ import annotations

from dataclasses import dataclass

# The drawing's own units (its viewBox); CSS scales it to the width it is given.
WIDTH, HEIGHT = 480, 200
LEFT, RIGHT, TOP, BOTTOM = 40, 10, 18, 26  # room for the scale's labels and the days'
LABEL_EVERY = 7  # a day's date under every seventh bar, the last day's included


@dataclass(frozen=True)
class Bar:
    day: str
    value: int
    x: float
    y: float
    width: float
    height: float
    labelled: bool  # the value written above the bar (the most, and the last day)
    dated: bool  # the date written under it


@dataclass(frozen=True)
class Rule:
    """A line of the scale, at y, for value."""

    value: int
    y: float


@dataclass(frozen=True)
class Chart:
    bars: list[Bar]
    rules: list[Rule]
    top: int  # the scale's top value
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    base: int = HEIGHT - BOTTOM


def nice_top(most: int) -> int:
    """The scale's top: the smallest of 1, 2, 5, 10, 20, 50, ... at or above most (and at
    least 1, so that a month of nothing draws flat bars on a scale of 0 to 1)."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor >= most:
                return step * factor
        step *= 10


def bars(values: list[tuple[str, int]]) -> Chart:
    """The bars of (day, value) pairs, oldest first, on one scale from 0 to nice_top."""
    top = nice_top(max((value for _, value in values), default=0))
    base, span = HEIGHT - BOTTOM, HEIGHT - BOTTOM - TOP
    slot = (WIDTH - RIGHT - LEFT) / max(len(values), 1)
    most = max(range(len(values)), key=lambda i: (values[i][1], i), default=-1)
    drawn = []
    for i, (day, value) in enumerate(values):
        height = span * max(value, 0) / top
        drawn.append(Bar(day, value, round(LEFT + i * slot + slot * 0.15, 1),
                         round(base - height, 1), round(slot * 0.7, 1), round(height, 1),
                         labelled=value > 0 and i in (most, len(values) - 1),
                         dated=(len(values) - 1 - i) % LABEL_EVERY == 0))
    halves = {top // 2} if top % 2 == 0 else set()
    rules = [Rule(value, round(base - span * value / top, 1))
             for value in sorted({0, top} | halves)]
    return Chart(drawn, rules, top)
