"""The learners behind ``rewardlab train``: each builds its env stack and model from a run's config.

:class:`OwnPPOTrainer` and :class:`HRATrainer` train our agents on a batched env;
:class:`rewardlab.app.sb3_trainer.SB3Trainer` trains an SB3 algorithm. All save checkpoints into the run directory and evaluate on the true reward.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rewardlab.app.rundirs import save_atomically

# the SB3 algorithms whose intrinsic bonus enters after the rollout (see SB3Trainer)
ON_POLICY = ("sb3-ppo", "sb3-a2c")


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

        from rewardlab import envs
        from rewardlab.agents.ppo import PPO
        from rewardlab.shaping import BatchedPotentialShaping, potentials

        self.config, self.run_dir = config, run_dir
        torch.manual_seed(config["seed"])
        num_envs = config["num_envs"] or 16
        env = envs.make(config["env"], num_envs=num_envs, device=config["device"], seed=config["seed"])
        if config["reward_program"]:
            from rewardlab.llm_reward import load_reward

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
        from rewardlab.agents.ppo import PPO

        path = self.run_dir / self.checkpoint_file
        if not path.exists():
            return 0
        self.model = PPO.load(path, env=self.env, intrinsic=self.intrinsic)
        self.model.tensorboard_log = str(self.run_dir / "tb")
        return self.model.num_timesteps

    def evaluate(self, episodes: int, seed: int) -> list[float]:
        from rewardlab.agents.evaluation import evaluate_batched

        return evaluate_batched(self.model, self.config["env"], episodes, seed, self.config["device"])


class HRATrainer(OwnPPOTrainer):
    """Trains rewardlab's HRA on a batched env, with one head per reward component (shaping
    adds its own head); the same run directory, checkpoints and evaluation as our PPO."""

    def __init__(self, config: dict[str, Any], run_dir: Path):
        import torch

        from rewardlab import envs
        from rewardlab.agents.hra import HRA
        from rewardlab.shaping import BatchedPotentialShaping, potentials

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
        from rewardlab.agents.hra import HRA

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
    from rewardlab import intrinsic

    observation_space = getattr(env, "single_observation_space", None) or env.observation_space
    action_space = getattr(env, "single_action_space", None) or env.action_space
    return intrinsic.make(
        config["intrinsic"], observation_space, action_space, fusion=config["fusion"],
        num_envs=num_envs, seed=config["seed"], device=config["device"],
    )  # fmt: skip
