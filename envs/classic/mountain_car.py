"""MountainCar-v0 and MountainCarContinuous-v0 as batched tensor math, with Gymnasium's dynamics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.envs.classic_control import utils

from rewardlab.envs.core import BatchedEnv


class _MountainCar(BatchedEnv):
    """What both mountain cars share: the track, the state ``(position, velocity)``, the reset."""

    state_dim = 2
    metadata = {**BatchedEnv.metadata, "render_fps": 30}

    min_position = -1.2
    max_position = 0.6
    max_speed = 0.07
    goal_velocity = 0.0
    gravity = 0.0025

    def reset_bounds(
        self, options: dict[str, Any] | None
    ) -> tuple[Sequence[float], Sequence[float]]:
        """Position uniform in ``[low, high]`` (default ``[-0.6, -0.4]``), velocity 0.

        :param options: ``{"low": float, "high": float}``, either optional
        """
        low, high = utils.maybe_parse_reset_bounds(options, -0.6, -0.4)
        return [low, 0.0], [high, 0.0]

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """The observation is the state ``(position, velocity)``.

        :param state: ``(2, num_envs)``
        """
        return self._transposed_state(state)

    def _move(
        self, state: torch.Tensor, acceleration: torch.Tensor, goal_position: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Apply ``acceleration`` on the hill, clip to the track, stop at the left wall."""
        position, velocity = state
        velocity = velocity + acceleration - self.gravity * torch.cos(3 * position)
        velocity = velocity.clamp(-self.max_speed, self.max_speed)
        position = (position + velocity).clamp(self.min_position, self.max_position)
        velocity = torch.where((position == self.min_position) & (velocity < 0), 0.0, velocity)
        terminated = (position >= goal_position) & (velocity >= self.goal_velocity)
        return torch.stack((position, velocity)), terminated


class MountainCarEnv(_MountainCar):
    """Gymnasium's ``MountainCar-v0``: drive an underpowered car up the right hill.

    Actions 0, 1, 2 accelerate left, not at all, right. Reward -1 every step; termination
    at ``position >= 0.5``; truncation after 200 steps; reset position uniform in
    ``[-0.6, -0.4]`` with zero velocity.

    :param num_envs: how many copies to run
    :param kwargs: ``device``, ``seed``, ``max_episode_steps``, ``compile`` and
        ``validate_actions`` of :class:`rewardlab.envs.BatchedEnv`
    """

    gymnasium_id = "MountainCar-v0"
    force = 0.001
    goal_position = 0.5

    def __init__(self, num_envs: int, **kwargs: Any):
        low = np.array([self.min_position, -self.max_speed], dtype=np.float32)
        high = np.array([self.max_position, self.max_speed], dtype=np.float32)
        super().__init__(
            num_envs, spaces.Box(low, high, dtype=np.float32), spaces.Discrete(3), **kwargs
        )

    def transition(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of ``gymnasium.envs.classic_control.MountainCarEnv``.

        :param state: ``(2, num_envs)``
        :param actions: ``(num_envs,)`` int64 in ``{0, 1, 2}``
        """
        next_state, terminated = self._move(state, (actions - 1) * self.force, self.goal_position)
        return next_state, torch.full_like(state[0], -1.0), terminated


class ContinuousMountainCarEnv(_MountainCar):
    """Gymnasium's ``MountainCarContinuous-v0``: the mountain car with a force in ``[-1, 1]``.

    Reward 100 on reaching ``position >= 0.45`` minus ``0.1 * action**2`` every step (of the
    action as given, before clipping, as Gymnasium computes it); truncation after 999 steps.

    :param num_envs: how many copies to run
    :param kwargs: ``device``, ``seed``, ``max_episode_steps``, ``compile`` and
        ``validate_actions`` of :class:`rewardlab.envs.BatchedEnv`
    """

    gymnasium_id = "MountainCarContinuous-v0"
    power = 0.0015
    goal_position = 0.45

    def __init__(self, num_envs: int, **kwargs: Any):
        low = np.array([self.min_position, -self.max_speed], dtype=np.float32)
        high = np.array([self.max_position, self.max_speed], dtype=np.float32)
        super().__init__(
            num_envs,
            spaces.Box(low, high, dtype=np.float32),
            spaces.Box(-1.0, 1.0, (1,), dtype=np.float32),
            **kwargs,
        )

    def transition(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of ``gymnasium.envs.classic_control.Continuous_MountainCarEnv``.

        :param state: ``(2, num_envs)``
        :param actions: ``(num_envs, 1)`` float32, clipped to ``[-1, 1]`` here
        """
        action = actions[:, 0]
        next_state, terminated = self._move(
            state, action.clamp(-1.0, 1.0) * self.power, self.goal_position
        )
        reward = 100.0 * terminated - 0.1 * action.square()
        return next_state, reward, terminated
