"""Wall-clock to solve: rewardlab's on-device PPO against SB3's PPO, side by side.

For CartPole-v1 (solved: mean evaluation return >= 475), Acrobot-v1 (>= -100) and
MountainCar-v0 (>= -150; every learner trains on the env's reward plus potential-based
shaping with our built-in energy potential, and is evaluated on the env's own reward), each
seed trains

- ``ours``: ``rewardlab.agents.PPO`` on ``rewardlab.envs.make(env_id, num_envs)`` with the per-env settings in
  ``OURS`` (below, tuned here for time to solve on two CPU cores);
- ``sb3``: SB3's PPO with its default hyperparameters on ``make_vec_env(env_id, 8)``
  (``DummyVecEnv`` of Gymnasium envs), capped at ``--sb3-cap`` steps;
- ``sb3-zoo`` (with ``--sb3-zoo``): SB3's PPO with rl-baselines3-zoo's tuned settings;
- ``jax-<config>`` (with ``--jax CONFIG ...``): a PureJaxRL-style PPO in JAX on gymnax envs
  (``benchmarks/purejaxrl_ppo.py``), in a child process run by ``--jax-python`` (an
  interpreter with rewardlab and the ``bench`` extra: the child evaluates on our envs,
  with torch), with the same thread count; its compile time is
  its warm-up, reported apart and added in the "incl. warm-up" columns. Not on the shaped
  MountainCar-v0: it has no shaping wrapper.

Evaluation: after each update, once every ``--eval-freq`` env steps, the deterministic
policy plays one episode in each of 32 envs of a separate batched env (``rewardlab.envs.make``, the
same for every learner); the run stops at the first evaluation at or above the threshold.
The clock that measures time to solve is paused during evaluation; evaluation time is
reported on its own. ``train steps/s`` is env steps over that training clock, the whole run.

Steady-state speed (with ``--steady-steps N --ours-compiled``): per env and seed,
ours-compiled and each ``--jax`` config also train ``N`` env steps without stopping at the
threshold, one evaluation at the end outside the clock; the table gives the median train
steps/s and ours-compiled's over each JAX learner's.

Pendulum-v1 (ours only): the evaluation return after ``--pendulum-steps`` steps (target:
-200 or better).

Writes ``benchmarks/results/ppo_speed.{json,md}`` (``ppo_speed_quick.*`` with ``--quick``).

    python -m benchmarks.ppo_speed                 # the full run (5 seeds, about 10 minutes)
    python -m benchmarks.ppo_speed --quick         # 2 seeds, small budgets
    python -m benchmarks.ppo_speed --envs CartPole-v1 --seeds 0,1,2 --sb3-cap 150000
    python -m benchmarks.ppo_speed --envs CartPole-v1,Acrobot-v1 --threads 1 --jax ours tuned purejaxrl
    python -m benchmarks.ppo_speed --envs CartPole-v1,Acrobot-v1 --threads 1 --no-sb3 --ours-compiled \
        --jax ours --jax-python PYTHON_WITH_JAX --steady-steps 200000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.machine import describe_machine, recorded_args
from rewardlab import envs
from rewardlab.agents import PPO
from rewardlab.agents.evaluation import play_episodes
from rewardlab.shaping import BatchedPotentialShaping, potentials

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = (
    "agents/ppo.py",
    "agents/rollout.py",
    "agents/base.py",
    "agents/fused.py",
    "envs/core.py",
    "envs/classic/",
    "shaping/core.py",
    "rewardlab/common/networks.py",
    "rewardlab/common/compiled.py",
)

RESULTS = Path(__file__).parent / "results"
THRESHOLDS = {"CartPole-v1": 475.0, "Acrobot-v1": -100.0, "MountainCar-v0": -150.0}
# Trained on the env's reward plus potential-based shaping with our built-in potential
# (``shaping.potentials.for_env``: the car's mechanical energy), the same potential and
# gamma for every learner; evaluated on the env's own reward. The threshold is the search's
# target for the task (issue-level "solves": a mean of -150 or better), not Gymnasium's -110.
SHAPED = {"MountainCar-v0"}
EVAL_ENVS = 32

# Our settings per env, tuned here for time to solve: many envs, short rollouts, large
# minibatches (a quarter of the rollout); Pendulum needs more gradient steps per sample
# (512-sample minibatches) and normalised observations and rewards. CartPole-v1's 4 epochs
# at 3e-3 replaced 10 at 1e-3: median 0.91 s to solve against 2.94 s over 5 seeds (one
# thread, `--no-sb3 --ours-hp '{"n_epochs": 4, "learning_rate": 0.003}'`), and the same
# point is the fastest of the JAX learner's sweep (results/purejaxrl_sweep_cartpole.md).
# Acrobot-v1's 64 envs and 10 epochs (was 128 and 4), the JAX sweep's fastest point
# (results/purejaxrl_sweep_acrobot.md): median 1.48 s to solve against 2.48 s, 5 seeds.
# Then CartPole-v1 took 5e-3 and Acrobot-v1 GAE's lambda 0.8 (was 0.95), measured compiled
# on 20 fresh seeds each by `python -m benchmarks.ppo_settings` after a smaller sweep on other
# seeds: median time to solve 0.81x the settings before on CartPole-v1
# (results/ppo_settings_cartpole.md), 0.32x on Acrobot-v1 (ppo_settings_acrobot.md). Rollouts
# of 16 steps solve in fewer steps still (0.80x and 0.20x there), but halve the minibatches,
# where our fixed costs per minibatch and rollout show: steady state 0.57x and 0.73x the JAX
# learner's (results/ppo_speed_xeon_16steps.md). With lambda 0.8, Acrobot-v1's 32 steps at 3e-3
# take 1.15x the median time to solve of 16 steps at 5e-3 (ppo_settings_acrobot_32steps.md).
# The JAX learner's "ours" config follows these settings.
# MountainCar-v0's 16 envs x 16 steps, rl-zoo's own rollout (was 32 x 64), once a fresh model
# whitened its first rollout and small-variance features (the car's velocity) were whitened to
# unit scale: every setting then solved after one update, and the smaller the rollout the
# sooner (evaluating every 1,024 steps, 64 x 16 in a median 0.008 s against 0.019 s for 32 x 64,
# results/ppo_settings_mountaincar_whitened.md; every 256 steps, 16 x 16 after 256 steps,
# ppo_settings_mountaincar_eval256.md). Then 32 x 8 in minibatches of 128 (was a quarter of
# the rollout, 64), once the shaping wrapper's step ran inside the compiled rollout: median
# time to solve 0.76x 16 x 16's over 20 seeds, every variant after a median 256 steps
# (ppo_settings_mountaincar_fused.md).
OURS: dict[str, dict[str, Any]] = {
    "CartPole-v1": dict(
        num_envs=64, n_steps=32, n_epochs=4, learning_rate=5e-3, gamma=0.98, gae_lambda=0.8,
    ),
    "Acrobot-v1": dict(num_envs=64, n_steps=32, n_epochs=10, learning_rate=3e-3, gae_lambda=0.8),
    "MountainCar-v0": dict(
        num_envs=32, n_steps=8, batch_size=128, n_epochs=4, learning_rate=1e-3,
        normalize_obs=True, normalize_reward=True,
    ),
    "Pendulum-v1": dict(
        num_envs=64, n_steps=64, n_epochs=10, batch_size=512, learning_rate=1e-3, gamma=0.9,
        normalize_obs=True, normalize_reward=True, anneal_lr=True,
    ),
}  # fmt: skip

# rl-baselines3-zoo's hyperparams/ppo.yml ("lin_x": linear from x to 0).
SB3_ZOO: dict[str, dict[str, Any]] = {
    "CartPole-v1": dict(
        n_envs=8, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20,
        ent_coef=0.0, learning_rate="lin_0.001", clip_range="lin_0.2",
    ),
    "Acrobot-v1": dict(
        n_envs=16, normalize=True, n_steps=256, gae_lambda=0.94, gamma=0.99, n_epochs=4,
        ent_coef=0.0,
    ),
    "MountainCar-v0": dict(
        n_envs=16, normalize=True, n_steps=16, gae_lambda=0.98, gamma=0.99, n_epochs=4,
        ent_coef=0.0,
    ),
}  # fmt: skip


def evaluate(act: Callable[[torch.Tensor], Any], env: Any) -> float:
    """Mean true return of one deterministic episode in each env of a batched eval env.

    :param act: observations ``(N, *obs_shape)`` tensor -> actions (tensor or numpy).
    :param env: the batched eval env; every env plays until its first episode ends.
    """
    return play_episodes(act, env).mean_return


class SolveClock:
    """Training time with evaluation paused, and the first step/time a threshold is reached.

    :param act: the learner's deterministic policy, as for ``evaluate``.
    :param eval_env: the batched eval env.
    :param eval_freq: evaluate once at least this many env steps have passed.
    :param threshold: stop at the first evaluation at or above it (None: never stop).
    """

    def __init__(
        self,
        act: Callable[[torch.Tensor], Any],
        eval_env: Any,
        eval_freq: int,
        threshold: float | None,
    ) -> None:
        self.act, self.eval_env, self.eval_freq, self.threshold = (
            act,
            eval_env,
            eval_freq,
            threshold,
        )
        self.train_seconds = self.eval_seconds = 0.0
        self.next_eval = eval_freq
        self.solved_at: tuple[int, float] | None = None
        self.evaluations: list[tuple[int, float]] = []
        self._started = time.perf_counter()

    def after_update(self, num_timesteps: int) -> bool:
        """Evaluate if due; return False once solved (stop training)."""
        if num_timesteps < self.next_eval:
            return True
        self.stop()
        while self.next_eval <= num_timesteps:
            self.next_eval += self.eval_freq
        start = time.perf_counter()
        score = evaluate(self.act, self.eval_env)
        self.eval_seconds += time.perf_counter() - start
        self.evaluations.append((num_timesteps, score))
        if self.threshold is not None and score >= self.threshold:
            self.solved_at = (num_timesteps, self.train_seconds)
            return False
        self._started = time.perf_counter()
        return True

    def stop(self) -> None:
        """Add the running stretch to the training time."""
        self.train_seconds += time.perf_counter() - self._started
        self._started = time.perf_counter()

    def finish(self, num_timesteps: int) -> None:
        """At the end of training: stop the clock and take a final score if unsolved."""
        if self.solved_at is not None:
            return
        self.stop()
        if not self.evaluations or self.evaluations[-1][0] != num_timesteps:
            start = time.perf_counter()
            self.evaluations.append((num_timesteps, evaluate(self.act, self.eval_env)))
            self.eval_seconds += time.perf_counter() - start


def run_ours(
    env_id: str, seed: int, cap: int, eval_freq: int, threshold: float | None, settings: dict
) -> dict:
    """Train ``rewardlab.agents.PPO`` until solved or ``cap`` steps; return the measurements."""
    settings = dict(settings)
    num_envs = settings.pop("num_envs")
    compiled = bool(settings.get("compile"))
    start = time.perf_counter()
    # compile=True: PPO's rollout and update compiled (or loaded from the cache); the rollout
    # compiles the env's step with the policy's, the shaping wrapper's included (its
    # potential is one of ours, which trace)
    env = envs.make(env_id, num_envs=num_envs, device="cpu", seed=seed)
    if env_id in SHAPED:
        env = BatchedPotentialShaping(env, potentials.for_env(env_id), gamma=settings.get("gamma", 0.99))
    model = PPO(env, seed=seed, **settings)
    model.warm_up()
    warm_up = time.perf_counter() - start if compiled else 0.0
    eval_env = envs.make(env_id, num_envs=EVAL_ENVS, device="cpu", seed=10_000 + seed)
    clock = SolveClock(lambda obs: model.predict(obs)[0], eval_env, eval_freq, threshold)
    model.learn(cap, callback=lambda local: clock.after_update(model.num_timesteps))
    clock.finish(model.num_timesteps)
    learner = "ours-compiled" if compiled else "ours"
    return _result(learner, env_id, seed, model.num_timesteps, clock) | {"warm_up_seconds": warm_up}


def run_sb3(
    env_id: str, seed: int, cap: int, eval_freq: int, threshold: float | None, zoo: bool
) -> dict:
    """Train SB3's PPO (defaults, or rl-zoo's settings) until solved or ``cap`` steps."""
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    settings = dict(SB3_ZOO[env_id]) if zoo else {}
    n_envs = settings.pop("n_envs", 8)
    normalize = settings.pop("normalize", False)
    for name in ("learning_rate", "clip_range"):
        if isinstance(settings.get(name), str):
            start = float(settings[name].removeprefix("lin_"))
            settings[name] = lambda progress_remaining, start=start: progress_remaining * start
    venv = make_vec_env(env_id, n_envs=n_envs, seed=seed)
    if env_id in SHAPED:
        from rewardlab.shaping.sb3 import VecPotentialShaping

        venv = VecPotentialShaping(venv, potentials.for_env(env_id), gamma=settings.get("gamma", 0.99))
    if normalize:
        venv = VecNormalize(venv, norm_reward=True)
    model = SB3PPO("MlpPolicy", venv, seed=seed, device="cpu", **settings)

    def act(obs: torch.Tensor) -> np.ndarray:
        obs = obs.numpy()
        if normalize:
            obs = venv.normalize_obs(obs)
        return model.predict(obs, deterministic=True)[0]

    eval_env = envs.make(env_id, num_envs=EVAL_ENVS, device="cpu", seed=10_000 + seed)
    clock = SolveClock(act, eval_env, eval_freq, threshold)

    class AfterUpdate(BaseCallback):
        solved = False

        # SB3 calls _on_rollout_start right after each update (and before the first rollout);
        # only _on_step can stop training, at the first step of the next rollout.
        def _on_rollout_start(self) -> None:
            if self.num_timesteps:
                self.solved = not clock.after_update(self.num_timesteps)

        def _on_step(self) -> bool:
            return not self.solved

    model.learn(cap, callback=AfterUpdate())
    clock.finish(model.num_timesteps)
    return _result("sb3-zoo" if zoo else "sb3", env_id, seed, model.num_timesteps, clock)


def run_jax(
    python: str, config: str, env_id: str, seed: int, cap: int, eval_freq: int,
    threshold: float | None, threads: int, cache: str,
) -> dict:
    """Train the PureJaxRL-style learner in a child process (``benchmarks/purejaxrl_ppo.py``),
    with JAX's persistent compilation cache in ``cache``."""
    command = [
        python, "-m", "benchmarks.purejaxrl_ppo", "--env", env_id, "--config", config,
        "--seed", str(seed), "--cap", str(cap), "--eval-freq", str(eval_freq),
        "--threads", str(threads), "--jax-cache", cache,
    ]  # fmt: skip
    if threshold is not None:
        command += ["--threshold", str(threshold)]
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=Path(__file__).parent.parent, check=False
    )
    if done.returncode != 0:
        raise SystemExit(
            f"the JAX learner failed (exit {done.returncode}); it needs an interpreter with the "
            f"bench extra (pip install -e '.[bench]'), given as --jax-python. Its output:\n"
            f"{done.stderr[-3000:]}"
        )
    return json.loads(done.stdout)


def steady(env_id: str, seed: int, args: argparse.Namespace, settings: dict, cache: str) -> list[dict]:
    """Ours compiled, then each ``--jax`` config, trained ``--steady-steps`` env steps with no
    threshold and one evaluation at the end (outside the clock): steady-state steps/s.
    JAX's clock is its second compiled chunk's (the first compiles)."""
    steps = args.steady_steps
    runs = [run_ours(env_id, seed, steps, steps, None, {**settings, "compile": True})]
    for config in () if env_id in SHAPED else args.jax:
        runs.append(run_jax(
            args.jax_python, config, env_id, seed, steps, steps, None,
            args.threads or torch.get_num_threads(), os.path.join(cache, "jax"),
        ))  # fmt: skip
    for result in runs:
        print(f"{env_id} {result['learner']} seed {seed} steady: "
              f"{result['train_steps_per_second']:,.0f} steps/s", flush=True)
    return runs


def summarize_steady(runs: list[dict], reference: str = "ours-compiled") -> list[dict]:
    """Per env and learner: median steady-state steps/s over seeds, and ours over theirs."""
    rows = []
    for env_id in dict.fromkeys(r["env_id"] for r in runs):
        speeds = {
            learner: statistics.median(
                r["train_steps_per_second"] for r in runs if r["env_id"] == env_id and r["learner"] == learner
            )
            for learner in dict.fromkeys(r["learner"] for r in runs if r["env_id"] == env_id)
        }
        for learner, speed in speeds.items():
            rows.append({
                "env_id": env_id, "learner": learner, "steps": statistics.median(
                    r["steps_trained"] for r in runs if r["env_id"] == env_id and r["learner"] == learner
                ),
                "median_train_steps_per_second": speed,
                "steps_per_second_ratio": None if learner == reference else speeds[reference] / speed,
            })  # fmt: skip
    return rows


def _result(learner: str, env_id: str, seed: int, steps: int, clock: SolveClock) -> dict:
    solved = clock.solved_at is not None
    return {
        "learner": learner,
        "env_id": env_id,
        "seed": seed,
        "solved": solved,
        "steps_to_solve": clock.solved_at[0] if solved else None,
        "seconds_to_solve": clock.solved_at[1] if solved else None,
        "steps_trained": steps,
        "train_seconds": clock.train_seconds,
        "eval_seconds": clock.eval_seconds,
        "train_steps_per_second": steps / clock.train_seconds,
        "final_eval_return": clock.evaluations[-1][1] if clock.evaluations else None,
        "evaluations": clock.evaluations,
    }


def summarize(runs: list[dict], reference: str = "ours") -> list[dict]:
    """Per env and learner: medians over seeds, and ratios against ``reference`` (one of ours)."""
    rows = []
    for env_id in dict.fromkeys(r["env_id"] for r in runs):
        learners = dict.fromkeys(r["learner"] for r in runs if r["env_id"] == env_id)
        for learner in learners:
            group = [r for r in runs if r["env_id"] == env_id and r["learner"] == learner]
            solved = [r for r in group if r["solved"]]
            rows.append(
                {
                    "env_id": env_id,
                    "learner": learner,
                    "seeds": len(group),
                    "solved": len(solved),
                    # Unsolved runs count as "at least the whole run" in the median.
                    "median_seconds_to_solve": _median_lower_bound(
                        [
                            r["seconds_to_solve"] if r["solved"] else r["train_seconds"]
                            for r in group
                        ],
                        [r["solved"] for r in group],
                    ),
                    "median_steps_to_solve": _median_lower_bound(
                        [r["steps_to_solve"] if r["solved"] else r["steps_trained"] for r in group],
                        [r["solved"] for r in group],
                    ),
                    "median_train_steps_per_second": statistics.median(
                        r["train_steps_per_second"] for r in group
                    ),
                    "median_final_eval_return": statistics.median(
                        r["final_eval_return"] for r in group if r["final_eval_return"] is not None
                    ),
                    "eval_seconds_total": sum(r["eval_seconds"] for r in group),
                    "median_warm_up_seconds": statistics.median(
                        r.get("warm_up_seconds", 0.0) for r in group
                    ),
                    # the first seed's: a compile into the empty cache
                    "first_warm_up_seconds": group[0].get("warm_up_seconds", 0.0),
                    "median_seconds_to_solve_with_warm_up": _median_lower_bound(
                        [
                            r.get("warm_up_seconds", 0.0)
                            + (r["seconds_to_solve"] if r["solved"] else r["train_seconds"])
                            for r in group
                        ],
                        [r["solved"] for r in group],
                    ),
                }
            )
    for row in rows:
        ours = next(
            (o for o in rows if o["env_id"] == row["env_id"] and o["learner"] == reference), None
        )
        if ours is None or row is ours:
            continue
        their_time, our_time = row["median_seconds_to_solve"], ours["median_seconds_to_solve"]
        row["time_to_solve_ratio"] = {
            "value": their_time["value"] / our_time["value"],
            # ">=" when theirs is a lower bound and ours is exact
            "at_least": their_time["at_least"] and not our_time["at_least"],
        }
        with_warm_up = row["median_seconds_to_solve_with_warm_up"]
        ours_with = ours["median_seconds_to_solve_with_warm_up"]
        row["time_to_solve_with_warm_up_ratio"] = {
            "value": with_warm_up["value"] / ours_with["value"],
            "at_least": with_warm_up["at_least"] and not ours_with["at_least"],
        }
        row["steps_per_second_ratio"] = (
            ours["median_train_steps_per_second"] / row["median_train_steps_per_second"]
        )
    return rows


def _median_lower_bound(values: list[float], exact: list[bool]) -> dict:
    """The lower median of ``values``, some of which are only lower bounds (``exact`` False).

    It is flagged ``at_least`` when a lower bound sits at or below the median: the true
    value of that run could then lift the median.
    """
    order = sorted(range(len(values)), key=lambda i: values[i])
    middle = (len(order) - 1) // 2
    return {
        "value": values[order[middle]],
        "at_least": not all(exact[i] for i in order[: middle + 1]),
    }


def markdown(report: dict) -> str:
    """The result tables."""
    args, machine = report["args"], report["machine"]
    lines = [
        "# PPO speed: rewardlab.agents.PPO vs Stable-Baselines3 PPO and a PureJaxRL-style JAX PPO",
        "",
        f"Machine: {machine['summary']}; {machine['platform']}; torch threads "
        f"{machine['torch_threads']}. Seeds {args['seeds']}. Load average (1 min) "
        f"{report['load_average_1_5_15_min']['before'][0]:.1f} before, "
        f"{report['load_average_1_5_15_min']['after'][0]:.1f} after; the whole run took "
        f"{report['wall_seconds'] / 60:.0f} min.",
        f"Command: `{report['command']}`",
        "",
        "Time to solve: training wall-clock until the first evaluation at or above the "
        f"threshold (evaluation every >= {args['eval_freq']} steps after an update, "
        f"{EVAL_ENVS} deterministic episodes; evaluation time excluded and listed apart). "
        "`>=`: a median from a run that stopped at its cap unsolved. Warm-up: the JAX learner's "
        "compile, and ours-compiled's (`PPO(compile=True)`, compiling or loading from the cache its rollout's "
        "steps, which include the env's step and the shaping wrapper's of a shaped env, and its update); both use their persistent compile cache, empty at the start "
        "of the run, so the first seed compiles (in brackets) and the median is a load from the cache; eager ours and SB3 "
        f"compile nothing. Ratios: the other learner's median time over {report.get('reference', 'ours')}'s "
        "(above 1: ours is faster), without and with warm-up; our steps/s over theirs.",
        "",
        "| env | learner | solved | median s to solve | warm-up s (first seed) | s to solve incl. warm-up "
        "| median steps to solve | train steps/s | time ratio | time ratio incl. warm-up "
        "| steps/s ratio | eval s (all seeds) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["summary"]:
        if row["env_id"] not in THRESHOLDS:
            continue
        seconds, steps = row["median_seconds_to_solve"], row["median_steps_to_solve"]
        ratio, speed = row.get("time_to_solve_ratio"), row.get("steps_per_second_ratio")
        with_warm_up = row["median_seconds_to_solve_with_warm_up"]
        lines.append(
            f"| {row['env_id']} | {row['learner']} | {row['solved']}/{row['seeds']} "
            f"| {'>= ' if seconds['at_least'] else ''}{seconds['value']:.2f} "
            f"| {row['median_warm_up_seconds']:.2f} ({row['first_warm_up_seconds']:.1f}) "
            f"| {'>= ' if with_warm_up['at_least'] else ''}{with_warm_up['value']:.2f} "
            f"| {'>= ' if steps['at_least'] else ''}{steps['value']:,} "
            f"| {row['median_train_steps_per_second']:,.0f} "
            f"| {_ratio_text(ratio)} | {_ratio_text(row.get('time_to_solve_with_warm_up_ratio'))} "
            f"| {f'{speed:.2f}x' if speed else ''} "
            f"| {row['eval_seconds_total']:.1f} |"
        )
    if report.get("steady_summary"):
        lines += [
            "",
            f"Steady-state training, {args['steady_steps']:,} env steps a run without stopping at the "
            "threshold, interleaved with the runs above (one evaluation at the end, outside the clock; "
            "JAX's clock is its second compiled chunk, the first compiles); median over the seeds. "
            "Ratio: ours-compiled's steps/s over the learner's.",
            "",
            "| env | learner | steps a run | train steps/s | steps/s ratio |",
            "|---|---|---|---|---|",
        ]
        for row in report["steady_summary"]:
            ratio = row["steps_per_second_ratio"]
            lines.append(
                f"| {row['env_id']} | {row['learner']} | {row['steps']:,.0f} "
                f"| {row['median_train_steps_per_second']:,.0f} | {f'{ratio:.2f}x' if ratio else ''} |"
            )
    pendulum = [r for r in report["runs"] if r["env_id"] == "Pendulum-v1"]
    if pendulum:
        lines += [
            "",
            f"Pendulum-v1, ours, {args['pendulum_steps']:,} steps (target -200 or better):",
            "",
            "| seed | eval return | train s | train steps/s |",
            "|---|---|---|---|",
        ]
        for r in pendulum:
            lines.append(
                f"| {r['seed']} | {r['final_eval_return']:.1f} | {r['train_seconds']:.1f} "
                f"| {r['train_steps_per_second']:,.0f} |"
            )
    lines += ["", "Our settings (`OURS` in benchmarks/ppo_speed.py):", ""]
    for env_id, settings in report["ours_settings"].items():
        lines.append(f"- {env_id}: `{json.dumps(settings)}`")
    if args["sb3_zoo"]:
        lines += ["", "SB3 zoo settings (rl-baselines3-zoo hyperparams/ppo.yml):", ""]
        for env_id, settings in SB3_ZOO.items():
            lines.append(f"- {env_id}: `{json.dumps(settings)}`")
    # the configs as each JAX run reports them: the child process that trained says what it ran
    jax_configs = {
        (run["env_id"], run["learner"].removeprefix("jax-")): run["config"]
        for run in report["runs"]
        if run["learner"].startswith("jax-") and "config" in run
    }
    if jax_configs:
        lines += ["", "JAX learner configs (`benchmarks/purejaxrl_ppo.py`):", ""]
        for (env_id, name), config in jax_configs.items():
            lines.append(f"- {env_id}, {name}: `{json.dumps(config)}`")
    return "\n".join(lines) + "\n"


def _ratio_text(ratio: dict | None) -> str:
    if not ratio:
        return ""
    return f"{'>= ' if ratio['at_least'] else ''}{ratio['value']:.2f}x"


def _command(argv: list[str]) -> str:
    """The command line as a result records it: the interpreter given to ``--jax-python``,
    a path of this machine, written ``PYTHON_WITH_JAX``."""
    words = ["python -m benchmarks.ppo_speed"]
    for i, word in enumerate(argv):
        if i > 0 and argv[i - 1] == "--jax-python":
            word = "PYTHON_WITH_JAX"
        elif word.startswith("--jax-python="):
            word = "--jax-python=PYTHON_WITH_JAX"
        words.append(word)
    return " ".join(words)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds")
    parser.add_argument("--envs", default="CartPole-v1,Acrobot-v1,Pendulum-v1")
    parser.add_argument("--ours-cap", type=int, default=500_000, help="step cap of our runs")
    parser.add_argument("--sb3-cap", type=int, default=200_000, help="step cap of SB3's runs")
    parser.add_argument("--sb3-zoo", action="store_true", help="also run SB3 with rl-zoo settings")
    parser.add_argument("--zoo-only", action="store_true",
                        help="with --sb3-zoo: SB3 with rl-zoo's settings only, not with its defaults")
    parser.add_argument("--no-sb3", action="store_true", help="run no SB3 learner")
    parser.add_argument("--cache", default=None,
                        help="compile cache folder for ours-compiled and JAX (default: a new empty one)")
    parser.add_argument("--ours-compiled", action="store_true",
                        help="also run ours with compile=True (the ratios are then against it)")
    parser.add_argument("--jax", nargs="*", default=[], choices=("ours", "tuned", "purejaxrl"),
                        help="also run the PureJaxRL-style JAX learner with these configs")
    parser.add_argument("--jax-python", default=sys.executable,
                        help="interpreter with the bench extra (jax, gymnax) for --jax")
    parser.add_argument("--steady-steps", type=int, default=0,
                        help="also train ours-compiled and each --jax config this many env steps, "
                        "interleaved with the runs to solve, without stopping at the threshold: "
                        "steady-state train steps/s (0: not run)")
    parser.add_argument("--pendulum-steps", type=int, default=1_000_000)
    parser.add_argument("--eval-freq", type=int, default=4096, help="env steps between evaluations")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)"
    )
    parser.add_argument(
        "--ours-hp", default="{}", help="JSON merged into OURS[env_id] for every env"
    )
    parser.add_argument("--quick", action="store_true", help="2 seeds, small caps, short Pendulum")
    parser.add_argument("--out", default=None, help="output path without suffix")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.sb3_cap, args.pendulum_steps = "0,1", 60_000, 200_000
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    env_ids = [e for e in args.envs.split(",") if e]
    overrides = json.loads(args.ours_hp)
    ours_settings = {env_id: {**OURS[env_id], **overrides} for env_id in env_ids}

    reference = "ours-compiled" if args.ours_compiled else "ours"
    # One compile cache for the run, empty at its start: the first seed of ours-compiled and
    # of each JAX config compiles, the later seeds load (both learners' persistent caches).
    cache = args.cache or tempfile.mkdtemp(prefix="ppo-speed-cache-")
    os.environ["REWARDLAB_CACHE"] = cache
    load_before = os.getloadavg()
    started = time.perf_counter()
    runs, steady_runs = [], []
    for env_id in env_ids:
        threshold = THRESHOLDS.get(env_id)
        for seed in seeds:
            if threshold is None:  # Pendulum: a fixed budget, the return reached
                result = run_ours(
                    env_id,
                    seed,
                    args.pendulum_steps,
                    args.pendulum_steps,
                    None,
                    ours_settings[env_id],
                )
            else:
                result = run_ours(
                    env_id, seed, args.ours_cap, args.eval_freq, threshold, ours_settings[env_id]
                )
            runs.append(result)
            _progress(result)
            if threshold is None:
                continue
            if args.ours_compiled:
                compiled = {**ours_settings[env_id], "compile": True}
                result = run_ours(env_id, seed, args.ours_cap, args.eval_freq, threshold, compiled)
                runs.append(result)
                _progress(result)
            for zoo in () if args.no_sb3 else ((True,) if args.zoo_only else (False, True)) if args.sb3_zoo else (False,):
                result = run_sb3(env_id, seed, args.sb3_cap, args.eval_freq, threshold, zoo)
                runs.append(result)
                _progress(result)
            for config in () if env_id in SHAPED else args.jax:  # no shaping in the JAX learner
                result = run_jax(
                    args.jax_python, config, env_id, seed, args.ours_cap, args.eval_freq,
                    threshold, args.threads or torch.get_num_threads(), os.path.join(cache, "jax"),
                )  # fmt: skip
                runs.append(result)
                _progress(result)
            if args.steady_steps and args.ours_compiled:
                steady_runs += steady(env_id, seed, args, ours_settings[env_id], cache)

    report = {
        "machine": describe_machine(),
        "command": _command(sys.argv[1:] if argv is None else argv),
        "args": {**recorded_args(args), "seeds": seeds},
        # Other processes on the machine slow both learners; the ratios come from runs
        # interleaved seed by seed, the absolute times only say how busy the machine was.
        "load_average_1_5_15_min": {"before": load_before, "after": os.getloadavg()},
        "wall_seconds": time.perf_counter() - started,
        "ours_settings": ours_settings,
        "reference": reference,
        "summary": summarize(runs, reference),
        "runs": runs,
        "steady_summary": summarize_steady(steady_runs),
        "steady_runs": steady_runs,
    }
    out = (
        Path(args.out) if args.out else RESULTS / ("ppo_speed_quick" if args.quick else "ppo_speed")
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    return 0


def _progress(result: dict) -> None:
    solved = (
        f"solved at {result['steps_to_solve']:,} steps in {result['seconds_to_solve']:.2f} s"
        if result["solved"]
        else f"final eval {result['final_eval_return']}"
    )
    print(
        f"{result['env_id']} {result['learner']} seed {result['seed']}: {solved}; "
        f"{result['train_steps_per_second']:,.0f} steps/s",
        flush=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
