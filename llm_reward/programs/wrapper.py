"""``ProgramReward``: a batched-env wrapper that trains on a reward program's reward."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rewardlab.common.components import with_components
from rewardlab.envs import BatchedWrapper
from rewardlab.envs.core import Actions, StepReturn
from rewardlab.llm_reward.programs.components import COMPONENT_PREFIX
from rewardlab.llm_reward.programs.program import RewardFunction

RewardAndComponents = tuple[torch.Tensor, dict[str, torch.Tensor]]


class ProgramReward(BatchedWrapper):
    r"""Replace the env's reward with a reward program's, keeping every part visible.

    The reward returned by :meth:`step` is the program's reward for the transition
    ``(obs, action, next_obs, terminated)``, where ``next_obs`` is the true last
    observation of an episode that ended (``info["final_obs"]``), never the reset one.
    ``info["reward_components"]`` keeps the env's own ``"extrinsic"`` reward (and any
    component added below this wrapper) and adds each program component as
    ``"program/<name>"``.

    Example::

        >>> import torch
        >>> from rewardlab import envs, llm_reward
        >>> from rewardlab.llm_reward.programs.program import RewardFunction
        >>> program = llm_reward.RewardProgram.from_source(
        ...     "def compute_reward(next_theta):\n"
        ...     "    upright = 1 - (next_theta / 0.21) ** 2\n"
        ...     "    return upright, {'upright': upright}\n")
        >>> description = llm_reward.describe("CartPole-v1")
        >>> reward_function = RewardFunction(program, description)
        >>> env = ProgramReward(envs.make("CartPole-v1", 4, seed=0), reward_function)
        >>> obs, info = env.reset()
        >>> obs, reward, terminated, truncated, info = env.step(torch.ones(4, dtype=torch.int64))
        >>> sorted(info["reward_components"])
        ['extrinsic', 'program/upright']

    The program runs in this process: wrap only trusted programs this way, or do it inside
    the sandbox (:func:`rewardlab.llm_reward.evaluate`).

    :param env: a batched env (``rewardlab.envs.make``) or wrapper.
    :param reward_function: the loaded program, or in the sandbox's job the
        :class:`~rewardlab.llm_reward.training.reward_process.RemoteReward` that asks the
        program's own process; either is called as ``(obs, action, next_obs, terminated,
        env_reward) -> (reward, components)``.
    """

    def __init__(
        self, env: Any, reward_function: RewardFunction | Callable[..., RewardAndComponents]
    ):
        super().__init__(env)
        self.reward_function = reward_function
        self._obs: torch.Tensor | None = None

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset the wrapped env and remember the first observations.

        :param seed: the seed, or ``None``.
        :param options: the reset options, or ``None``.
        """
        obs, info = self.env.reset(seed=seed, options=options)
        self._obs = obs
        return obs, info

    def step(self, actions: Actions) -> StepReturn:
        """Step the wrapped env and reward the transition with the program.

        :param actions: the batch of actions.
        :raises rewardlab.llm_reward.programs.ProgramError: the program failed on this transition.
        """
        if self._obs is None:
            raise RuntimeError("ProgramReward.step was called before reset()")
        actions = torch.as_tensor(actions, device=self.device)
        obs, env_reward, terminated, truncated, info = self.env.step(actions)
        next_obs = info.get("final_obs", obs)
        reward, components = self.reward_function(
            self._obs, actions, next_obs, terminated, env_reward
        )
        self._obs = obs
        info = dict(info)
        named = {COMPONENT_PREFIX + name: value for name, value in components.items()}
        info["reward_components"] = with_components(
            info.get("reward_components"), env_reward, named, "wrap the program reward only once"
        )
        return obs, reward, terminated, truncated, info
