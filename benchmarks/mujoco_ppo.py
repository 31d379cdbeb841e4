"""MuJoCo return against wall time: rewardlab's on-device PPO beside SB3's PPO.

For HalfCheetah-v5 and Hopper-v5, each seed trains, interleaved (ours seed 0, SB3 seed 0,
ours seed 1, ...) so that other load on the machine falls on both alike:

- ``ours``: ``rewardlab.agents.PPO`` on ``rewardlab.envs.make(env_id, num_envs)`` (rewardlab's batched MuJoCo
  envs, one physics thread) with ``rewardlab.agents.ppo.MUJOCO_CONFIG``;
- ``sb3``: SB3's PPO on Gymnasium's own env, ``make_vec_env(env_id, 1)`` (a
  ``DummyVecEnv``) in ``VecNormalize``: rl-baselines3-zoo's ``mujoco-defaults``, which are
  SB3's default hyperparameters (the PPO paper's MuJoCo settings) with normalised
  observations and rewards.

Both envs have the same dynamics, observations and rewards. Every run records, after each
update, ``(env steps, training seconds, mean return of the last 100 finished training
episodes)``, and every ``--eval-freq`` steps and at the end a deterministic evaluation: one
fresh episode in each of ``--eval-episodes`` envs of a separate batched env (the same for
both learners; its episodes continue one seed's stream, so every evaluation starts fresh
episodes). The training clock is paused while evaluating; evaluation time is reported apart.

Each learner has its own step budget (``--steps-ours``, ``--steps-sb3``; both default to
``--steps``) and evaluation interval (``--eval-freq-ours``, ``--eval-freq-sb3``; default
``--eval-freq``, else max(20k, a twentieth of the learner's budget)).

Per env the report gives the median over seeds of the final evaluation return and of the
training wall time, how long our PPO takes to reach SB3's median final return (the
training seconds at our first evaluation at or above it, median over seeds, as a ratio of
SB3's median training time, or "never" when most of our seeds do not get there), and the
comparison at equal wall time: our evaluation return at the first evaluation at or after
SB3's median training time (median over seeds) beside SB3's median final return. With a
larger budget for ours than for SB3 this answers "what does ours reach in the time SB3
takes", and our final return says where our longer run ends.

Writes ``benchmarks/results/mujoco_ppo.{json,md}``.

    python -m benchmarks.mujoco_ppo                    # the full protocol: 1M steps, 3 seeds
    python -m benchmarks.mujoco_ppo --steps 200000     # a reduced budget
    python -m benchmarks.mujoco_ppo --steps-ours 1000000 --steps-sb3 200000
    python -m benchmarks.mujoco_ppo --envs Hopper-v5 --seeds 0 --learners ours --steps 100000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.machine import describe_machine, recorded_args
from benchmarks.ppo_speed import _median_lower_bound, evaluate
from rewardlab import envs
from rewardlab.agents import PPO
from rewardlab.agents.ppo import MUJOCO_CONFIG, MUJOCO_NUM_ENVS

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("agents/ppo.py", "agents/base.py", "envs/mujoco/", "envs/core.py")

RESULTS = Path(__file__).parent / "results"
FULL_STEPS = 1_000_000
LEARNERS = ("ours", "sb3")

# rl-baselines3-zoo's hyperparams/ppo.yml, "mujoco-defaults": normalize: true, n_envs 1,
# everything else SB3's defaults (n_steps 2048, batch_size 64, n_epochs 10, lr 3e-4,
# gamma 0.99, gae_lambda 0.95, clip_range 0.2, 64x64 tanh MLPs, log_std_init 0).
SB3_SETTINGS: dict[str, Any] = {"n_envs": 1, "normalize": True}


class Recorder:
    """The training clock (paused during evaluations), the learning curve and evaluations.

    :param act: the learner's deterministic policy: observations ``(N, obs_dim)`` tensor ->
        actions (tensor or numpy).
    :param eval_env: the batched evaluation env.
    :param eval_freq: evaluate once at least this many env steps have passed since the last.
    """

    def __init__(self, act: Callable[[torch.Tensor], Any], eval_env: Any, eval_freq: int) -> None:
        self.act, self.eval_env, self.eval_freq = act, eval_env, eval_freq
        self.train_seconds = self.eval_seconds = 0.0
        self.next_eval = eval_freq
        # (env steps, training seconds, mean return of the last 100 finished training episodes)
        self.curve: list[tuple[int, float, float | None]] = []
        # (env steps, training seconds, mean deterministic evaluation return)
        self.evaluations: list[tuple[int, float, float]] = []
        self._started = time.perf_counter()

    def after_update(self, num_timesteps: int, episode_returns: list[float]) -> None:
        """Record a curve point, and evaluate if due; the clock runs only while training."""
        self.train_seconds += time.perf_counter() - self._started
        recent = float(np.mean(episode_returns)) if episode_returns else None
        self.curve.append((num_timesteps, self.train_seconds, recent))
        if num_timesteps >= self.next_eval:
            while self.next_eval <= num_timesteps:
                self.next_eval += self.eval_freq
            self._evaluate(num_timesteps)
        self._started = time.perf_counter()

    def finish(self, num_timesteps: int, episode_returns: list[float]) -> None:
        """At the end of training: the last curve point and the final evaluation."""
        if not self.curve or self.curve[-1][0] != num_timesteps:
            self.after_update(num_timesteps, episode_returns)
        if self.evaluations[-1:] and self.evaluations[-1][0] == num_timesteps:
            return
        self._evaluate(num_timesteps)

    def _evaluate(self, num_timesteps: int) -> None:
        start = time.perf_counter()
        score = evaluate(self.act, self.eval_env)
        self.eval_seconds += time.perf_counter() - start
        self.evaluations.append((num_timesteps, self.train_seconds, score))


def eval_env_for(env_id: str, seed: int, episodes: int) -> Any:
    """The batched evaluation env of one seed (the same for both learners)."""
    return envs.make(env_id, num_envs=episodes, device="cpu", seed=10_000 + seed, nthread=1)


def run_ours(
    env_id: str, seed: int, steps: int, eval_freq: int, eval_episodes: int, settings: dict
) -> dict:
    """Train ``rewardlab.agents.PPO`` on the batched env for ``steps``; return the measurements."""
    settings = dict(settings)
    num_envs = settings.pop("num_envs")
    env = envs.make(env_id, num_envs=num_envs, device="cpu", seed=seed, nthread=1)
    model = PPO(env, seed=seed, **settings)
    recorder = Recorder(
        lambda obs: model.predict(obs)[0], eval_env_for(env_id, seed, eval_episodes), eval_freq
    )

    def returns() -> list[float]:
        return [e["r"] for e in model.ep_info_buffer]

    model.learn(steps, callback=lambda local: recorder.after_update(model.num_timesteps, returns()))
    recorder.finish(model.num_timesteps, returns())
    return _result("ours", env_id, seed, model.num_timesteps, recorder)


def run_sb3(env_id: str, seed: int, steps: int, eval_freq: int, eval_episodes: int) -> dict:
    """Train SB3's PPO on Gymnasium's env for ``steps``; return the measurements."""
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    settings = dict(SB3_SETTINGS)
    venv = make_vec_env(env_id, n_envs=settings.pop("n_envs"), seed=seed)
    if settings.pop("normalize"):
        venv = VecNormalize(venv)
    model = SB3PPO("MlpPolicy", venv, seed=seed, device="cpu", **settings)

    def act(obs: torch.Tensor) -> np.ndarray:
        # Frozen statistics: normalize_obs reads them and does not update them.
        return model.predict(venv.normalize_obs(obs.numpy()), deterministic=True)[0]

    recorder = Recorder(act, eval_env_for(env_id, seed, eval_episodes), eval_freq)

    def returns() -> list[float]:
        return [e["r"] for e in model.ep_info_buffer]

    class AfterUpdate(BaseCallback):
        # SB3 calls _on_rollout_start right after each update (and before the first rollout).
        def _on_rollout_start(self) -> None:
            if self.num_timesteps:
                recorder.after_update(self.num_timesteps, returns())

        def _on_step(self) -> bool:
            return True

    model.learn(steps, callback=AfterUpdate())
    recorder.finish(model.num_timesteps, returns())
    return _result("sb3", env_id, seed, model.num_timesteps, recorder)


def _result(learner: str, env_id: str, seed: int, steps: int, recorder: Recorder) -> dict:
    return {
        "learner": learner,
        "env_id": env_id,
        "seed": seed,
        "steps_trained": steps,
        "train_seconds": recorder.train_seconds,
        "eval_seconds": recorder.eval_seconds,
        "train_steps_per_second": steps / recorder.train_seconds,
        "final_eval_return": recorder.evaluations[-1][2],
        "final_train_return": recorder.curve[-1][2],
        "curve": recorder.curve,
        "evaluations": recorder.evaluations,
    }


def summarize(runs: list[dict]) -> list[dict]:
    """Per env: medians over seeds of both learners, and our time to reach SB3's final median."""
    rows = []
    for env_id in dict.fromkeys(r["env_id"] for r in runs):
        row: dict[str, Any] = {"env_id": env_id}
        for learner in LEARNERS:
            group = [r for r in runs if r["env_id"] == env_id and r["learner"] == learner]
            if not group:
                continue
            row[learner] = {
                "seeds": len(group),
                "median_final_eval_return": statistics.median(
                    r["final_eval_return"] for r in group
                ),
                "final_eval_returns": [r["final_eval_return"] for r in group],
                "median_train_seconds": statistics.median(r["train_seconds"] for r in group),
                "median_steps_trained": statistics.median(r["steps_trained"] for r in group),
                "median_train_steps_per_second": statistics.median(
                    r["train_steps_per_second"] for r in group
                ),
                "eval_seconds_total": sum(r["eval_seconds"] for r in group),
            }
        if "ours" in row and "sb3" in row:
            target = row["sb3"]["median_final_eval_return"]
            ours = [r for r in runs if r["env_id"] == env_id and r["learner"] == "ours"]
            reached = [_first_reaching(r["evaluations"], target) for r in ours]
            # A seed that never reaches the target counts as "at least its whole run".
            seconds = _median_lower_bound(
                [
                    hit[1] if hit else r["train_seconds"]
                    for hit, r in zip(reached, ours, strict=True)
                ],
                [hit is not None for hit in reached],
            )
            steps = _median_lower_bound(
                [
                    hit[0] if hit else r["steps_trained"]
                    for hit, r in zip(reached, ours, strict=True)
                ],
                [hit is not None for hit in reached],
            )
            row["ours_to_reach_sb3_final"] = {
                "target": target,
                "seeds_reached": sum(hit is not None for hit in reached),
                "median_seconds": seconds,
                "median_steps": steps,
                # None: the median seed never got there ("never" in the table).
                "ratio_to_sb3_train_seconds": (
                    None
                    if seconds["at_least"]
                    else seconds["value"] / row["sb3"]["median_train_seconds"]
                ),
            }
            row["ours_at_sb3_train_seconds"] = _at_time(ours, row["sb3"]["median_train_seconds"])
        rows.append(row)
    return rows


def _at_time(ours: list[dict], seconds: float) -> dict:
    """Our evaluation at (the first evaluation at or after) ``seconds`` of training, per seed.

    A run that ends before ``seconds`` gives its final evaluation, flagged ``short``.
    """
    picks = []
    for run in ours:
        hit = next((e for e in run["evaluations"] if e[1] >= seconds), None)
        picks.append((*(hit or run["evaluations"][-1]), hit is None))
    return {
        "sb3_median_train_seconds": seconds,
        "eval_returns": [p[2] for p in picks],
        "eval_steps": [p[0] for p in picks],
        "eval_train_seconds": [p[1] for p in picks],
        "seeds_short": sum(p[3] for p in picks),
        "median_eval_return": statistics.median(p[2] for p in picks),
        "median_eval_steps": statistics.median(p[0] for p in picks),
        "median_eval_train_seconds": statistics.median(p[1] for p in picks),
    }


def _first_reaching(evaluations: list, target: float) -> tuple[int, float] | None:
    """``(steps, training seconds)`` of the first evaluation at or above ``target``, or None."""
    for steps, seconds, score in evaluations:
        if score >= target:
            return steps, seconds
    return None


def markdown(report: dict) -> str:
    """The result table and the settings."""
    args, machine = report["args"], report["machine"]
    load = report["load_average_1_5_15_min"]
    steps = report["steps"]
    if steps["ours"] == steps["sb3"]:
        budget = f"{steps['ours']:,} env steps per run"
    else:
        budget = f"ours {steps['ours']:,}, SB3 {steps['sb3']:,} env steps per run"
    reduced = [name for name in LEARNERS if steps[name] < FULL_STEPS]
    budget += (
        f" — **a reduced budget for {' and '.join('SB3' if n == 'sb3' else n for n in reduced)}**: "
        f"the full protocol is {FULL_STEPS:,} steps per run"
        if reduced
        else " (the full protocol)"
    )
    freq = report["eval_freq"]
    lines = [
        "# MuJoCo PPO: agents.PPO vs Stable-Baselines3 PPO, return against wall time",
        "",
        f"Budget: {budget}. Seeds {args['seeds']}, interleaved (ours, SB3, ours, ...).",
        f"Machine: {machine['summary']}; {machine['platform']}; torch threads "
        f"{machine['torch_threads']}. Load average (1 min) {load['before'][0]:.1f} before, "
        f"{load['after'][0]:.1f} after; the whole run took {report['wall_seconds'] / 60:.0f} min.",
        f"Command: `{report['command']}`",
        "",
        f"Return: mean of one deterministic episode in each of {args['eval_episodes']} fresh "
        f"envs, after training (and every >= {freq['ours']:,} steps for ours, "
        f">= {freq['sb3']:,} for SB3). Train s: training wall-clock, evaluation excluded. "
        "Medians over seeds.",
        *_budget_notes(report),
        "",
        "## At equal wall time",
        "",
        "Ours at SB3's time: our evaluation return at the first evaluation at or after SB3's "
        "median training time (median over seeds; in brackets that evaluation's steps and "
        "training seconds, medians), beside SB3's median final return at that time. Ours "
        "final: our median final return and training time at the end of our budget.",
        "",
        "| env | SB3 train s | return SB3 (final) | return ours at SB3's time "
        "| return ours (final) | train s ours (final) |",
        "|---|---|---|---|---|---|",
    ]
    for row in report["summary"]:
        if "ours_at_sb3_train_seconds" not in row:
            continue
        ours, sb3, at = row["ours"], row["sb3"], row["ours_at_sb3_train_seconds"]
        short = f"; {at['seeds_short']} seeds ended sooner" if at["seeds_short"] else ""
        lines.append(
            f"| {row['env_id']} | {sb3['median_train_seconds']:.0f} "
            f"| {sb3['median_final_eval_return']:.0f} "
            f"| {at['median_eval_return']:.0f} ({at['median_eval_steps']:,.0f} steps, "
            f"{at['median_eval_train_seconds']:.0f} s{short}) "
            f"| {ours['median_final_eval_return']:.0f} ({ours['median_steps_trained']:,.0f} steps) "
            f"| {ours['median_train_seconds']:.0f} |"
        )
    lines += [
        "",
        "## Final returns, speed, time to reach SB3's return",
        "",
        "Each learner at the end of its own budget. To reach SB3: our training seconds at the "
        "first evaluation at or above SB3's median final return (median over seeds), and that "
        'time over SB3\'s median training time; "never" when most of our seeds do not reach '
        "it.",
        "",
        "| env | return ours | return SB3 | train s ours | train s SB3 | steps/s ours "
        "| steps/s SB3 | ours to reach SB3's return | time ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["summary"]:
        if "ours" not in row or "sb3" not in row:
            continue
        ours, sb3, reach = row["ours"], row["sb3"], row["ours_to_reach_sb3_final"]
        if reach["ratio_to_sb3_train_seconds"] is None:
            reach_text, ratio_text = (
                f"never ({reach['seeds_reached']}/{ours['seeds']} seeds)",
                "never",
            )
        else:
            reach_text = (
                f"{reach['median_seconds']['value']:.0f} s, {reach['median_steps']['value']:,} "
                f"steps ({reach['seeds_reached']}/{ours['seeds']} seeds)"
            )
            ratio_text = f"{reach['ratio_to_sb3_train_seconds']:.2f}"
        lines.append(
            f"| {row['env_id']} | {ours['median_final_eval_return']:.0f} "
            f"| {sb3['median_final_eval_return']:.0f} | {ours['median_train_seconds']:.0f} "
            f"| {sb3['median_train_seconds']:.0f} | {ours['median_train_steps_per_second']:,.0f} "
            f"| {sb3['median_train_steps_per_second']:,.0f} | {reach_text} | {ratio_text} |"
        )
    lines += ["", "Final evaluation returns per seed:", ""]
    for row in report["summary"]:
        for learner in LEARNERS:
            if learner in row:
                returns = ", ".join(f"{r:.0f}" for r in row[learner]["final_eval_returns"])
                lines.append(f"- {row['env_id']} {learner}: {returns}")
        if "ours_at_sb3_train_seconds" in row:
            at = row["ours_at_sb3_train_seconds"]
            picks = ", ".join(
                f"{r:.0f} ({n:,} steps, {t:.0f} s)"
                for r, n, t in zip(
                    at["eval_returns"], at["eval_steps"], at["eval_train_seconds"], strict=True
                )
            )
            lines.append(f"- {row['env_id']} ours at SB3's median train s: {picks}")
    lines += [
        "",
        "Curves for plotting (return against training seconds) are in the JSON: per run, "
        "`curve` (steps, train s, mean return of the last 100 finished training episodes) "
        "and `evaluations` (steps, train s, deterministic evaluation return).",
        "",
        "Ours (`rewardlab.agents.ppo.MUJOCO_NUM_ENVS` envs, `rewardlab.agents.ppo.MUJOCO_CONFIG`): "
        f"`{json.dumps(report['ours_settings'])}`",
        "",
        "SB3: rl-baselines3-zoo's `mujoco-defaults` (SB3's default PPO hyperparameters, "
        f"VecNormalize on observations and rewards): `{json.dumps(SB3_SETTINGS)}`",
    ]
    return "\n".join(lines) + "\n"


def _budget_notes(report: dict) -> list[str]:
    """Why a budget is reduced (SB3's projected full-protocol time) and what that changes."""
    steps, notes = report["steps"], []
    sb3_rates = [
        row["sb3"]["median_train_steps_per_second"] for row in report["summary"] if "sb3" in row
    ]
    if steps["sb3"] < FULL_STEPS and sb3_rates:
        per_run = FULL_STEPS / statistics.median(sb3_rates)
        runs = sum(row["sb3"]["seeds"] for row in report["summary"] if "sb3" in row)
        notes.append(
            f"SB3's budget is reduced to {steps['sb3']:,} steps because of time: at its "
            f"measured rate here a {FULL_STEPS:,}-step SB3 run would take ~{per_run / 60:.0f} "
            f"min of training, ~{runs * per_run / 60:.0f} min for its {runs} runs. SB3's "
            "return at 1M steps is therefore not measured; the equal-wall-time table compares "
            "the two at the time SB3 spends on its reduced budget."
        )
    if steps["ours"] != steps["sb3"] and report["ours_settings"].get("anneal_lr"):
        notes.append(
            "Our learning rate anneals linearly over our own budget "
            f"({steps['ours']:,} steps), so our return at SB3's time is from the middle of a "
            "longer schedule, not from a run sized to that time."
        )
    return [line for note in notes for line in ("", note)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--steps", type=int, default=FULL_STEPS, help="env steps per run (full protocol: 1M)"
    )
    parser.add_argument("--steps-ours", type=int, default=None, help="our budget (--steps)")
    parser.add_argument("--steps-sb3", type=int, default=None, help="SB3's budget (--steps)")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    parser.add_argument("--envs", default="HalfCheetah-v5,Hopper-v5")
    parser.add_argument("--learners", default="ours,sb3", help="ours, sb3 or both")
    parser.add_argument(
        "--eval-freq",
        type=int,
        default=None,
        help="env steps between evaluations (default: max(20k, budget / 20) per learner)",
    )
    parser.add_argument("--eval-freq-ours", type=int, default=None, help="ours (--eval-freq)")
    parser.add_argument("--eval-freq-sb3", type=int, default=None, help="SB3's (--eval-freq)")
    parser.add_argument("--eval-episodes", type=int, default=10, help="episodes per evaluation")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument(
        "--ours-hp", default="{}", help="JSON merged into our settings (num_envs and PPO's; trials)"
    )
    parser.add_argument("--out", default=None, help="output path without suffix")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    env_ids = [e for e in args.envs.split(",") if e]
    learners = [name for name in args.learners.split(",") if name]
    unknown = sorted(set(learners) - set(LEARNERS))
    if unknown:
        parser.error(f"--learners {args.learners!r}: unknown {unknown}; choose from {LEARNERS}")
    steps = {
        "ours": args.steps if args.steps_ours is None else args.steps_ours,
        "sb3": args.steps if args.steps_sb3 is None else args.steps_sb3,
    }
    given_freq = {"ours": args.eval_freq_ours, "sb3": args.eval_freq_sb3}
    eval_freq = {
        name: given_freq[name] or args.eval_freq or max(20_000, steps[name] // 20)
        for name in LEARNERS
    }
    ours_settings = {
        "num_envs": MUJOCO_NUM_ENVS,
        **MUJOCO_CONFIG.to_dict(),
        **json.loads(args.ours_hp),
    }

    load_before = os.getloadavg()
    started = time.perf_counter()
    runs = []
    for env_id in env_ids:
        for seed in seeds:
            for learner in learners:
                if learner == "ours":
                    result = run_ours(
                        env_id,
                        seed,
                        steps["ours"],
                        eval_freq["ours"],
                        args.eval_episodes,
                        ours_settings,
                    )
                else:
                    result = run_sb3(
                        env_id, seed, steps["sb3"], eval_freq["sb3"], args.eval_episodes
                    )
                runs.append(result)
                _progress(result)

    report = {
        "machine": describe_machine(),
        "command": " ".join(
            ["python -m benchmarks.mujoco_ppo", *(sys.argv[1:] if argv is None else argv)]
        ),
        "args": {**recorded_args(args), "seeds": seeds},
        "steps": steps,
        "eval_freq": eval_freq,
        "reduced_budget": {name: steps[name] < FULL_STEPS for name in LEARNERS},
        "full_protocol_steps": FULL_STEPS,
        # Other processes slow both learners; the comparison comes from interleaved runs,
        # the absolute times only say how busy the machine was.
        "load_average_1_5_15_min": {"before": load_before, "after": os.getloadavg()},
        "wall_seconds": time.perf_counter() - started,
        "ours_settings": ours_settings,
        "sb3_settings": SB3_SETTINGS,
        "summary": summarize(runs),
        "runs": runs,
    }
    out = Path(args.out) if args.out else RESULTS / "mujoco_ppo"
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{out}.json").write_text(json.dumps(report, indent=2) + "\n")
    Path(f"{out}.md").write_text(markdown(report))
    print(markdown(report))
    return 0


def _progress(result: dict) -> None:
    print(
        f"{result['env_id']} {result['learner']} seed {result['seed']}: "
        f"{result['steps_trained']:,} steps in {result['train_seconds']:.0f} s "
        f"({result['train_steps_per_second']:,.0f} steps/s), final eval "
        f"{result['final_eval_return']:.0f}, recent training return {result['final_train_return']}",
        flush=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
