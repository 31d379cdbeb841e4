"""Stable-Baselines3 glue: vec envs with shaping and intrinsic rewards in the right order,
a callback that logs every reward component, and the SB3 algorithms by ``rewardlab train`` name.

Order, innermost first: ``Monitor`` (so ``rollout/ep_rew_mean`` is the true return),
then the shaping wrapper, then the off-policy intrinsic wrapper, then ``VecNormalize``
if asked for (so replay buffers store the shaped reward). On-policy intrinsic rewards
enter through :class:`rewardlab.agents.sb3_intrinsic.IntrinsicRewardCallback` instead, which
recomputes returns and advantages over the combined reward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from stable_baselines3 import A2C, DQN, PPO, SAC
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from rewardlab.shaping import VecPotentialShaping

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
    env_kwargs: dict[str, Any] | None = None,
) -> VecEnv:
    """An SB3 vec env for ``env_id`` with shaping and an off-policy intrinsic bonus in order.

    ``env_id`` is a Gymnasium id (MiniGrid ids with the agent's view flattened, ``Dict``
    observations flattened, ``"module:Env-v0"`` for a user's own env), or one of rewardlab's
    batched envs that Gymnasium lacks (``rewardlab.envs.registered()``), served through its
    SB3 adapter.

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
    :param env_kwargs: passed to every env's constructor (``gymnasium.make(env_id, **env_kwargs)``).
    :raises ValueError: the env cannot be made, naming the id, the arguments and the error.
    """
    import gymnasium as gym

    from rewardlab import envs
    from rewardlab.envs.adapters import SB3VecEnv
    from rewardlab.envs.gymnasium_env import make_one

    env_kwargs = dict(env_kwargs or {})
    if env_id in envs.registered() and env_id not in gym.registry:
        venv: VecEnv = SB3VecEnv(envs.make(env_id, num_envs=n_envs, seed=seed, **env_kwargs))
    else:
        envs.check_id(env_id)  # imports a "module:Env-v0" id's module, minigrid for MiniGrid ids
        venv = make_vec_env(lambda: make_one(env_id, env_kwargs), n_envs=n_envs, seed=seed)
    if potential is not None:
        venv = VecPotentialShaping(venv, potential, gamma=gamma, scale=shaping_scale)
    if intrinsic_module is not None:
        from rewardlab.agents.sb3_intrinsic import IntrinsicRewardVecEnv

        venv = IntrinsicRewardVecEnv(venv, intrinsic_module, coef=intrinsic_coef)
    if normalize:
        venv = VecNormalize(venv, gamma=gamma)
    return venv


class RewardComponentCallback(BaseCallback):
    """Logs every ``infos[i]["reward_components"]`` entry, for on- and off-policy algorithms.

    ``reward/<name>``: the mean per step since the last dump; ``episode/<name>``: the
    mean over episodes finished since the last dump of each episode's sum. ``extrinsic``
    is always logged: a step whose env reports no components (no rewardlab wrapper changed
    its reward) has the env's own reward as its one component (before ``VecNormalize``).

    Example::

        model.learn(100_000, callback=RewardComponentCallback())
    """

    def __init__(self, verbose: int = 0):
        super().__init__(verbose)
        self._episode_sums: dict[str, np.ndarray] = {}

    def _env_rewards(self) -> np.ndarray:
        """The env's own rewards of this step: ``VecNormalize``'s original ones where it scales them."""
        normalize = self.model.get_vec_normalize_env()
        if normalize is not None:
            return np.asarray(normalize.get_original_reward(), dtype=np.float64)
        return np.asarray(self.locals["rewards"], dtype=np.float64)

    def _on_step(self) -> bool:
        infos = self.locals["infos"]
        dones = np.asarray(self.locals["dones"], dtype=bool)
        components = [
            info.get("reward_components") or {"extrinsic": reward}
            for info, reward in zip(infos, self._env_rewards().reshape(len(infos)).tolist(), strict=True)
        ]
        names = {name for step in components for name in step}
        for name in names:
            values = np.array([step.get(name, 0.0) for step in components])
            self.logger.record_mean(f"reward/{name}", float(values.mean()))
            sums = self._episode_sums.setdefault(name, np.zeros(len(infos)))
            sums += values
            for i in np.flatnonzero(dones):
                self.logger.record_mean(f"episode/{name}", float(sums[i]))
            sums[dones] = 0.0
        return True




def sb3_algorithm(name: str) -> type:
    return {"sb3-ppo": PPO, "sb3-a2c": A2C, "sb3-dqn": DQN, "sb3-sac": SAC}[name]


