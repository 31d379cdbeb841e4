"""A search's outputs: ``report.md``, ``summary.json`` and ``best_reward.py``.

``report.md`` has every iteration and candidate (status, fitness, success rate, the
reward/fitness correlation and hacking flag, prescreen score, tokens, cost, training
time), every failure with its reason and traceback, the human feedback, the tokens and
cost of the run, the prescreen's savings, the best program and its comparison with the
sparse and human reference rewards. ``summary.json`` holds the same figures as data.
"""

from __future__ import annotations

import json
import math
import shlex
from typing import TYPE_CHECKING, Any

import numpy as np

from rewardlab.common.statistics import bootstrap_ci, iqm, probability_of_improvement
from rewardlab.llm_reward.programs.loading import reward_file_text
from rewardlab.llm_reward.programs.references import registered_reference_programs
from rewardlab.llm_reward.programs.text import fenced, markdown_text, sanitize
from rewardlab.llm_reward.search.prescreen import MIN_PAIRS
from rewardlab.llm_reward.search.records import (
    LATE_CHECKPOINTS,
    Candidate,
    FinalScore,
    confirmed_fitness,
    rank_key,
    seed_fitness,
)
from rewardlab.llm_reward.search.report_html import HTML_FILE, html_report
from rewardlab.llm_reward.search.verdict import references_tied, seed_failures, verdict

if TYPE_CHECKING:
    from rewardlab.llm_reward.search.records import SearchResult

__all__ = ["prescreen_summary", "render", "summary"]

BEST_FILE = "best_reward.py"
#: the folder under a search's ``--out`` where the training its next step suggests writes
TRAIN_FOLDER = "train"
REPORT_FILE = "report.md"
SUMMARY_FILE = "summary.json"


def _number(value: float | None, digits: str = ".4g") -> str:
    return "-" if value is None else format(value, digits)


def _finite(value: float) -> float | None:
    """``value``, or ``None`` for an infinite one (a failed seed), which JSON cannot hold."""
    return None if math.isinf(value) else value


def _cost(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def prescreen_summary(result: SearchResult) -> dict[str, Any] | None:
    """What the prescreen did: scored, rejected, trainings saved, and whether it (would have)
    rejected the eventual best.

    :param result: the search's result.
    """
    mode = result.config.prescreen
    if mode == "off":
        return None
    scored = [c for c in result.candidates if c.prescreen is not None]
    rejected = [c for c in scored if c.prescreen is not None and not c.prescreen.passed]
    failed = [c for c in rejected if c.prescreen is not None and c.prescreen.failure is not None]
    inconclusive = [c for c in scored if c.prescreen is not None and c.prescreen.passed
                    and c.prescreen.pairs < MIN_PAIRS]
    trained_seconds = [c.result.wall_s for c in result.candidates if c.result is not None and c.ok]
    mean_training_s = sum(trained_seconds) / len(trained_seconds) if trained_seconds else None
    best = result.best
    data: dict[str, Any] = {
        "mode": mode,
        "threshold": result.config.prescreen_tau,
        "scored": len(scored),
        "rejected": len(rejected),
        "failed_on_trajectories": len(failed),
        "inconclusive": len(inconclusive),
        "best_tau": best.prescreen.tau if best is not None and best.prescreen is not None else None,
        "mean_training_s": mean_training_s,
    }
    if mode == "reject":
        data["trainings_saved"] = len(rejected)
        data["seconds_saved_estimate"] = None if mean_training_s is None else len(rejected) * mean_training_s
    else:
        data["would_save_trainings"] = len(rejected)
        data["rejected_eventual_best"] = best is not None and best in rejected
        fitness = [c.fitness for c in rejected if c.fitness is not None]
        data["best_fitness_among_rejected"] = max(fitness) if fitness else None
    return data


def _final_data(score: FinalScore) -> dict[str, Any]:
    return {"mean": score.mean, "std": score.std, "per_seed": {str(k): v for k, v in score.fitness.items()},
            "failures": score.failures}


def summary(result: SearchResult) -> dict[str, Any]:
    """The search's figures as JSON data.

    :param result: the search's result.
    """
    best, failures = result.best, seed_failures(result)
    return {
        "env_id": result.config.env_id,
        "task": result.config.task,
        "mode": result.config.mode,
        "proposer": result.config.proposer,
        "llm": result.llm,
        "iterations": result.config.iterations,
        "samples": result.config.samples,
        "steps": result.config.steps,
        "num_envs": result.config.num_envs,
        "ppo_kwargs": result.config.ppo_kwargs,
        "budget_note": result.config.budget_note,
        "cost": cost(result),
        "candidates": len(result.candidates),
        "trained": sum(c.ok for c in result.candidates),
        "failures": dict(sorted(result.failures.items())),
        "best": None if best is None else {
            "key": best.key, "fitness": best.fitness,
            "correlation": best.signals.correlation if best.signals else None,
            "hacking": best.signals.hacking if best.signals else None,
        },
        "finalists": [{"key": c.key, "search": rank_key(c)[0],
                       "seeds": {str(seed): value for seed, value in (c.confirmation or {}).items()},
                       "mean": _finite(sum(seed_fitness(c)) / len(seed_fitness(c))),
                       "lower_bound": _finite(confirmed_fitness(c))}
                      for c in result.candidates if c.confirmation is not None],
        "compile": result.config.training_kwargs()["compile"],
        "final": {label: _final_data(score) for label, score in result.final.items()},
        "final_statistics": final_statistics(result),
        "normalized_score": result.normalized_score,
        "normalized_score_note": references_tied(result.final),
        "failed_final_seeds": None if failures is None else {
            "threshold": failures.threshold, "best": list(failures.best),
            "human": None if failures.human is None else list(failures.human)},
        "prompt_tokens": result.usage.prompt_tokens,
        "completion_tokens": result.usage.completion_tokens,
        "tokens_estimated": result.usage.estimated,
        "cost_usd": result.cost_usd,
        "cost_unknown": result.cost_unknown,
        "llm_calls": result.llm_calls,
        "llm_failures": result.llm_failures,
        "llm_retries": result.llm_retries,
        "prescreen": prescreen_summary(result),
        "early_stopping": early_stopping_summary(result),
        "reward_hacking_flags": sum(bool(c.signals and c.signals.hacking) for c in result.candidates),
        "executor": result.executor,
        "wall_s": result.wall_s,
    }


def early_stopping_summary(result: SearchResult) -> dict[str, Any]:
    """Which candidates stopped early, where, why and with what fitness, and the training
    steps that saved (of the candidates' whole budget).

    :param result: the search's result.
    """
    config = result.config
    budget = (config.steps or 0) * len(config.seeds)
    stopped = [(c, c.result.stopped) for c in result.candidates if c.result is not None and c.result.stopped]
    return {
        "on": config.early_stopping,
        "stopped": [{"key": c.key, **stop.to_dict(), "reason": stop.reason} for c, stop in stopped],
        "steps_saved": sum(budget - stop.step for _, stop in stopped),
        "steps_budget": budget * sum(c.result is not None for c in result.candidates),
    }


def _compared_partial(data: dict[str, Any]) -> bool:
    return any(item.get("partial_success") is not None for item in data["stopped"])


def _early_stopping_line(result: SearchResult) -> str:
    data = early_stopping_summary(result)
    if not data["on"]:
        return "Early stopping: off (every candidate trained its whole budget)."
    if not data["stopped"]:
        return "Early stopping: on; no candidate stopped early."
    where = "; ".join(f"{item['key']} at {item['share']} (step {item['step']:,}, fitness {item['fitness']:.4g}"
                      + ("" if item.get("partial_success") is None else
                         f", partial success {item['partial_success']:.4g}") + ")"
                      for item in data["stopped"])
    share = data["steps_saved"] / data["steps_budget"] if data["steps_budget"] else 0.0
    return (f"Early stopping: {len(data['stopped'])} candidate(s) stopped, in the bottom half of the earlier "
            f"iterations' candidates at a rung{'' if not _compared_partial(data) else ' (by partial success)'}: "
            f"{markdown_text(where)}; {data['steps_saved']:,} training steps "
            f"saved ({share:.0%} of the trained candidates' budget).")


def _candidate_row(candidate: Candidate) -> str:
    result, signals, score = candidate.result, candidate.signals, candidate.prescreen
    cells = [
        candidate.key,
        markdown_text(candidate.status),
        _number(candidate.fitness),
        _number(result.success_rate if result is not None and result.ok else None, ".2f"),
        _number(signals.correlation if signals else None, "+.2f"),
        ("yes" if signals.hacking else "no") if signals else "-",
        _number(score.tau if score else None, "+.2f"),
        f"{candidate.usage.total_tokens:,}" if candidate.usage else "-",
        _cost(candidate.cost_usd) if candidate.usage else "-",
        _number(result.wall_s if result is not None else None, ".1f"),
    ]
    return "| " + " | ".join(cells) + " |"


def _failure_block(candidate: Candidate) -> list[str]:
    failure = candidate.failure
    if failure is None:
        return []
    lines = [f"- **{candidate.key}** ({markdown_text(failure.kind)}): {markdown_text(failure.reason.strip())}"]
    if failure.traceback.strip():
        lines += fenced(failure.traceback.strip(), indent="  ")
    return lines


def final_statistics(result: SearchResult) -> dict[str, dict[str, Any]]:
    """Per final reward: IQM with a 95% bootstrap interval over its seeds, and the probability
    that the best program beats it on a seed (``rewardlab compare``'s statistics)."""
    finals = {label: np.array([v for v in score.fitness.values() if v is not None], dtype=float)
              for label, score in result.final.items()}
    best = finals.get("best")
    statistics: dict[str, dict[str, Any]] = {}
    for label, values in finals.items():
        if not len(values):
            continue
        low, high = bootstrap_ci(values, iqm, np.random.default_rng(0))
        entry: dict[str, Any] = {"iqm": float(iqm(values)), "iqm_ci": [low, high]}
        if label != "best" and best is not None and len(best):
            entry["p_best_beats"] = probability_of_improvement(best, values)
        statistics[label] = entry
    return statistics


def _final_rows(result: SearchResult) -> list[str]:
    names = {"best": f"best program ({result.best.key})" if result.best else "best program",
             "human": "human reference", "sparse": "the env's own reward (the sparse reference)"}
    statistics = final_statistics(result)
    lines = ["| reward | mean ± std | IQM [95% CI] | P(best beats it) | per seed | failed seeds |",
             "|---|---|---|---|---|---|"]
    for label in ("best", "human", "sparse"):
        score = result.final.get(label)
        if score is None:
            continue
        per_seed = ", ".join(_number(value) for value in score.fitness.values())
        mean_std = "-" if score.mean is None else f"{score.mean:.4g} ± {score.std:.3g}"
        entry = statistics.get(label, {})
        interval = ("-" if "iqm" not in entry else
                    f"{entry['iqm']:.4g} [{entry['iqm_ci'][0]:.4g}, {entry['iqm_ci'][1]:.4g}]")
        beats = f"{entry['p_best_beats']:.2f}" if "p_best_beats" in entry else "-"
        lines.append(f"| {names[label]} | {mean_std} | {interval} | {beats} | {per_seed} | {len(score.failures)} |")
    return lines


def cost(result: SearchResult) -> dict[str, float | None]:
    """What the search's candidates cost: mean wall seconds per evaluated candidate, candidates
    per minute of the session, and the sandbox's fork server start-up (seconds, summed)."""
    walls = [c.result.wall_s for c in result.candidates if c.result is not None and c.result.wall_s]
    minutes = result.wall_s / 60 if result.wall_s else None
    return {
        "candidate_wall_s": sum(walls) / len(walls) if walls else None,
        "candidates_per_minute": len(walls) / minutes if minutes and walls else None,
        "search_wall_s": result.wall_s,
        "fork_server_start_s": result.fork_server_start_s,
    }


def _cost_line(result: SearchResult) -> str:
    spent = cost(result)
    parts = [f"search {spent['search_wall_s']:.0f} s"]
    if spent["candidate_wall_s"] is not None:
        parts.append(f"{spent['candidate_wall_s']:.1f} s per candidate (sandbox start to result)")
    if spent["candidates_per_minute"] is not None:
        parts.append(f"{spent['candidates_per_minute']:.1f} candidates per minute")
    compiled = result.config.training_kwargs()["compile"]
    if spent["fork_server_start_s"] is not None:
        parts.append(f"sandbox fork server start {spent['fork_server_start_s']:.1f} s"
                     + (" (with loading PPO's compiled graphs, or compiling them on a budget's first search)"
                        if compiled else ""))
    eager = [c.result.compile_note for c in result.candidates if c.result is not None and c.result.compile_note]
    parts.append("PPO " + ("eager" if not compiled else f"compiled ({len(eager)} candidates eager: {markdown_text(eager[0])})"
                           if eager else "compiled"))
    return "Cost: " + ", ".join(parts) + "."


def _finalist_lines(finalists: list[Candidate], best: Candidate) -> list[str]:
    """The finalists' table: late fitness on the search's seed(s), on each extra seed, their mean
    and the lower confidence bound that picks the best (:func:`confirmed_fitness`)."""
    extra = sorted({seed for c in finalists for seed in c.confirmation or {}})
    lines = [f"The finalists (the best candidates by their training seed, and the offline proposer's first "
             "program, the human reward's structure or the env's own reward, where it was not among them) "
             "were trained again with seeds "
             f"{', '.join(map(str, extra))}; the best program is the one with the highest lower bound of its "
             f"fitness (mean of the last {LATE_CHECKPOINTS} checkpoints) over all its seeds, the mean less one "
             "standard error, so that a finalist which misses on some seeds does not win on its mean:", "",
             "| finalist | search seed(s) | " + " | ".join(f"seed {seed}" for seed in extra)
             + " | mean | lower bound | chosen |",
             "|---|---|" + "---|" * len(extra) + "---|---|---|"]
    for c in sorted(finalists, key=confirmed_fitness, reverse=True):
        cells = [("failed" if (c.confirmation or {}).get(seed) is None else f"{c.confirmation[seed]:.4g}")
                 for seed in extra]
        values = seed_fitness(c)
        lines.append(f"| {c.key} | {rank_key(c)[0]:.4g} | " + " | ".join(cells)
                     + f" | {sum(values) / len(values):.4g} | {confirmed_fitness(c):.4g} | "
                     f"{'yes' if c is best else ''} |")
    return [*lines, ""]


def _report(result: SearchResult, feedback: dict[int, str | None]) -> str:
    config, best = result.config, result.best
    proposer = f"llm ({result.llm})" if result.llm else config.proposer
    who = f"Mode: {config.mode}; proposer" if config.proposer == "llm" else "Proposer"
    seeds = ", ".join(map(str, config.seeds))
    lines = [
        f"# Reward search: {config.env_id}",
        "",
        f"Task: {markdown_text(config.task)}",
        "",
        f"{who}: {proposer}; budget: {config.iterations} iterations x "
        f"{config.samples} samples, {config.steps:,} env steps per candidate over {config.num_envs} envs "
        f"(seeds {seeds}); evaluations: {result.executor}; this session's wall time {result.wall_s:.0f} s.",
        "",
        *([f"Budget: {config.budget_note}.", ""] if config.budget_note else []),
        _cost_line(result),
        "",
        "## Summary",
        "",
        "| candidates | trained | stopped early | failed or rejected | reward-hacking flags | LLM answers "
        "| failed LLM calls | retries | prompt tokens | completion tokens | cost |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        f"| {len(result.candidates)} | {sum(c.ok for c in result.candidates)} | {result.stopped_early} | "
        f"{sum(result.failures.values())} | "
        f"{sum(bool(c.signals and c.signals.hacking) for c in result.candidates)} | {result.llm_calls} | "
        f"{result.llm_failures} | {result.llm_retries} | {result.usage.prompt_tokens:,} | "
        f"{result.usage.completion_tokens:,} | "
        f"{'unknown (no price for the model)' if result.cost_unknown else _cost(result.cost_usd)} |",
        "",
    ]
    if result.usage.estimated:
        lines += ["Some token counts are estimates (4 characters a token): the server reported no usage.", ""]
    if result.failures:
        lines += ["Failures by kind: " + ", ".join(f"{kind} {n}" for kind, n in sorted(result.failures.items())), ""]
    lines += [_early_stopping_line(result), ""]
    screen = prescreen_summary(result)
    if screen is not None:
        lines += [_prescreen_text(screen, config.steps, len(config.seeds)), ""]
    lines += ["## Best program", ""]
    if best is None or best.result is None:
        lines += ["No candidate trained successfully; the failures below say why.", ""]
    else:
        signals = best.signals
        lines += [
            f"{best.key}: task fitness {best.fitness:.4g} at {config.steps:,} steps (seeds {seeds})"
            + (f", reward/fitness correlation {signals.correlation:+.2f}" if signals and signals.correlation is not None else "")
            + (" — REWARD HACKING SIGNAL" if signals and signals.hacking else "") + ".",
            "",
        ]
        finalists = [c for c in result.candidates if c.confirmation is not None]
        if finalists:
            lines += _finalist_lines(finalists, best)
        if result.final:
            final_seeds = ", ".join(str(seed) for seed in next(iter(result.final.values())).fitness)
            lines += [f"Re-trained with {config.final_seeds} new seed(s) ({final_seeds}), next to the reference "
                      "rewards:", "", *_final_rows(result), ""]
            failures = seed_failures(result)
            if failures is not None:
                lines += [f"{failures.message[:1].upper()}{failures.message[1:]}.", ""]
            if result.normalized_score is not None:
                lines += [f"Normalised score (best - sparse) / |human - sparse| = **{result.normalized_score:.3f}** "
                          "(1 = as good as the human reward, 0 = as good as the sparse one).", ""]
            elif {"sparse", "human"} <= set(result.final):
                tied = references_tied(result.final)
                lines += ["Normalised score (best - sparse) / |human - sparse|: undefined ("
                          + (tied or "one of the references failed") + ").", ""]
            elif "sparse" in result.final and "human" not in result.final:
                lines += [("The human reference of this env is its own reward, the sparse one: trained and "
                           "reported once, as the sparse reference; no normalised score."
                           if config.env_id in registered_reference_programs() else
                           f"{config.env_id} has no human reference reward, so the best program is compared with "
                           "the env's own reward only and there is no normalised score "
                           "(rewardlab.llm_reward.register_reference_programs adds one)."), ""]
        # the final runs there are (none without final seeds): an env without a human reference,
        # or whose human reference is its own reward, has no final/human
        runs = " ".join(f"{result.out}/final/{label}" for label in ("best", "human", "sparse") if label in result.final)
        compare = f" Compare the final runs: `rewardlab compare {runs} --out {result.out}/compare`." if runs else ""
        outcome = verdict(result)
        next_step = (f"{outcome.message[:1].upper()}{outcome.message[1:]}."
                     if outcome.beat_sparse is False else
                     f"Train on it: `{shlex.join(train_command(result))}`.")
        lines += [*fenced((best.source or "").rstrip(), language="python"), "",
                  f"{next_step}{compare} TensorBoard: `tensorboard --logdir {result.out}`.", ""]
    lines += ["## Iterations", ""]
    header = ("| candidate | status | fitness | success | reward~fitness corr | hacking | prescreen tau | tokens "
              "| cost | train s |")
    for iteration in range(config.iterations):
        members = [c for c in result.candidates if c.iteration == iteration]
        trained = [c for c in members if c.ok]
        top = max((c.fitness for c in trained if c.fitness is not None), default=None)
        lines += [f"### Iteration {iteration + 1}", "", f"{len(trained)} of {len(members)} trained; best fitness "
                  f"{_number(top)}.", ""]
        if feedback.get(iteration):
            lines += ["Human feedback given before this iteration:", "",
                      *(f"> {markdown_text(line)}" for line in str(feedback[iteration]).splitlines()), ""]
        lines += [header, "|" + "---|" * 10, *(_candidate_row(c) for c in members), ""]
        failures = [line for c in members for line in _failure_block(c)]
        hacking = [f"- **{c.key}**: reward-hacking signal: {markdown_text(c.signals.reason)}" for c in members
                   if c.signals is not None and c.signals.hacking]
        stuck = [f"- **{c.key}**: {markdown_text(c.signals.reason)}" for c in members
                 if c.signals is not None and c.signals.stuck]
        notes = [f"- **{c.key}**: {markdown_text(note)}" for c in members if c.result is not None
                 for note in c.result.notes]
        if failures or hacking or stuck or notes:
            lines += ["Failures and findings:", "", *failures, *hacking, *stuck, *notes, ""]
    return "\n".join(lines)


def _inconclusive(screen: dict[str, Any]) -> str:
    if not screen["inconclusive"]:
        return ""
    return (f"; {screen['inconclusive']} passed untested (inconclusive: fewer than {MIN_PAIRS} pairs of stored "
            "trajectories differ in task return)")


def _prescreen_text(screen: dict[str, Any], steps: int, seeds: int) -> str:
    tau = screen["best_tau"]
    if screen["mode"] == "reject":
        saved = screen["seconds_saved_estimate"]
        text = (f"Prescreen (trajectory preference, Kendall tau >= {screen['threshold']:+.2f}): scored "
                f"{screen['scored']} programs and rejected {screen['rejected']} before training "
                f"({screen['rejected'] - screen['failed_on_trajectories']} ranked the stored trajectories "
                f"badly, {screen['failed_on_trajectories']} failed on them), saving "
                f"{screen['trainings_saved']} trainings of {steps:,} steps x {seeds} seed(s)")
        if saved is not None:
            text += f" (about {saved:.0f} s at this run's mean training time)"
        text += _inconclusive(screen)
        text += (". A rejected program is never trained, so it never became the best; the best passed with "
                 f"tau {_number(tau, '+.2f')}. Run with --prescreen-audit to see how rejected programs "
                 "would have trained.")
        return text
    rejected_best = "yes" if screen["rejected_eventual_best"] else "no"
    return (f"Prescreen audit (Kendall tau >= {screen['threshold']:+.2f}; every program trained anyway): it "
            f"would have rejected {screen['rejected']} of {screen['scored']} programs, saving "
            f"{screen['would_save_trainings']} trainings{_inconclusive(screen)}; it would have rejected the "
            "eventual best: "
            f"{rejected_best} (best's tau {_number(tau, '+.2f')}); best fitness among those it would have "
            f"rejected: {_number(screen['best_fitness_among_rejected'])}.")


def _best_header(result: SearchResult) -> list[str]:
    best, config = result.best, result.config
    assert best is not None
    lines = [
        f"Best reward program of a rewardlab search (candidate {best.key}).",
        f"Task: {' '.join(sanitize(config.task).split())}",  # one comment line, whatever the task holds
        f"Search fitness: {best.fitness:.4g} after {config.steps:,} env steps (seeds "
        f"{', '.join(map(str, config.seeds))}).",
    ]
    final = result.final
    if "best" in final and final["best"].mean is not None:
        parts = [f"{label} {final[label].mean:.4g} ± {final[label].std:.3g}" for label in ("best", "human", "sparse")
                 if label in final and final[label].mean is not None]
        lines.append(f"Re-trained with {config.final_seeds} seeds: " + "; ".join(parts) + ".")
    if result.normalized_score is not None:
        lines.append(f"Normalised score (best - sparse) / |human - sparse|: {result.normalized_score:.3f}.")
    lines += [
        f"Use: rewardlab train --env {config.env_id} --reward-program best_reward.py --logdir {TRAIN_FOLDER}",
        # the env named by the caller: a file's module:Env-v0 id alone is refused, never imported
        "  or, once you have read it: rewardlab.llm_reward.load_reward('best_reward.py', "
        f"env_id={config.env_id!r}).wrap(env, trusted=True)",
    ]
    return lines


def train_command(result: SearchResult) -> list[str]:
    """The command that trains on a search's best program, into ``TRAIN_FOLDER`` under its
    ``--out`` (so that a second search's next step never names the first one's run).

    :param result: a finished search.
    """
    return ["rewardlab", "train", "--env", result.config.env_id, "--reward-program",
            str(result.out / BEST_FILE), "--logdir", str(result.out / TRAIN_FOLDER)]


def render(result: SearchResult) -> dict[str, str]:
    """The search's output files, by name: ``report.md``, its page ``report.html``,
    ``summary.json`` and (when a candidate trained) ``best_reward.py``. Pure: it reads
    ``result`` alone; the search writes the files into its run directory.

    :param result: the search's result.
    """
    files = {
        REPORT_FILE: _report(result, result.feedback),
        HTML_FILE: html_report(result, final_statistics(result)),
        SUMMARY_FILE: json.dumps(summary(result), indent=2) + "\n",
    }
    if result.best is not None and result.best.source is not None:
        files[BEST_FILE] = reward_file_text(result.best.source, result.config.env_id, _best_header(result))
    return files
