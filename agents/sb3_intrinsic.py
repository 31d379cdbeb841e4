"""Intrinsic rewards for Stable-Baselines3: on-policy by a callback, off-policy by a VecEnv wrapper.

On-policy (PPO, A2C): :class:`IntrinsicRewardCallback`. At the end of each rollout it scores
the whole rollout in one batch, adds ``coef * bonus`` to the rollout buffer's rewards and
recomputes the returns and advantages with GAE over the combined reward, so that the critic
learns the value of the reward the policy is trained on. (RLeXplore adds the bonus to the
advantages after GAE instead: the returns, and so the value targets, never see it.) Episode
ends are respected: the bonus of a step that ended an episode is computed on
``infos[i]["terminal_observation"]``, never on the reset observation, and GAE stops at
episode starts, as SB3's does. SB3's critic has one head, so the intrinsic return here is
episodic; our own ``rewardlab.agents.PPO`` has RND's separate non-episodic intrinsic head.

Off-policy (DQN, SAC, TD3): :class:`IntrinsicRewardVecEnv`. A replay buffer stores the reward
a transition had when it was collected, so the bonus is added at that moment, by a VecEnv
wrapper; the module trains every ``update_every`` steps on the transitions collected since.
The wrapper sits outside ``Monitor`` (``rollout/ep_rew_mean`` stays the true return) and
inside ``VecNormalize`` (whose original reward is what off-policy algorithms store).
Stored bonuses go stale as the module learns, as in every off-policy use of novelty bonuses.

Both report ``reward/intrinsic/<name>`` (mean per step); the wrapper also puts
``infos[i]["reward_components"]["intrinsic/<name>"]``, which :class:`rewardlab.agents.sb3.RewardComponentCallback`
logs as ``reward/<component>``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from rewardlab.common.components import with_components
from rewardlab.intrinsic import Hybrid, IntrinsicModule
from rewardlab.shaping.wrappers import stack_final


def _check(module: IntrinsicModule, coef: float) -> None:
    if not isinstance(module, IntrinsicModule):
        raise TypeError(f"module must be a rewardlab.intrinsic.IntrinsicModule, got {type(module).__name__}")
    if not np.isfinite(coef):
        raise ValueError(f"coef must be a finite number, got {coef!r}")


def _true_next_obs(new_obs: np.ndarray, dones: np.ndarray, infos: list[dict]) -> np.ndarray:
    """``new_obs`` with each finished env's row replaced by its ``terminal_observation``."""
    if not dones.any():
        return np.array(new_obs, copy=True)
    missing = [i for i in np.flatnonzero(dones) if infos[i].get("terminal_observation") is None]
    if missing:
        raise ValueError(
            f"envs {missing} ended an episode without infos[i]['terminal_observation']; use an "
            "SB3 VecEnv (DummyVecEnv, SubprocVecEnv), which records the true last observation"
        )
    return stack_final(new_obs, dones, [info.get("terminal_observation") for info in infos])


def _batch_actions(actions: np.ndarray, space: spaces.Space) -> np.ndarray:
    """Actions ``(N, ...)`` shaped as the module reads them: ``(N,)`` for ``Discrete``."""
    if isinstance(space, spaces.Discrete):
        return actions.reshape(len(actions))
    return actions.reshape(len(actions), *space.shape)


class IntrinsicRewardCallback(BaseCallback):
    """Adds an intrinsic bonus to an on-policy SB3 algorithm's rewards, returns and advantages.

    Example::

        >>> from stable_baselines3 import PPO
        >>> from stable_baselines3.common.env_util import make_vec_env
        >>> from rewardlab import intrinsic
        >>> model = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2), n_steps=64)
        >>> rnd = intrinsic.RND(model.observation_space, seed=0)
        >>> model = model.learn(256, callback=IntrinsicRewardCallback(rnd, coef=0.1))

    :param module: the intrinsic module; its ``num_envs`` is set to the env's
    :param coef: the bonus's weight in the reward
    :param verbose: SB3's verbosity
    """

    def __init__(self, module: IntrinsicModule, coef: float = 1.0, verbose: int = 0) -> None:
        super().__init__(verbose)
        _check(module, coef)
        self.module = module
        self.coef = float(coef)
        self._next_obs: list[np.ndarray] = []
        self._dones: list[np.ndarray] = []
        self.intrinsic_rewards: np.ndarray | None = None

    def _init_callback(self) -> None:
        if not isinstance(self.model, OnPolicyAlgorithm):
            raise TypeError(
                f"IntrinsicRewardCallback works with on-policy algorithms (PPO, A2C), not "
                f"{type(self.model).__name__}; wrap the env in IntrinsicRewardVecEnv instead"
            )
        self.module.set_num_envs(self.training_env.num_envs)

    def _on_rollout_start(self) -> None:
        self._next_obs.clear()
        self._dones.clear()

    def _on_step(self) -> bool:
        dones = np.asarray(self.locals["dones"], dtype=bool)
        self._next_obs.append(_true_next_obs(self.locals["new_obs"], dones, self.locals["infos"]))
        self._dones.append(dones.copy())
        return True

    def _on_rollout_end(self) -> None:
        buffer = self.model.rollout_buffer
        steps, num_envs = buffer.buffer_size, buffer.n_envs
        rows = steps * num_envs
        obs = buffer.observations.reshape(rows, *buffer.obs_shape)
        actions = _batch_actions(buffer.actions.reshape(rows, -1), self.model.action_space)
        next_obs = np.stack(self._next_obs).reshape(obs.shape)
        dones = np.stack(self._dones).reshape(rows)
        bonus = self.module.compute(obs, actions, next_obs, dones=dones)
        self.module.update(obs, actions, next_obs)
        intrinsic_rewards = self.coef * bonus.detach().cpu().numpy().reshape(steps, num_envs)
        buffer.rewards += intrinsic_rewards
        buffer.compute_returns_and_advantage(
            last_values=self.locals["values"], dones=self.locals["dones"]
        )
        self.intrinsic_rewards = intrinsic_rewards
        self.logger.record(f"reward/intrinsic/{self.module.name}", float(intrinsic_rewards.mean()))
        if isinstance(self.module, Hybrid):
            for name, part in self.module.last_parts.items():
                self.logger.record(
                    f"reward/intrinsic/{self.module.name}/{name}", float(part.mean())
                )


class IntrinsicRewardVecEnv(VecEnvWrapper):
    """Adds an intrinsic bonus to an SB3 ``VecEnv``'s rewards as transitions are collected.

    Meant for off-policy algorithms, whose replay buffer then stores the combined reward.
    Put it outside ``Monitor`` and inside ``VecNormalize``.

    Example::

        >>> from stable_baselines3 import DQN
        >>> from stable_baselines3.common.env_util import make_vec_env
        >>> from rewardlab import intrinsic
        >>> venv = make_vec_env("CartPole-v1", n_envs=1)
        >>> count = intrinsic.Count(venv.observation_space, hash_bits=16, seed=0)
        >>> venv = IntrinsicRewardVecEnv(venv, count, coef=0.1)
        >>> model = DQN("MlpPolicy", venv, learning_starts=64).learn(256)

    :param venv: the vec env to wrap
    :param module: the intrinsic module; its ``num_envs`` is set to the env's
    :param coef: the bonus's weight in the reward
    :param update_every: train the module every this many steps (of all envs at once)
    """

    def __init__(
        self, venv: VecEnv, module: IntrinsicModule, coef: float = 1.0, update_every: int = 256
    ) -> None:
        super().__init__(venv)
        _check(module, coef)
        if not isinstance(update_every, int) or update_every < 1:
            raise ValueError(f"update_every must be a positive int, got {update_every!r}")
        module.set_num_envs(venv.num_envs)
        self.module = module
        self.coef = float(coef)
        self.update_every = update_every
        self.component = f"intrinsic/{module.name}"
        self._obs: np.ndarray | None = None
        self._actions: np.ndarray | None = None
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def reset(self) -> np.ndarray:
        self._obs = self.venv.reset()
        return self._obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.array(actions, copy=True)
        self.venv.step_async(actions)

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        if self._obs is None:
            raise RuntimeError("IntrinsicRewardVecEnv.step_wait was called before reset()")
        new_obs, rewards, dones, infos = self.venv.step_wait()
        dones = np.asarray(dones, dtype=bool)
        next_obs = _true_next_obs(new_obs, dones, infos)
        actions = _batch_actions(self._actions, self.action_space)
        bonus = self.module.compute(self._obs, actions, next_obs, dones=dones)
        intrinsic_rewards = self.coef * bonus.detach().cpu().numpy()
        for info, extrinsic, value in zip(infos, rewards, intrinsic_rewards, strict=True):
            info["reward_components"] = with_components(
                info.get("reward_components"), float(extrinsic), {self.component: float(value)},
                "give this intrinsic wrapper another component name",
            )
        self._pending.append((self._obs, actions, next_obs))
        if len(self._pending) >= self.update_every:
            obs, acts, nxt = (np.concatenate(part) for part in zip(*self._pending, strict=True))
            self.module.update(obs, acts, nxt)
            self._pending.clear()
        self._obs = new_obs
        return new_obs, (rewards + intrinsic_rewards).astype(np.float32), dones, infos
