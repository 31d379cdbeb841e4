"""A search's report as one self-contained web page: ``report.html``, beside ``report.md``.

The page holds what ``report.md`` holds, drawn: the fitness of every candidate per
iteration with the best so far, the final re-training's learning curves of the best
program against the human and sparse references (mean over seeds with a 95% bootstrap
interval), the finalists' curves over all their seeds, how each candidate's own reward
moved with the task's fitness (the correlation and the reward-hacking flags), each
candidate's reward components during training, and every candidate's code, status and
feedback.

One file: plots are inline SVG drawn here, styles inline, no script, nothing fetched (a
Content-Security-Policy says so to the browser as well). Every text that came from a
program, a model or a person (code, answers, failures, tracebacks, component names, notes,
feedback, the task) is escaped with :func:`html.escape` after control characters are
removed (prose) or shown as escapes (code), so it is shown, never run.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rewardlab.common.statistics import bootstrap_ci
from rewardlab.llm_reward.programs.text import fenced, sanitize
from rewardlab.llm_reward.search.records import (
    Candidate,
    confirmed_fitness,
    late_fitness,
    rank_key,
    seed_runs,
)
from rewardlab.llm_reward.training import Checkpoint
from rewardlab.llm_reward.training.failures import cut

if TYPE_CHECKING:
    from rewardlab.llm_reward.search.records import SearchResult

__all__ = ["HTML_FILE", "Series", "bar_plot", "html_report", "line_plot"]

HTML_FILE = "report.html"
#: colour-blind-safe (Okabe-Ito), in the order series are drawn
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
FINAL_COLOURS = {"best": PALETTE[0], "human": PALETTE[2], "sparse": PALETTE[3]}
FINAL_NAMES = {"best": "best program", "human": "human reference",
               "sparse": "the env's own reward (the sparse reference)"}
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
#: the most characters of an LLM's answer shown on the page
MAX_SHOWN_ANSWER_CHARS = 20_000


# ---------------------------------------------------------------------------- escaping
def text(value: object) -> str:
    """Prose for the page: control characters removed, then HTML-escaped (quotes too, so it
    is safe in an attribute as well).

    :param value: any value; ``None`` is shown as ``-``.
    """
    return "-" if value is None else html.escape(sanitize(str(value)), quote=True)


def code(value: str) -> str:
    """Code or a traceback for a ``<pre>``: control characters shown as escapes (``\\x1b``),
    as ``report.md`` shows them, then HTML-escaped.

    :param value: the code.
    """
    return html.escape("\n".join(fenced(value)[1:-1]), quote=True)


def number(value: float | None, digits: str = ".4g") -> str:
    """``value`` formatted, or ``-`` when there is none (or it is not finite).

    :param value: a number or ``None``.
    :param digits: a format spec.
    """
    return "-" if value is None or not math.isfinite(value) else format(value, digits)


# ---------------------------------------------------------------------------- plots
@dataclass
class Series:
    """One series of a :func:`line_plot`.

    :param label: its name in the legend.
    :param xs: x values.
    :param ys: y values (``None`` or non-finite: a gap).
    :param low: the lower edge of its band, per point (``None``: no band).
    :param high: the upper edge of its band, per point.
    :param colour: its colour (``None``: the next of :data:`PALETTE`).
    :param dashed: draw it dashed (a reference).
    :param markers_only: points without a line.
    """

    label: str
    xs: Sequence[float]
    ys: Sequence[float | None]
    low: Sequence[float | None] | None = None
    high: Sequence[float | None] | None = None
    colour: str | None = None
    dashed: bool = False
    markers_only: bool = False


def _finite(values: Iterable[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering ``[low, high]``.

    :param low: the smallest value to cover.
    :param high: the largest.
    :param count: roughly how many ticks.
    """
    if not high > low:
        low, high = low - 1.0, high + 1.0
    raw = (high - low) / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks = [math.floor(low / step) * step]
    while ticks[-1] < high - step * 1e-9 or len(ticks) < 2:  # the last tick at or past high
        ticks.append(round(ticks[0] + len(ticks) * step, 12))
    return ticks


def _tick_label(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e5 or abs(value) < 1e-3:
        return f"{value:.2g}"
    return f"{value:,.6g}"


def line_plot(title: str, series: Sequence[Series], x_label: str, y_label: str, width: int = 680,
              height: int = 320, x_ticks: Sequence[float] | None = None,
              x_range: tuple[float, float] | None = None) -> str:
    """An SVG line plot (bands, dashed references, markers) with axes, ticks and a legend.

    :param title: shown above the plot.
    :param series: what to draw, in order.
    :param x_label: the x axis's name.
    :param y_label: the y axis's name.
    :param width: in pixels.
    :param height: in pixels, the legend's rows added.
    :param x_ticks: the x axis's ticks (``None``: round numbers covering the data).
    :param x_range: the x axis's ends (``None``: the data's smallest and largest x).
    :return: an ``<svg>`` element; its texts escaped.
    """
    xs = _finite(x for s in series for x in s.xs)
    ys = _finite(y for s in series for y in (*s.ys, *(s.low or ()), *(s.high or ())))
    if not xs or not ys:
        return f'<p class="empty">{text(title)}: nothing to plot.</p>'
    left, right, top, bottom = 64, 16, 28, 44
    if x_range is None:  # the data's own span, not the round numbers around it
        x_range = (min(xs), max(xs)) if max(xs) > min(xs) else (min(xs) - 1.0, max(xs) + 1.0)
    x_ticks = [t for t in (x_ticks or nice_ticks(*x_range)) if x_range[0] - 1e-9 <= t <= x_range[1] + 1e-9]
    y_ticks = nice_ticks(min(ys), max(ys))
    x0, x1 = x_range
    y0, y1 = y_ticks[0], y_ticks[-1]
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return top + plot_h - (y - y0) / (y1 - y0) * plot_h

    columns = 1 if any(len(s.label) > 36 for s in series) else 2
    legend_rows = math.ceil(len(series) / columns)
    total_h = height + 18 * legend_rows
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="{width}" height="{total_h}" '
           f'viewBox="0 0 {width} {total_h}" role="img" aria-label="{text(title)}">',
           f'<text x="{left}" y="16" class="title">{text(title)}</text>']
    for tick in y_ticks:
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{py(tick):.1f}" y2="{py(tick):.1f}" class="grid"/>'
                   f'<text x="{left - 6}" y="{py(tick) + 4:.1f}" text-anchor="end">{text(_tick_label(tick))}</text>')
    for tick in x_ticks:
        out.append(f'<line x1="{px(tick):.1f}" x2="{px(tick):.1f}" y1="{top}" y2="{top + plot_h}" class="grid"/>'
                   f'<text x="{px(tick):.1f}" y="{top + plot_h + 16}" text-anchor="middle">{text(_tick_label(tick))}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" class="frame"/>')
    out.append(f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle">{text(x_label)}</text>')
    out.append(f'<text x="14" y="{top + plot_h / 2}" text-anchor="middle" '
               f'transform="rotate(-90 14 {top + plot_h / 2})">{text(y_label)}</text>')
    for index, s in enumerate(series):
        colour = s.colour or PALETTE[index % len(PALETTE)]
        if s.low is not None and s.high is not None:
            band = [(x, lo, hi) for x, lo, hi in zip(s.xs, s.low, s.high)
                    if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi)]
            if len(band) >= 2:
                upper = " ".join(f"{px(x):.1f},{py(hi):.1f}" for x, _, hi in band)
                lower = " ".join(f"{px(x):.1f},{py(lo):.1f}" for x, lo, _ in reversed(band))
                out.append(f'<polygon points="{upper} {lower}" fill="{colour}" fill-opacity="0.18" stroke="none"/>')
        points = [(x, y) for x, y in zip(s.xs, s.ys) if y is not None and math.isfinite(y)]
        if not s.markers_only and len(points) >= 2:
            dash = ' stroke-dasharray="6 4"' if s.dashed else ""
            path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        if s.markers_only or len(points) == 1:
            out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{colour}"/>' for x, y in points]
        row, column = divmod(index, columns)
        lx, ly = left + column * (plot_w / columns), height + 12 + 18 * row
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        out.append(f'<line x1="{lx:.1f}" x2="{lx + 22:.1f}" y1="{ly - 4}" y2="{ly - 4}" stroke="{colour}" '
                   f'stroke-width="{6 if s.markers_only else 2}"{dash}/>'
                   f'<text x="{lx + 28:.1f}" y="{ly}">{text(s.label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def bar_plot(title: str, labels: Sequence[str], values: Sequence[float | None], y_label: str,
             colours: Sequence[str] | None = None, width: int = 680, height: int = 280) -> str:
    """An SVG bar plot, one bar per label (a missing value leaves its slot empty).

    :param title: shown above the plot.
    :param labels: the bars' names, under them.
    :param values: their heights.
    :param y_label: the y axis's name.
    :param colours: a colour per bar (``None``: the first of :data:`PALETTE`).
    :param width: in pixels.
    :param height: in pixels.
    :return: an ``<svg>`` element; its texts escaped.
    """
    finite = _finite(values)
    if not finite:
        return f'<p class="empty">{text(title)}: nothing to plot.</p>'
    left, right, top, bottom = 64, 16, 28, 64
    ticks = nice_ticks(min(0.0, *finite), max(0.0, *finite))
    y0, y1 = ticks[0], ticks[-1]
    plot_w, plot_h = width - left - right, height - top - bottom

    def py(y: float) -> float:
        return top + plot_h - (y - y0) / (y1 - y0) * plot_h

    slot = plot_w / max(len(labels), 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{text(title)}">',
           f'<text x="{left}" y="16" class="title">{text(title)}</text>']
    for tick in ticks:
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{py(tick):.1f}" y2="{py(tick):.1f}" class="grid"/>'
                   f'<text x="{left - 6}" y="{py(tick) + 4:.1f}" text-anchor="end">{text(_tick_label(tick))}</text>')
    for index, (label, value) in enumerate(zip(labels, values)):
        centre = left + slot * (index + 0.5)
        if value is not None and math.isfinite(value):
            colour = colours[index] if colours else PALETTE[0]
            top_y, base_y = py(max(value, 0.0)), py(min(value, 0.0))
            out.append(f'<rect x="{centre - slot * 0.35:.1f}" y="{top_y:.1f}" width="{slot * 0.7:.1f}" '
                       f'height="{max(base_y - top_y, 0.5):.1f}" fill="{colour}"><title>{text(label)}: '
                       f'{text(number(value))}</title></rect>')
        out.append(f'<text x="{centre:.1f}" y="{top + plot_h + 14}" text-anchor="end" '
                   f'transform="rotate(-35 {centre:.1f} {top + plot_h + 14})">{text(label)}</text>')
    out.append(f'<line x1="{left}" x2="{width - right}" y1="{py(0.0):.1f}" y2="{py(0.0):.1f}" class="axis"/>')
    out.append(f'<text x="14" y="{top + plot_h / 2}" text-anchor="middle" '
               f'transform="rotate(-90 14 {top + plot_h / 2})">{text(y_label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


# ---------------------------------------------------------------------------- curves
def mean_curve(runs: Sequence[Sequence[Checkpoint]]) -> tuple[list[float], list[float], list[float | None],
                                                              list[float | None]]:
    """The fitness curve averaged over seeds, checkpoint by checkpoint, with a 95% bootstrap
    interval of the mean where at least two seeds reached that checkpoint.

    :param runs: each seed's checkpoints, in order.
    :return: ``(steps, means, lows, highs)``.
    """
    steps, means, lows, highs = [], [], [], []
    for index in range(max((len(run) for run in runs), default=0)):
        points = [run[index] for run in runs if len(run) > index]
        values = np.array([point.fitness for point in points], dtype=float)
        steps.append(float(np.mean([point.step for point in points])))
        means.append(float(values.mean()))
        if len(values) >= 2:
            low, high = bootstrap_ci(values, np.mean, np.random.default_rng(index))
            lows.append(float(low))
            highs.append(float(high))
        else:
            lows.append(None)
            highs.append(None)
    return steps, means, lows, highs


# ---------------------------------------------------------------------------- sections
def _fitness_plot(result: SearchResult) -> str:
    iterations = result.config.iterations
    samples = max(result.config.samples, 1)
    trained = [c for c in result.candidates if c.fitness is not None]
    xs = [c.iteration + 1 + (c.sample - (samples - 1) / 2) * 0.5 / samples for c in trained]
    best_so_far, best = [], -math.inf
    for iteration in range(iterations):
        scores = [c.fitness for c in trained if c.iteration == iteration and c.fitness is not None]
        best = max([best, *scores])
        best_so_far.append(best if math.isfinite(best) else None)
    failed = [c for c in result.candidates if not c.ok]
    title = "Fitness per iteration" + (f" ({len(failed)} candidates failed or were rejected)" if failed else "")
    return line_plot(title, [
        Series("each trained candidate", xs, [c.fitness for c in trained], markers_only=True, colour=PALETTE[0]),
        Series("best so far", [i + 1 for i in range(iterations)], best_so_far, colour=PALETTE[1]),
    ], "iteration", "task fitness", x_ticks=range(1, iterations + 1), x_range=(0.5, iterations + 0.5))


def _final_section(result: SearchResult, statistics: Mapping[str, Mapping[str, Any]]) -> str:
    if not result.final:
        return "<p>No final re-training in this search (final seeds 0, or no candidate trained).</p>"
    rows = []
    for label in ("best", "human", "sparse"):
        score = result.final.get(label)
        if score is None:
            continue
        entry = statistics.get(label, {})
        interval = (f"{number(entry['iqm'])} [{number(entry['iqm_ci'][0])}, {number(entry['iqm_ci'][1])}]"
                    if "iqm" in entry else "-")
        mean_std = "-" if score.mean is None else f"{number(score.mean)} ± {number(score.std, '.3g')}"
        per_seed = ", ".join(number(value) for value in score.fitness.values())
        name = FINAL_NAMES[label] + (f" ({result.best.key})" if label == "best" and result.best else "")
        rows.append(f"<tr><td>{text(name)}</td><td>{text(mean_std)}</td><td>{text(interval)}</td>"
                    f"<td>{text(number(entry.get('p_best_beats'), '.2f'))}</td><td>{text(per_seed)}</td>"
                    f"<td>{len(score.failures)}</td></tr>")
    table = ("<table><tr><th>reward</th><th>mean ± std</th><th>IQM [95% CI]</th><th>P(best beats it)</th>"
             "<th>per seed</th><th>failed seeds</th></tr>" + "".join(rows) + "</table>")
    runs = result.final_runs
    series = []
    for label in ("best", "human", "sparse"):
        if runs.get(label):
            steps, means, lows, highs = mean_curve(runs[label])
            seeds = len(runs[label])
            series.append(Series(f"{FINAL_NAMES[label]}, mean of {seeds} seeds", steps, means, lows, highs,
                                 colour=FINAL_COLOURS[label], dashed=label != "best"))
    score = ""
    if result.normalized_score is not None:
        score = (f"<p>Normalised score (best - sparse) / |human - sparse| = <b>{number(result.normalized_score, '.3f')}"
                 "</b> (1: as good as the human reward, 0: as good as the sparse one).</p>")
    failures = [f"<li>{text(label)}: {text(failure)}</li>" for label, s in result.final.items() for failure in s.failures]
    plot = line_plot("Final re-training: task fitness during training", series, "env steps", "task fitness")
    plot += "<p class=\"caption\">Mean over the final seeds; band: 95% bootstrap interval of the mean.</p>"
    return (table + score + plot
            + (f"<p>Failed seeds:</p><ul>{''.join(failures)}</ul>" if failures else ""))


def _finalists_section(result: SearchResult) -> str:
    finalists = [c for c in result.candidates if c.confirmation is not None]
    if not finalists:
        return "<p>No finalists: the best candidate was picked by its training seed(s) alone.</p>"
    extra = sorted({seed for c in finalists for seed in c.confirmation or {}})
    header = "".join(f"<th>seed {seed}</th>" for seed in extra)
    rows = []
    for c in finalists:
        cells = "".join(f"<td>{text('failed' if (c.confirmation or {}).get(s) is None else number(c.confirmation[s]))}"
                        "</td>" for s in extra)
        bound = confirmed_fitness(c)
        rows.append(f"<tr><td>{text(c.key)}</td><td>{text(number(rank_key(c)[0]))}</td>{cells}"
                    f"<td>{text('-' if math.isinf(bound) else number(bound))}</td>"
                    f"<td>{'yes' if c is result.best else ''}</td></tr>")
    table = (f"<table><tr><th>finalist</th><th>search seed(s), late fitness</th>{header}"
             "<th>lower bound (picks)</th><th>chosen</th></tr>"
             + "".join(rows) + "</table>")
    extra_runs = result.finalist_runs
    series = []
    for index, c in enumerate(finalists):
        runs = seed_runs(c.result) + extra_runs.get(c.key, [])
        if runs:
            steps, means, lows, highs = mean_curve(runs)
            series.append(Series(f"{c.key}, {len(runs)} seeds" + (" (chosen)" if c is result.best else ""),
                                 steps, means, lows, highs, colour=PALETTE[(index + 4) % len(PALETTE)]))
    for label, runs in result.final_runs.items():
        if label in ("human", "sparse") and runs:
            steps, means, _, _ = mean_curve(runs)
            series.append(Series(f"{FINAL_NAMES[label]} (final seeds)", steps, means,
                                 colour=FINAL_COLOURS[label], dashed=True))
    return (table + line_plot("Finalists: task fitness over all their seeds", series, "env steps", "task fitness")
            + "<p class=\"caption\">Each finalist's mean over its search seed(s) and extra seeds, band: 95% "
            "bootstrap interval of the mean; dashed: the references' means over the final seeds.</p>")


def _scaled(values: Sequence[float | None]) -> list[float | None]:
    finite = _finite(values)
    if not finite:
        return [None for _ in values]
    low, high = min(finite), max(finite)
    span = high - low or 1.0
    return [None if v is None or not math.isfinite(v) else (v - low) / span for v in values]


def _signals_section(result: SearchResult) -> str:
    trained = [c for c in result.candidates if c.ok]
    if not trained:
        return "<p>No candidate trained.</p>"
    colours = [PALETTE[3] if c.signals is not None and c.signals.hacking else PALETTE[0] for c in trained]
    correlations = [c.signals.correlation if c.signals is not None else None for c in trained]
    bars = bar_plot("Each candidate's reward against the task fitness", [c.key for c in trained], correlations,
                    "Pearson r", colours)
    bars += ("<p class=\"caption\">Correlation of the program's mean reward per step with the task fitness over "
             "the checkpoints (none where either stayed constant); red: a reward-hacking flag.</p>")
    best = result.best
    curve = best.result.curve if best is not None and best.result is not None else []
    steps = [point.step for point in curve]
    lines = line_plot(
        f"The best candidate ({best.key if best else ''}): its reward and the task fitness",
        [Series("task fitness", steps, _scaled([p.fitness for p in curve]), colour=PALETTE[0]),
         Series("the program's reward per step", steps, _scaled([p.reward for p in curve]), colour=PALETTE[1])],
        "env steps", "each scaled to its range") if curve else ""
    if best is not None:
        lines += _components_plot(f"The best candidate ({best.key})", curve)
    flags = [f"<li><b>{text(c.key)}</b>: {text(c.signals.reason)}</li>" for c in trained
             if c.signals is not None and c.signals.hacking]
    flagged = (f"<p>Reward-hacking flags:</p><ul>{''.join(flags)}</ul>" if flags
               else "<p>No candidate was flagged for reward hacking.</p>")
    return bars + lines + flagged


def _components_table(curve: Sequence[Checkpoint]) -> str:
    if not curve:
        return ""
    names = sorted({name for point in curve for name in point.components})
    if not names:
        return ""
    last = curve[-1]
    rows = "".join(f"<tr><td><code>{text(name)}</code></td><td>{text(number(curve[0].components.get(name)))}</td>"
                   f"<td>{text(number(last.components.get(name)))}</td></tr>" for name in names)
    return ("<table class=\"small\"><tr><th>component</th><th>mean per step, first checkpoint</th>"
            f"<th>last checkpoint (step {last.step:,})</th></tr>{rows}</table>")


def _components_plot(key: str, curve: Sequence[Checkpoint], width: int = 680) -> str:
    """Each reward component's mean per step at each checkpoint of a candidate's training."""
    names = sorted({name for point in curve for name in point.components})
    if not curve or not names:
        return ""
    steps = [point.step for point in curve]
    return line_plot(f"{key}: its reward components during training", [
        Series(name, steps, [point.components.get(name) for point in curve]) for name in names
    ], "env steps", "mean per step", width=width, height=260)


def _candidate_details(c: Candidate) -> str:
    parts = [f"<summary><b>{text(c.key)}</b>: {text(c.status)}, fitness {text(number(c.fitness))}"
             + (" — reward-hacking flag" if c.signals is not None and c.signals.hacking else "") + "</summary>"]
    if c.failure is not None:
        parts.append(f"<p class=\"failure\">Failed ({text(c.failure.kind)}): {text(c.failure.reason)}</p>")
        if c.failure.findings:
            parts.append("<ul>" + "".join(f"<li>{text(f)}</li>" for f in c.failure.findings) + "</ul>")
        if c.failure.traceback.strip():
            parts.append(f"<pre class=\"traceback\">{code(c.failure.traceback.strip())}</pre>")
        if c.failure.details.strip():
            parts.append(f"<details><summary>worker log</summary><pre>{code(c.failure.details.strip())}</pre></details>")
    if c.signals is not None and (c.signals.hacking or c.signals.stuck):
        parts.append(f"<p>{text(c.signals.reason)}</p>")
    if c.prescreen is not None:
        parts.append(f"<p>Prescreen: tau {text(number(c.prescreen.tau, '+.2f'))}, {text(c.prescreen.finding)}</p>")
    if c.result is not None:
        parts += [f"<p>Note: {text(note)}</p>" for note in c.result.notes]
        late = late_fitness(c.result)
        if c.ok:
            parts.append(f"<p>Late fitness (mean of the last checkpoints): {text(number(late))}; "
                         f"success rate {text(number(c.result.success_rate, '.2f'))}; "
                         f"training {text(number(c.result.wall_s, '.1f'))} s.</p>")
        parts.append(_components_table(c.result.curve))
        parts.append(_components_plot(c.key, c.result.curve, width=600))
    if c.source:
        parts.append(f"<pre class=\"code\"><code>{code(c.source.rstrip())}</code></pre>")
    if c.answer and c.answer != c.source:
        # an answer may be megabytes (the client reads up to 64 MB): answer.md keeps it whole
        shown = cut(c.answer, MAX_SHOWN_ANSWER_CHARS)
        parts.append(f"<details><summary>the answer (whole in candidates/{text(c.key)}/answer.md)"
                     f"</summary><pre>{code(shown)}</pre></details>")
    opened = " open" if c.failure is not None else ""  # a failure is read first
    return f"<details class=\"candidate\"{opened}>" + "".join(parts) + "</details>"


def _iterations_section(result: SearchResult, feedback: Mapping[int, str | None]) -> str:
    out = []
    for iteration in range(result.config.iterations):
        members = [c for c in result.candidates if c.iteration == iteration]
        trained = [c for c in members if c.ok]
        top = max((c.fitness for c in trained if c.fitness is not None), default=None)
        out.append(f"<h3>Iteration {iteration + 1}</h3><p>{len(trained)} of {len(members)} trained; best fitness "
                   f"{text(number(top))}.</p>")
        if feedback.get(iteration):
            out.append(f"<blockquote>Human feedback given before this iteration: {text(feedback[iteration])}"
                       "</blockquote>")
        rows = []
        for c in members:
            r, s, p = c.result, c.signals, c.prescreen
            cells = [c.key, c.status, number(c.fitness),
                     number(r.success_rate if r is not None and r.ok else None, ".2f"),
                     number(s.correlation if s else None, "+.2f"), ("yes" if s.hacking else "no") if s else "-",
                     number(p.tau if p else None, "+.2f"),
                     f"{c.usage.total_tokens:,}" if c.usage else "-",
                     number(r.wall_s if r is not None else None, ".1f")]
            css = ' class="failed"' if not c.ok else ""
            rows.append(f"<tr{css}>" + "".join(f"<td>{text(cell)}</td>" for cell in cells) + "</tr>")
        out.append("<table><tr><th>candidate</th><th>status</th><th>fitness</th><th>success</th>"
                   "<th>reward~fitness r</th><th>hacking</th><th>prescreen tau</th><th>tokens</th><th>train s</th>"
                   "</tr>" + "".join(rows) + "</table>")
        out += [_candidate_details(c) for c in members]
    return "".join(out)


STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;
color:#1b1b1b;line-height:1.45}
h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}td,th{border:1px solid #ccc;padding:.25em .55em;
text-align:left;vertical-align:top}th{background:#f3f3f3}tr.failed td{color:#8a1f11}
table.small{font-size:.85em}pre{background:#f6f8fa;padding:.7em;overflow-x:auto;font-size:.85em;
white-space:pre-wrap;word-break:break-word}pre.traceback{background:#fff4f2}
details.candidate{border:1px solid #ddd;border-radius:4px;padding:.4em .7em;margin:.4em 0}
p.failure{color:#8a1f11}blockquote{border-left:4px solid #ccc;margin:.5em 0;padding:.2em .8em;color:#444}
svg.plot{display:block;margin:1em 0;font-size:11px;font-family:inherit}svg .title{font-size:13px;font-weight:600}
svg .grid{stroke:#e4e4e4}p.caption{color:#555;font-size:.88em;margin-top:-.6em}svg .frame{fill:none;stroke:#999}svg .axis{stroke:#666}.empty{color:#666}
"""


def html_report(result: SearchResult, statistics: Mapping[str, Mapping[str, Any]]) -> str:
    """The search's report as one self-contained HTML page.

    :param result: the search's result.
    :param statistics: the final runs' IQM, interval and P(best beats it) per label
        (``report.final_statistics``).
    """
    config, best = result.config, result.best
    proposer = f"llm ({result.llm})" if result.llm else config.proposer
    seeds = ", ".join(map(str, config.seeds))
    hacking = sum(bool(c.signals and c.signals.hacking) for c in result.candidates)
    cost = "unknown (no price for the model)" if result.cost_unknown else f"${result.cost_usd:.4f}"
    summary = ("<table><tr><th>candidates</th><th>trained</th><th>stopped early</th><th>failed or rejected</th>"
               "<th>reward-hacking flags</th><th>LLM answers</th><th>prompt tokens</th><th>completion tokens</th>"
               "<th>cost</th></tr>"
               f"<tr><td>{len(result.candidates)}</td><td>{sum(c.ok for c in result.candidates)}</td>"
               f"<td>{result.stopped_early}</td><td>{sum(result.failures.values())}</td><td>{hacking}</td><td>{result.llm_calls}</td>"
               f"<td>{result.usage.prompt_tokens:,}</td><td>{result.usage.completion_tokens:,}</td>"
               f"<td>{text(cost)}</td></tr></table>")
    if best is not None and best.source is not None:
        best_part = (f"<p>{text(best.key)}: task fitness {text(number(best.fitness))} at {config.steps:,} steps "
                     f"(seeds {text(seeds)}).</p><pre class=\"code\"><code>{code(best.source.rstrip())}</code></pre>")
    else:
        best_part = "<p>No candidate trained successfully; the candidates below say why.</p>"
    body = [
        f"<h1>Reward search: {text(config.env_id)}</h1>",
        f"<p>Task: {text(config.task)}</p>",
        f"<p>Proposer: {text(proposer)}; {config.iterations} iterations x {config.samples} samples, "
        f"{config.steps:,} env steps per candidate over {config.num_envs} envs (seeds {text(seeds)}); "
        f"evaluations: {text(result.executor)}; wall time {result.wall_s:.0f} s. The text version of this page is "
        "<code>report.md</code>.</p>",
        summary,
        "<h2>Fitness per iteration</h2>", _fitness_plot(result),
        "<h2>Best program and the final re-training</h2>", best_part, _final_section(result, statistics),
        "<h2>Finalists</h2>", _finalists_section(result),
        "<h2>Reward and fitness</h2>", _signals_section(result),
        "<h2>Candidates</h2>", _iterations_section(result, result.feedback),
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>Reward search: {text(config.env_id)}</title><style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")
