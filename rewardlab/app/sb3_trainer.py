"""The SB3 learner behind ``rewardlab train --algo sb3-*``.

In a module of its own because importing stable_baselines3 takes a while: ``rewardlab
train --algo ppo`` never pays for it.
"""

from __future__ import annotations

import inspect
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.evaluation import evaluate_policy

from rewardlab.agents.evaluation import Episodes
from rewardlab.agents.sb3 import RewardComponentCallback, make_sb3_env, sb3_algorithm
from rewardlab.app.trainers import (
    ON_POLICY,
    ProgressBar,
    Trainer,
    checkpoint_interval,
    make_intrinsic,
    num_envs_for,
    potential_for,
)

# the constructor arguments SB3Trainer gives itself; a config's hyperparameters are the others
SET_BY_TRAINER = ("self", "policy", "env", "seed", "device", "tensorboard_log", "_init_setup_model")


def hyperparameter_names(algo_name: str) -> tuple[str, type]:
    """The hyperparameters ``--algo algo_name`` takes (its SB3 constructor's), and the class."""
    algorithm = sb3_algorithm(algo_name)
    names = [name for name in inspect.signature(algorithm.__init__).parameters if name not in SET_BY_TRAINER]
    return tuple(names), algorithm


# the action spaces each SB3 algorithm takes (its supported_action_spaces)
ACTION_SPACES: dict[str, tuple[type[spaces.Space], ...]] = {
    "sb3-ppo": (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary),
    "sb3-a2c": (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary),
    "sb3-dqn": (spaces.Discrete,),
    "sb3-sac": (spaces.Box,),
}


def check_action_space(algo_name: str, env_id: str, action_space: spaces.Space) -> None:
    """Raise ``ValueError`` when ``--algo algo_name`` cannot act in ``action_space``, naming
    the algorithms that can (SB3 asserts it with a traceback, after the run directory is made).
    """
    if not isinstance(action_space, ACTION_SPACES[algo_name]):
        able = [name for name, kinds in ACTION_SPACES.items() if isinstance(action_space, kinds)]
        names = ", ".join(kind.__name__ for kind in ACTION_SPACES[algo_name])
        raise ValueError(
            f"--algo {algo_name} takes {names} actions, and {env_id}'s action space is {action_space}; "
            f"use --algo {' or '.join(able) if able else 'ppo'}"
        )


class SB3Trainer(Trainer):
    """Trains an SB3 algorithm, with shaping and intrinsic rewards in the right order."""

    model_file = "model.zip"
    checkpoint_file = "checkpoint.zip"

    def __init__(self, config: dict[str, Any], run_dir: Path):
        import torch

        self.config, self.run_dir = config, run_dir
        torch.set_num_threads(1)
        algo_name = config["algo"]
        self.algorithm = sb3_algorithm(algo_name)
        hyperparameters = dict(config["hyperparameters"])
        # the algorithm's own discount unless set: shaping telescopes at it alone
        gamma = hyperparameters.get("gamma", inspect.signature(self.algorithm).parameters["gamma"].default)
        num_envs = num_envs_for(config, 8 if algo_name in ON_POLICY else 1)
        potential = potential_for(config)
        on_policy = algo_name in ON_POLICY
        off_policy_module = None
        if config["intrinsic"] and not on_policy:
            # its wrapper sits in the vec env, below the image transposition SB3 adds: it reads
            # observations as the env makes them
            probe = make_sb3_env(config["env"], n_envs=1, env_kwargs=config["env_kwargs"])
            off_policy_module = make_intrinsic(config, probe, num_envs)
            probe.close()
        self.venv = make_sb3_env(
            config["env"], n_envs=num_envs, seed=config["seed"], potential=potential, gamma=gamma,
            shaping_scale=config["shaping_scale"], intrinsic_module=off_policy_module,
            intrinsic_coef=config["intrinsic_coef"], env_kwargs=config["env_kwargs"],
        )  # fmt: skip
        self.model = self.algorithm(
            "MlpPolicy", self.venv, seed=config["seed"], device=config["device"],
            tensorboard_log=str(run_dir / "tb"), **hyperparameters,
        )  # fmt: skip
        # the callback reads the rollout buffer, which holds observations as the policy sees
        # them: channel-last images transposed by SB3 (VecTransposeImage), so the model's spaces
        self.on_policy_module = (
            make_intrinsic(config, self.model, num_envs) if config["intrinsic"] and on_policy else None
        )

    def learn(self, steps: int, resumed: bool, bar: ProgressBar | None) -> None:
        callbacks = [RewardComponentCallback(), PeriodicCallback(self, checkpoint_interval(self.config), bar)]
        if self.on_policy_module is not None:
            from rewardlab.agents.sb3_intrinsic import IntrinsicRewardCallback

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
            path, env=self.venv, device=self.config["device"], tensorboard_log=str(self.run_dir / "tb"),
            custom_objects=self._own_objects(path),
        )
        return self.model.num_timesteps

    def _own_objects(self, path: Path) -> dict[str, Any]:
        """This run's own objects for every entry that an SB3 save pickles (its spaces, policy
        class and schedules, which the config makes again; its last observations and episode
        buffers, which SB3 starts afresh when they are None): unpickling them would run whatever
        code the file names, and a run folder may come from anywhere.

        :param path: the checkpoint.
        :raises ValueError: it is not an SB3 save, naming it.
        """
        try:
            with zipfile.ZipFile(path) as archive:
                data = json.loads(archive.read("data"))
        except (OSError, KeyError, ValueError, RecursionError, zipfile.BadZipFile) as error:
            raise ValueError(f"{path} is not an SB3 checkpoint ({error}); use another --logdir") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path} is not an SB3 checkpoint (its data is no JSON object); use another --logdir")
        return {key: getattr(self.model, key, None) for key, value in data.items()
                if isinstance(value, dict) and ":serialized:" in value}

    def evaluate(self, episodes: int, seed: int, deterministic: bool) -> Episodes:
        returns, _ = evaluate_policy(
            self.model, make_sb3_env(self.config["env"], n_envs=1, seed=seed, env_kwargs=self.config["env_kwargs"]),
            n_eval_episodes=episodes, deterministic=deterministic, return_episode_rewards=True,
        )  # fmt: skip
        return Episodes([float(r) for r in returns])


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

