"""``rewardlab compare``: curves and tables from TensorBoard runs, grouped over seeds.

Reads the TensorBoard event files under each RUN_DIR, groups runs that differ only
by seed (their ``config.json`` without the seed; without a config, their parent
folder), and writes to ``--out``:

- ``curves.png``: each group's mean curve against env steps with a 95% bootstrap
  confidence band;
- ``summary.md`` and ``summary.csv``: per group the final value, the area under the
  curve (the mean value over training), the steps to reach ``--threshold``, and the
  interquartile mean (IQM) of the seeds' final values with a 95% bootstrap
  confidence interval, in the style of rliable.

Example::

    rewardlab compare runs/plain runs/shaped --tag rollout/ep_rew_mean --threshold -150 --out cmp
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rewardlab.app.arguments import plain_text
from rewardlab.common.files import walk_files
from rewardlab.common.statistics import BOOTSTRAP_SAMPLES, bootstrap_ci, iqm
from rewardlab.common.terminal import escape_controls, terminal_line

GRID_POINTS = 200


@dataclass
class Run:
    """One run: its folder, its scalar series and the group it belongs to."""

    path: Path
    group: str
    steps: np.ndarray = field(repr=False)
    values: np.ndarray = field(repr=False)


def event_dirs(root: Path) -> list[Path]:
    """Folders under ``root`` (itself included) holding TensorBoard event files.

    Walked without recursion, into no linked folder (as ``rglob``): a sandboxed run's folders
    are its worker's, which may nest them past Python's recursion limit (red-team finding).

    :raises ValueError: an entry named like an event file is no regular file, naming it.
    """
    found = set()
    for folder, entry in walk_files(root):
        if entry.name.startswith("events.out.tfevents."):
            # TensorBoard's reader opens every event file of a folder: a FIFO, a device or a
            # link to one (a run folder from elsewhere) would hold it forever
            if not entry.is_file():
                raise ValueError(f"{folder / entry.name} is named like a TensorBoard event file but is no "
                                 "regular file (a FIFO, a device or a link to one); move it away")
            found.add(folder)
    return sorted(found)


def run_root(event_dir: Path, top: Path) -> Path:
    """The run folder an event folder belongs to: the nearest ancestor with ``config.json``."""
    for folder in [event_dir, *event_dir.parents]:
        if (folder / "config.json").exists():
            return folder
        if folder == top:
            break
    return event_dir


def group_of(run_path: Path, top: Path, folders: dict[str, Path]) -> str:
    """The group of a run; ``folders`` gathers each group's folder, which names it
    (:func:`distinct_labels`).

    Runs with a ``config.json`` that differ only by seed share a group, named by the
    folder above the run's; runs without one are grouped by the RUN_DIR they were
    found under.
    """
    config = run_config(run_path)
    if config is not None:
        config.pop("seed", None)
        key = json.dumps(config, sort_keys=True)
        folder = run_path.parent if run_path.parent.name else run_path
    else:
        key = str(top.resolve())
        folder = top
    folders.setdefault(key, folder.resolve())
    return key


def distinct_labels(folders: dict[str, Path]) -> dict[str, str]:
    """Each group's label: its folder's name, with as many folders above it as it takes to
    tell it from the others (two searches' ``a/final/best`` and ``b/final/best``)."""
    labels: dict[str, str] = {}
    for key, folder in folders.items():
        others = [other for other_key, other in folders.items() if other_key != key]
        parts = folder.parts
        for depth in range(1, len(parts) + 1):
            label = "/".join(parts[-depth:])
            if not any("/".join(other.parts[-depth:]) == label for other in others):
                break
        labels[key] = label
    taken: dict[str, int] = {}
    for key, label in labels.items():  # groups of one folder (different configs side by side)
        taken[label] = taken.get(label, 0) + 1
        if taken[label] > 1:
            labels[key] = f"{label}-{taken[label]}"
    return labels


def run_config(run_path: Path) -> dict[str, Any] | None:
    """A run's ``config.json``, read as data of unknown type (a run folder may come from
    anywhere): ``None`` without one, or for one that is no JSON object of settings."""
    try:
        config = json.loads((run_path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # missing, not UTF-8 or JSON, nested past the limit
        return None
    return config if isinstance(config, dict) else None


def env_of(run_path: Path) -> str | None:
    """The env a run trained on, from its ``config.json`` (None without one)."""
    env = (run_config(run_path) or {}).get("env")
    return env if isinstance(env, str) else None


def read_scalars(event_dir: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """All scalar series of one event folder: tag -> (steps, values), sorted by step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(event_dir), size_guidance={"scalars": 0})
    accumulator.Reload()
    series = {}
    for tag in accumulator.Tags()["scalars"]:
        events = accumulator.Scalars(tag)
        steps = np.array([e.step for e in events], dtype=np.float64)
        values = np.array([e.value for e in events], dtype=np.float64)
        order = np.argsort(steps, kind="stable")
        series[tag] = (steps[order], values[order])
    return series


def load_runs(run_dirs: list[Path], tag: str) -> list[Run]:
    """Every run under ``run_dirs`` with its ``tag`` series; clear errors for what is missing."""
    missing = [str(d) for d in run_dirs if not d.exists()]
    if missing:
        raise ValueError(f"run directories not found: {', '.join(missing)}")
    folders: dict[str, Path] = {}
    runs: list[Run] = []
    empty, without_tag = [], {}
    for top in run_dirs:
        found = event_dirs(top)
        if not found:
            empty.append(str(top))
            continue
        series_by_run: dict[Path, dict] = {}
        for event_dir in found:
            root = run_root(event_dir, top)
            # Several event folders of one run (a resumed run) are read as one series.
            merged = series_by_run.setdefault(root, {})
            for name, (steps, values) in read_scalars(event_dir).items():
                if name in merged:
                    steps = np.concatenate([merged[name][0], steps])
                    values = np.concatenate([merged[name][1], values])
                    order = np.argsort(steps, kind="stable")
                    steps, values = steps[order], values[order]
                merged[name] = (steps, values)
        for root, series in sorted(series_by_run.items()):
            if tag not in series:
                without_tag[str(root)] = sorted(series)
                continue
            steps, values = series[tag]
            runs.append(Run(root, group_of(root, top, folders), steps, values))
    if empty:
        raise ValueError(f"no TensorBoard event files under: {', '.join(empty)}")
    if without_tag:
        details = "; ".join(f"{run} has {tags}" for run, tags in without_tag.items())
        raise ValueError(f"tag {tag!r} is missing from some runs: {details}")
    labels = distinct_labels(folders)
    for run in runs:
        run.group = labels[run.group]
    return runs


def grid_values(runs: list[Run], grid: np.ndarray) -> np.ndarray:
    """Each run's series on ``grid``, linearly interpolated between logged points."""
    return np.array([np.interp(grid, run.steps, run.values) for run in runs])


def steps_to_threshold(run: Run, threshold: float) -> float | None:
    """The first step at which the run's value reaches ``threshold``, or None."""
    reached = np.flatnonzero(run.values >= threshold)
    return float(run.steps[reached[0]]) if len(reached) else None


def summarise(runs: list[Run], threshold: float | None, seed: int = 0) -> list[dict]:
    """One row per group: final value, AUC, steps to threshold, IQM with its CI."""
    rng = np.random.default_rng(seed)
    rows = []
    for group in dict.fromkeys(run.group for run in runs):
        members = [run for run in runs if run.group == group]
        finals = np.array([run.values[-1] for run in members])
        end = min(run.steps[-1] for run in members)
        grid = np.linspace(0, end, GRID_POINTS)
        curves = grid_values(members, grid)
        area = np.trapezoid(curves, grid, axis=1) / end if end > 0 else curves[:, -1]
        low, high = bootstrap_ci(finals, iqm, rng)
        envs = sorted({env_of(run.path) or "?" for run in members})
        row = {
            "group": group,
            "seeds": len(members),
            "steps": int(end),
            "final_mean": float(finals.mean()),
            "final_std": float(finals.std()),
            "auc_mean": float(area.mean()),
            "iqm_final": float(iqm(finals)),
            "iqm_ci_low": low,
            "iqm_ci_high": high,
        }
        if threshold is not None:
            reached = [steps_to_threshold(run, threshold) for run in members]
            hits = [s for s in reached if s is not None]
            row["threshold"] = threshold
            row["seeds_reaching"] = len(hits)
            row["steps_to_threshold_median"] = float(np.median(hits)) if hits else None
        row["env"] = ", ".join(envs)
        rows.append(row)
    return rows


def markdown_table(rows: list[dict], tag: str) -> str:
    with_threshold = any("threshold" in row for row in rows)
    header = ["group", "seeds", "steps", f"final {tag} (mean ± std)", "AUC", "IQM final [95% CI]"]
    if with_threshold:
        header += [f"seeds reaching {rows[0]['threshold']:g}", "median steps to threshold"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [
            row["group"], str(row["seeds"]), f"{row['steps']:,}",
            f"{row['final_mean']:.2f} ± {row['final_std']:.2f}", f"{row['auc_mean']:.2f}",
            f"{row['iqm_final']:.2f} [{row['iqm_ci_low']:.2f}, {row['iqm_ci_high']:.2f}]",
        ]  # fmt: skip
        if with_threshold:
            median = row["steps_to_threshold_median"]
            cells += [
                f"{row['seeds_reaching']} of {row['seeds']}",
                "not reached" if median is None else f"{median:,.0f}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(runs: list[Run], tag: str, path: Path, threshold: float | None, seed: int = 0) -> None:
    """Mean curve per group with a 95% bootstrap band, against env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(seed)
    figure, axes = plt.subplots(figsize=(8, 5), dpi=120)
    for group in dict.fromkeys(run.group for run in runs):
        members = [run for run in runs if run.group == group]
        end = min(run.steps[-1] for run in members)
        grid = np.linspace(min(run.steps[0] for run in members), end, GRID_POINTS)
        curves = grid_values(members, grid)
        mean = curves.mean(0)
        resampled = curves[rng.integers(0, len(members), size=(BOOTSTRAP_SAMPLES, len(members)))]
        low, high = np.quantile(resampled.mean(1), [0.025, 0.975], axis=0)
        seeds = f"{len(members)} seed{'' if len(members) == 1 else 's'}"
        # a folder's name as read (a control character is no glyph: matplotlib warned with it raw)
        (line,) = axes.plot(grid, mean, label=f"{terminal_line(group)} ({seeds})", linewidth=2)
        axes.fill_between(grid, low, high, color=line.get_color(), alpha=0.25, linewidth=0)
    if threshold is not None:
        axes.axhline(threshold, color="grey", linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
    axes.set_xlabel("env steps")
    axes.set_ylabel(tag)
    axes.set_title(f"{tag}: mean over seeds, 95% bootstrap band")
    axes.grid(alpha=0.3)
    axes.legend(loc="best")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def compare(run_dirs: list[Path], tag: str, out: Path, threshold: float | None) -> list[dict]:
    """Read, group, summarise and plot; write everything to ``out``; return the rows."""
    runs = load_runs(run_dirs, tag)
    rows = summarise(runs, threshold)
    out.mkdir(parents=True, exist_ok=True)
    table = markdown_table(rows, tag)
    (out / "summary.md").write_text(f"# {tag}\n\n{table}")
    with open(out / "summary.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plot(runs, tag, out / "curves.png", threshold)
    return rows


def env_warning(rows: list[dict]) -> str | None:
    """A warning when the groups trained on different envs (their returns do not compare)."""
    by_env: dict[str, list[str]] = {}
    for row in rows:
        by_env.setdefault(row["env"], []).append(row["group"])
    if len(by_env) < 2:
        return None
    parts = "; ".join(f"{env}: {', '.join(groups)}" for env, groups in sorted(by_env.items()))
    return f"warning: these runs trained on different envs ({parts}); their returns are not comparable"


def run_compare(args: argparse.Namespace) -> int:
    out = Path(args.out)
    rows = compare([Path(d) for d in args.run_dirs], args.tag, out, args.threshold)
    warning = env_warning(rows)
    # groups are folder names and envs come from config.json: a terminal acts on neither
    if warning:
        print(terminal_line(warning), file=sys.stderr)
    print(escape_controls(markdown_table(rows, args.tag)))
    print(f"wrote {out / 'curves.png'}, {out / 'summary.md'}, {out / 'summary.csv'}")
    return 0


def register_compare(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        description=plain_text(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run folders or their parents")
    parser.add_argument("--tag", default="rollout/ep_rew_mean", help="the scalar to compare")
    parser.add_argument("--threshold", type=float, help="report the steps to reach this value")
    parser.add_argument("--out", required=True, help="folder for curves.png and the tables")
    parser.set_defaults(func=run_compare)
