"""Stable-Baselines3 glue: vec envs with shaping and intrinsic rewards in the right order,
a callback that logs every reward component, and the SB3 side of ``rewardlab train``.

Order, innermost first: ``Monitor`` (so ``rollout/ep_rew_mean`` is the true return),
then the shaping wrapper, then the off-policy intrinsic wrapper, then ``VecNormalize``
if asked for (so replay buffers store the shaped reward). On-policy intrinsic rewards
enter through :class:`agents.sb3_intrinsic.IntrinsicRewardCallback` instead, which
recomputes returns and advantages over the combined reward.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3 import A2C, DQN, PPO, SAC
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from agents.train import (
    ON_POLICY,
    ProgressBar,
    Trainer,
    checkpoint_interval,
    make_intrinsic,
)
from shaping import VecPotentialShaping

Potential = Callable[[np.ndarray], np.ndarray]


def make_sb3_env(
    env_id: str,
    n_envs: int = 8,
    seed: int | None = None,
    potential: Potential | None = None,
    gamma: float = 0.99,
    shaping_scale: float = 1.0,
    intrinsic_module: Any = None,
    intrinsic_coef: float = 1.0,
    normalize: bool = False,
) -> VecEnv:
    """An SB3 vec env for ``env_id`` with shaping and an off-policy intrinsic bonus in order.

    ``env_id`` is a Gymnasium id, or one of rewardlab's batched envs (``envs.registered()``),
    which is then served through its SB3 adapter.

    :param env_id: the environment.
    :param n_envs: parallel envs.
    :param seed: seeds the envs.
    :param potential: a shaping potential ``phi(obs_batch) -> (N,)``, or None for no shaping.
    :param gamma: the learner's discount, used by the shaping.
    :param shaping_scale: multiplies the shaping term.
    :param intrinsic_module: an intrinsic module whose bonus is added as transitions are
        collected (for off-policy algorithms), or None.
    :param intrinsic_coef: the bonus's weight.
    :param normalize: wrap the result in ``VecNormalize`` (observations and rewards).
    """
    import gymnasium as gym

    if env_id in gym.registry:
        venv: VecEnv = make_vec_env(env_id, n_envs=n_envs, seed=seed)
    else:
        import envs

        if env_id not in envs.registered():
            known = sorted(set(envs.registered()) | {"any Gymnasium id"})
            raise ValueError(f"unknown env {env_id!r}; known: {', '.join(known)}")
        venv = envs.make(env_id, num_envs=n_envs, seed=seed).to_sb3()
    if potential is not None:
        venv = VecPotentialShaping(venv, potential, gamma=gamma, scale=shaping_scale)
    if intrinsic_module is not None:
        from agents.sb3_intrinsic import IntrinsicRewardVecEnv

        venv = IntrinsicRewardVecEnv(venv, intrinsic_module, coef=intrinsic_coef)
    if normalize:
        venv = VecNormalize(venv, gamma=gamma)
    return venv


class RewardComponentCallback(BaseCallback):
    """Logs every ``infos[i]["reward_components"]`` entry, for on- and off-policy algorithms.

    ``reward/<name>``: the mean per step since the last dump; ``episode/<name>``: the
    mean over episodes finished since the last dump of each episode's sum.

    Example::

        model.learn(100_000, callback=RewardComponentCallback())
    """

    def __init__(self, verbose: int = 0):
        super().__init__(verbose)
        self._episode_sums: dict[str, np.ndarray] = {}

    def _on_step(self) -> bool:
        infos = self.locals["infos"]
        dones = np.asarray(self.locals["dones"], dtype=bool)
        names = {name for info in infos for name in info.get("reward_components", {})}
        for name in names:
            values = np.array([info.get("reward_components", {}).get(name, 0.0) for info in infos])
            self.logger.record_mean(f"reward/{name}", float(values.mean()))
            sums = self._episode_sums.setdefault(name, np.zeros(len(infos)))
            sums += values
            for i in np.flatnonzero(dones):
                self.logger.record_mean(f"episode/{name}", float(sums[i]))
            sums[dones] = 0.0
        return True


class SB3Trainer(Trainer):
    """Trains an SB3 algorithm, with shaping and intrinsic rewards in the right order."""

    model_file = "model.zip"
    checkpoint_file = "checkpoint.zip"

    def __init__(self, config: dict[str, Any], run_dir: Path):
        import torch

        from shaping import potentials

        self.config, self.run_dir = config, run_dir
        torch.set_num_threads(1)
        algo_name = config["algo"]
        self.algorithm = sb3_algorithm(algo_name)
        hyperparameters = dict(config["hyperparameters"])
        gamma = hyperparameters.setdefault("gamma", 0.99)
        num_envs = config["num_envs"] or (8 if algo_name in ON_POLICY else 1)
        potential = potentials.for_env(config["env"]) if config["shaping"] == "builtin" else None
        probe = make_sb3_env(config["env"], n_envs=1)
        module = None
        if config["intrinsic"]:
            module = make_intrinsic(config, probe, num_envs)
        probe.close()
        off_policy_module = module if algo_name not in ON_POLICY else None
        self.venv = make_sb3_env(
            config["env"], n_envs=num_envs, seed=config["seed"], potential=potential, gamma=gamma,
            shaping_scale=config["shaping_scale"], intrinsic_module=off_policy_module,
            intrinsic_coef=config["intrinsic_coef"],
        )  # fmt: skip
        self.on_policy_module = module if algo_name in ON_POLICY else None
        self.model = self.algorithm(
            "MlpPolicy", self.venv, seed=config["seed"], device=config["device"],
            tensorboard_log=str(run_dir / "tb"), **hyperparameters,
        )  # fmt: skip

    def learn(self, steps: int, resumed: bool, bar: ProgressBar | None) -> None:
        callbacks = [RewardComponentCallback(), PeriodicCallback(self, checkpoint_interval(self.config), bar)]
        if self.on_policy_module is not None:
            from agents.sb3_intrinsic import IntrinsicRewardCallback

            callbacks.append(IntrinsicRewardCallback(self.on_policy_module, coef=self.config["intrinsic_coef"]))
        self.model.learn(
            steps, callback=CallbackList(callbacks), tb_log_name="run",
            reset_num_timesteps=not resumed,
        )  # fmt: skip

    def load_checkpoint(self) -> int:
        path = self.run_dir / self.checkpoint_file
        if not path.exists():
            return 0
        self.model = self.algorithm.load(
            path, env=self.venv, device=self.config["device"], tensorboard_log=str(self.run_dir / "tb")
        )
        return self.model.num_timesteps

    def evaluate(self, episodes: int, seed: int) -> list[float]:
        returns, _ = evaluate_policy(
            self.model, make_sb3_env(self.config["env"], n_envs=1, seed=seed),
            n_eval_episodes=episodes, deterministic=True, return_episode_rewards=True,
        )  # fmt: skip
        return [float(r) for r in returns]


def sb3_algorithm(name: str) -> type:
    return {"sb3-ppo": PPO, "sb3-a2c": A2C, "sb3-dqn": DQN, "sb3-sac": SAC}[name]


class PeriodicCallback(BaseCallback):
    """Updates the progress bar and saves a checkpoint every ``every`` env steps."""

    def __init__(self, trainer: SB3Trainer, every: int, bar: ProgressBar | None):
        super().__init__()
        self.trainer, self.every, self.bar = trainer, every, bar
        self.next_checkpoint = trainer.model.num_timesteps + every

    def _on_step(self) -> bool:
        if self.bar is not None and self.n_calls % 64 == 0:
            episodes = [e["r"] for e in self.model.ep_info_buffer]
            self.bar.update(self.model.num_timesteps, float(np.mean(episodes)) if episodes else None)
        if self.model.num_timesteps >= self.next_checkpoint:
            self.trainer.save_checkpoint()
            self.next_checkpoint = self.model.num_timesteps + self.every
        return True
