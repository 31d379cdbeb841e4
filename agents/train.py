"""``rewardlab train``: one command to train with or without shaping and intrinsic rewards.

Each seed gets its own run directory under ``--logdir``::

    runs/NAME/seed_0/
        config.json      the full resolved config: `rewardlab train --config` repeats the run
        tb/              TensorBoard events (SB3's keys, plus reward/<c> and episode/<c>)
        model.pt|.zip    the final model
        checkpoint.*     the latest periodic checkpoint (``--resume`` continues from it)
        metrics.json     status, steps, wall time and the final true evaluation return

Example::

    rewardlab train --env MountainCar-v0 --algo ppo --steps 200000 --seeds 0,1,2 \\
        --shaping builtin --logdir runs/mc_shaped
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ALGOS = ("ppo", "hra", "sb3-ppo", "sb3-a2c", "sb3-dqn", "sb3-sac")
ON_POLICY = ("sb3-ppo", "sb3-a2c")
SHAPINGS = ("none", "builtin")
FUSIONS = ("sum", "product", "cycle", "max")

DEFAULTS: dict[str, Any] = {
    "env": None,
    "algo": "ppo",
    "steps": 100_000,
    "seeds": [0],
    "shaping": "none",
    "shaping_scale": 1.0,
    "intrinsic": [],
    "fusion": "sum",
    "intrinsic_coef": 1.0,
    "num_envs": None,
    "device": "cpu",
    "hyperparameters": {},
    "eval_episodes": 10,
    "checkpoint_every": None,
    "reward_program": None,
}


def resolve_config(args: argparse.Namespace) -> dict[str, Any]:
    """Defaults, then the ``--config`` file, then the flags given on the command line."""
    config = dict(DEFAULTS)
    if args.config:
        config.update(read_config_file(args.config))
    for key in DEFAULTS:
        value = getattr(args, key, None)
        if value is not None:
            config[key] = value
    if args.seed is not None:
        config["seeds"] = [args.seed]
    config = {key: config[key] for key in DEFAULTS}
    check_config(config)
    if config["algo"] == "ppo" and is_mujoco(config["env"]):
        # PPO's own defaults suit classic control; MuJoCo tasks train with the preset, which
        # hyperparameters given in the config file still override.
        from agents.ppo import MUJOCO_HYPERPARAMETERS

        config["hyperparameters"] = {**MUJOCO_HYPERPARAMETERS, **config["hyperparameters"]}
    return config


def is_mujoco(env_id: str) -> bool:
    """Whether ``env_id`` is one of the batched MuJoCo tasks or behaviours."""
    from envs.mujoco import BEHAVIOURS, TASKS

    return env_id in TASKS or env_id in BEHAVIOURS


def read_config_file(path: str) -> dict[str, Any]:
    """Read a JSON (or, on Python 3.11+, TOML) config whose keys are ``DEFAULTS``' keys."""
    text = Path(path).read_text()
    if path.endswith(".toml"):
        import tomllib

        data = tomllib.loads(text)
    else:
        data = json.loads(text)
    data.pop("seed", None)  # a run's own config.json names its seed; --seeds decides here
    unknown = sorted(set(data) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"config file {path} has unknown keys {unknown}; known: {sorted(DEFAULTS)}")
    return data


def check_config(config: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming the value and the valid choices for anything unknown."""
    import envs
    import intrinsic

    if not config["env"]:
        raise ValueError("no env given: pass --env ENV_ID (e.g. --env CartPole-v1)")
    if config["algo"] not in ALGOS:
        raise ValueError(f"unknown algorithm {config['algo']!r}; choose from {', '.join(ALGOS)}")
    if config["algo"] in ("ppo", "hra") and config["env"] not in envs.registered():
        raise ValueError(
            f"--algo {config['algo']} trains on rewardlab's batched envs and {config['env']!r} is not one; "
            f"known: {', '.join(envs.registered())}. Use an sb3-* algorithm for other Gymnasium envs"
        )
    if config["shaping"] not in SHAPINGS:
        raise ValueError(
            f"unknown shaping {config['shaping']!r}; choose from {', '.join(SHAPINGS)} "
            "(builtin: the env's potential from shaping.potentials)"
        )
    unknown = [name for name in config["intrinsic"] if name not in intrinsic.registered()]
    if unknown:
        raise ValueError(
            f"unknown intrinsic reward(s) {unknown}; choose from {', '.join(intrinsic.registered())}"
        )
    if config["fusion"] not in FUSIONS:
        raise ValueError(f"unknown fusion {config['fusion']!r}; choose from {', '.join(FUSIONS)}")
    if not isinstance(config["steps"], int) or config["steps"] < 1:
        raise ValueError(f"steps={config['steps']!r} must be a positive integer")
    if not config["seeds"]:
        raise ValueError("no seeds given: pass --seed S or --seeds 0,1,2")
    if config["reward_program"]:
        if config["algo"] != "ppo":
            raise ValueError("--reward-program trains rewardlab's PPO on the batched env: use --algo ppo")
        from llm_reward import load_reward

        load_reward(config["reward_program"], config["env"])  # the checks, before any training


def run_dir_for(logdir: Path, seed: int) -> Path:
    return logdir / f"seed_{seed}"


def train_seed(config: dict[str, Any], seed: int, run_dir: Path, resume: bool, progress: bool) -> dict:
    """Train one seed in ``run_dir``; returns the metrics written to ``metrics.json``."""
    run_config = {**config, "seed": seed}
    run_config.pop("seeds")
    prepare_run_dir(run_dir, run_config, resume)
    if config["algo"] == "ppo":
        trainer = OwnPPOTrainer(run_config, run_dir)
    elif config["algo"] == "hra":
        trainer = HRATrainer(run_config, run_dir)
    else:
        from agents.sb3 import SB3Trainer

        trainer = SB3Trainer(run_config, run_dir)
    done_before = trainer.load_checkpoint() if resume else 0
    remaining = config["steps"] - done_before
    started = time.perf_counter()
    status = "complete"
    bar = ProgressBar(config["steps"], done_before, f"seed {seed}") if progress else None
    try:
        if remaining > 0:
            trainer.learn(remaining, resumed=done_before > 0, bar=bar)
    except KeyboardInterrupt:
        status = "interrupted"
    finally:
        if bar is not None:
            bar.close()
    trainer.save_checkpoint()
    trainer.save_final()
    metrics = {
        "status": status,
        "env": config["env"],
        "algo": config["algo"],
        "seed": seed,
        "num_timesteps": trainer.num_timesteps,
        "wall_time_s": time.perf_counter() - started,
    }
    if status == "complete":
        returns = trainer.evaluate(config["eval_episodes"], seed=10_000 + seed)
        metrics |= {
            "eval_return_mean": float(np.mean(returns)),
            "eval_return_std": float(np.std(returns)),
            "eval_episodes": len(returns),
        }
    write_json(run_dir / "metrics.json", metrics)
    if status == "interrupted":
        raise KeyboardInterrupt
    return metrics


def prepare_run_dir(run_dir: Path, run_config: dict[str, Any], resume: bool) -> None:
    """Create the run directory, or check that the one there holds this same run."""
    config_path = run_dir / "config.json"
    if config_path.exists():
        saved = json.loads(config_path.read_text())
        if saved != json.loads(json.dumps(run_config)):
            changed = sorted(k for k in set(saved) | set(run_config) if saved.get(k) != run_config.get(k))
            raise ValueError(
                f"{run_dir} holds a different run (it differs in {changed}); use another --logdir"
            )
        if not resume and (run_dir / "metrics.json").exists():
            raise ValueError(
                f"{run_dir} already holds a finished or started run; pass --resume to continue "
                "it or use another --logdir"
            )
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(config_path, run_config)


def write_json(path: Path, data: dict) -> None:
    """Write ``data`` atomically: a reader sees the old file or the new one, never half."""
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(temporary, path)


class ProgressBar:
    """A tqdm bar over env steps showing steps/s and the latest mean episode return."""

    def __init__(self, total: int, initial: int, label: str):
        from tqdm.auto import tqdm

        self._bar = tqdm(total=total, initial=initial, desc=label, unit="step", unit_scale=True)

    def update(self, num_timesteps: int, episode_return: float | None) -> None:
        self._bar.update(max(num_timesteps - self._bar.n, 0))
        if episode_return is not None:
            self._bar.set_postfix(ep_rew_mean=f"{episode_return:.1f}", refresh=False)

    def close(self) -> None:
        self._bar.close()


def checkpoint_interval(config: dict[str, Any]) -> int:
    return config["checkpoint_every"] or max(config["steps"] // 10, 1)


class Trainer:
    """What every learner behind ``rewardlab train`` shares: a model that saves itself.

    A subclass builds ``self.model`` and ``self.run_dir`` and names its files.
    """

    model_file: str
    checkpoint_file: str
    model: Any
    run_dir: Path

    @property
    def num_timesteps(self) -> int:
        return self.model.num_timesteps

    def save_checkpoint(self) -> None:
        save_atomically(self.model.save, self.run_dir / self.checkpoint_file)

    def save_final(self) -> None:
        save_atomically(self.model.save, self.run_dir / self.model_file)


class OwnPPOTrainer(Trainer):
    """Trains rewardlab's PPO on a batched env, with shaping and intrinsic rewards."""

    model_file = "model.pt"
    checkpoint_file = "checkpoint.pt"

    def __init__(self, config: dict[str, Any], run_dir: Path):
        import torch

        import envs
        from agents.ppo import PPO
        from shaping import BatchedPotentialShaping, potentials

        self.config, self.run_dir = config, run_dir
        torch.manual_seed(config["seed"])
        num_envs = config["num_envs"] or 16
        env = envs.make(config["env"], num_envs=num_envs, device=config["device"], seed=config["seed"])
        if config["reward_program"]:
            from llm_reward import load_reward

            env = load_reward(config["reward_program"], config["env"]).wrap(env)
        hyperparameters = dict(config["hyperparameters"])
        gamma = hyperparameters.get("gamma", 0.99)
        if config["shaping"] == "builtin":
            env = BatchedPotentialShaping(
                env, potentials.for_env(config["env"]), gamma=gamma, scale=config["shaping_scale"]
            )
        self.intrinsic = make_intrinsic(config, env, num_envs)
        self.env = env
        self.model = PPO(
            env, seed=config["seed"], intrinsic=self.intrinsic,
            tensorboard_log=str(run_dir / "tb"), **hyperparameters,
        )  # fmt: skip

    def learn(self, steps: int, resumed: bool, bar: ProgressBar | None) -> None:
        every = checkpoint_interval(self.config)
        next_checkpoint = [self.model.num_timesteps + every]

        def callback(local: dict[str, Any]) -> None:
            model = local["self"]
            if bar is not None:
                ep = [e["r"] for e in model.ep_info_buffer]
                bar.update(model.num_timesteps, float(np.mean(ep)) if ep else None)
            if model.num_timesteps >= next_checkpoint[0]:
                self.save_checkpoint()
                next_checkpoint[0] = model.num_timesteps + every

        self.model.learn(
            steps, callback=callback, tb_log_name="run", reset_num_timesteps=not resumed
        )

    def load_checkpoint(self) -> int:
        from agents.ppo import PPO

        path = self.run_dir / self.checkpoint_file
        if not path.exists():
            return 0
        self.model = PPO.load(path, env=self.env, intrinsic=self.intrinsic)
        self.model.tensorboard_log = str(self.run_dir / "tb")
        return self.model.num_timesteps

    def evaluate(self, episodes: int, seed: int) -> list[float]:
        from agents.evaluation import evaluate_batched

        return evaluate_batched(self.model, self.config["env"], episodes, seed, self.config["device"])


class HRATrainer(OwnPPOTrainer):
    """Trains rewardlab's HRA on a batched env, with one head per reward component (shaping
    adds its own head); the same run directory, checkpoints and evaluation as our PPO."""

    def __init__(self, config: dict[str, Any], run_dir: Path):
        import torch

        import envs
        from agents.hra import HRA
        from shaping import BatchedPotentialShaping, potentials

        if config["intrinsic"]:
            raise ValueError("--algo hra takes no --intrinsic rewards; use --algo ppo for those")
        self.config, self.run_dir = config, run_dir
        torch.manual_seed(config["seed"])
        num_envs = config["num_envs"] or 16
        env = envs.make(config["env"], num_envs=num_envs, device=config["device"], seed=config["seed"])
        hyperparameters = dict(config["hyperparameters"])
        if config["shaping"] == "builtin":
            env = BatchedPotentialShaping(
                env, potentials.for_env(config["env"]), gamma=hyperparameters.get("gamma", 0.99),
                scale=config["shaping_scale"],
            )  # fmt: skip
        self.env = env
        self.model = HRA(
            env, seed=config["seed"], tensorboard_log=str(run_dir / "tb"), **hyperparameters
        )

    def load_checkpoint(self) -> int:
        from agents.hra import HRA

        path = self.run_dir / self.checkpoint_file
        if not path.exists():
            return 0
        self.model = HRA.load(path, env=self.env)
        self.model.tensorboard_log = str(self.run_dir / "tb")
        return self.model.num_timesteps


def make_intrinsic(config: dict[str, Any], env: Any, num_envs: int) -> Any:
    """The configured intrinsic module (several fused), or None."""
    if not config["intrinsic"]:
        return None
    import intrinsic

    observation_space = getattr(env, "single_observation_space", None) or env.observation_space
    action_space = getattr(env, "single_action_space", None) or env.action_space
    return intrinsic.make(
        config["intrinsic"], observation_space, action_space, fusion=config["fusion"],
        num_envs=num_envs, seed=config["seed"], device=config["device"],
    )  # fmt: skip


def save_atomically(save: Callable[[str], None], path: Path) -> None:
    """Save through ``save`` to a temporary file, then move it over ``path``."""
    temporary = path.with_name("tmp_" + path.name)
    save(str(temporary))
    os.replace(temporary, path)


def run_train(args: argparse.Namespace) -> int:
    config = resolve_config(args)
    logdir = Path(args.logdir)
    results = []
    for seed in config["seeds"]:
        run_dir = run_dir_for(logdir, seed)
        try:
            metrics = train_seed(config, seed, run_dir, args.resume, progress=not args.no_progress)
        except KeyboardInterrupt:
            print(f"\ninterrupted: what was logged and a checkpoint are in {run_dir}; "
                  "continue with the same command and --resume")
            return 130
        results.append(metrics)
        print(
            f"seed {seed}: {metrics['num_timesteps']} steps in {metrics['wall_time_s']:.1f} s, "
            f"true eval return {metrics.get('eval_return_mean', float('nan')):.2f}"
        )
    print(f"runs in {logdir}; compare with: rewardlab compare {logdir} --out {logdir}/compare")
    print(f"TensorBoard: tensorboard --logdir {logdir}")
    return 0


def register_train(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train", help="train an agent, with or without shaping and intrinsic rewards",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--env", help="env id, e.g. CartPole-v1")
    parser.add_argument("--algo", help=f"one of {', '.join(ALGOS)} (default ppo)")
    parser.add_argument("--steps", type=int, help="env steps per seed (default 100000)")
    parser.add_argument("--seed", type=int, help="one seed")
    parser.add_argument("--seeds", type=_int_list, help="several seeds, e.g. 0,1,2")
    parser.add_argument("--shaping", help="none or builtin (the env's built-in potential)")
    parser.add_argument("--shaping-scale", dest="shaping_scale", type=float)
    parser.add_argument("--intrinsic", type=_name_list, help="e.g. rnd or rnd,count")
    parser.add_argument("--fusion", help=f"how several intrinsic rewards fuse: {', '.join(FUSIONS)}")
    parser.add_argument("--intrinsic-coef", dest="intrinsic_coef", type=float)
    parser.add_argument("--num-envs", dest="num_envs", type=int)
    parser.add_argument("--device", help="cpu or cuda (our PPO)")
    parser.add_argument("--reward-program", dest="reward_program",
                        help="train on a reward program file (e.g. a search's best_reward.py; --algo ppo)")
    parser.add_argument("--config", help="a JSON/TOML file with these settings (flags win)")
    parser.add_argument("--logdir", required=True, help="parent folder of the run directories")
    parser.add_argument("--resume", action="store_true", help="continue runs from their checkpoints")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run_train)


def _int_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from error


def _name_list(text: str) -> list[str]:
    return [part.strip().lower() for part in text.split(",") if part.strip()]
