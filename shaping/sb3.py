"""Potential-based shaping for Stable-Baselines3 vector envs."""

from __future__ import annotations

import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from rewardlab.shaping.core import Potential, PotentialTracker
from rewardlab.shaping.wrappers import check_name, shaping_component, stack_final


class VecPotentialShaping(VecEnvWrapper):
    """Adds the potential-based shaping term to an SB3 ``VecEnv``'s rewards.

    SB3 vec envs reset inside ``step``: for an env that is done, the true last
    observation is ``infos[i]["terminal_observation"]`` and truncation is
    ``infos[i]["TimeLimit.truncated"]``; a truncated episode keeps ``phi`` of its
    last observation, a terminated one gets ``phi(s') = 0``.

    Put it after ``Monitor`` (so ``rollout/ep_rew_mean`` stays the true return)
    and inside ``VecNormalize`` (so replay buffers store the shaped reward):
    ``VecNormalize(VecPotentialShaping(make_vec_env(env_id), phi))``.

    Example:
        >>> from stable_baselines3.common.env_util import make_vec_env
        >>> from rewardlab.shaping import VecPotentialShaping, potentials
        >>> venv = VecPotentialShaping(make_vec_env("CartPole-v1", n_envs=4),
        ...                            potentials.for_env("CartPole-v1"))
        >>> obs = venv.reset()
        >>> obs, rewards, dones, infos = venv.step(np.zeros(4, dtype=int))
        >>> sorted(infos[0]["reward_components"])
        ['extrinsic', 'shaping']

    :param venv: the SB3 vec env to wrap.
    :param potential: ``phi(obs_batch) -> (N,)`` on numpy batches.
    :param gamma: the learner's discount factor, in (0, 1].
    :param scale: multiplies the shaping term.
    :param name: the component name under ``infos[i]["reward_components"]``.
    """

    def __init__(
        self,
        venv: VecEnv,
        potential: Potential,
        gamma: float = 0.99,
        scale: float = 1.0,
        name: str = "shaping",
    ):
        super().__init__(venv)
        self.tracker = PotentialTracker(potential, gamma, scale)
        self.name = check_name(name)

    def reset(self):
        obs = self.venv.reset()
        self.tracker.reset(obs)
        return obs

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        dones = np.asarray(dones, dtype=bool)
        terminated = dones.copy()
        final_obs = None
        if dones.any():
            for i in np.flatnonzero(dones):
                terminated[i] = not infos[i].get("TimeLimit.truncated", False)
            final_obs = stack_final(obs, dones, [info.get("terminal_observation") for info in infos])
        shaping = self.tracker.step(obs, terminated, ended=dones, final_obs=final_obs)
        for info, reward, term in zip(infos, rewards.tolist(), shaping.tolist(), strict=True):
            info["reward_components"] = shaping_component(
                info.get("reward_components"), reward, self.name, term
            )
        return obs, (rewards + shaping).astype(np.float32), dones, infos
