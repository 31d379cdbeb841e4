"""Pendulum-v1 as batched tensor math, with Gymnasium's dynamics (g = 10)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.envs.classic_control import utils

from rewardlab.envs.core import BatchedEnv


class PendulumEnv(BatchedEnv):
    """Gymnasium's ``Pendulum-v1``: swing a pendulum up and hold it with a torque in ``[-2, 2]``.

    The state is ``(theta, theta_dot)``, the observation ``(cos theta, sin theta, theta_dot)``.
    Reward ``-(angle**2 + 0.1 theta_dot**2 + 0.001 torque**2)``; never terminates; truncation
    after 200 steps; reset uniform in ``[-pi, pi] x [-1, 1]`` (``options={"x_init": ...,
    "y_init": ...}`` changes the half-widths).

    :param num_envs: how many copies to run
    :param g: gravity, Gymnasium's default 10
    :param kwargs: ``device``, ``seed``, ``max_episode_steps``, ``compile`` and
        ``validate_actions`` of :class:`rewardlab.envs.BatchedEnv`
    """

    gymnasium_id = "Pendulum-v1"
    state_dim = 2
    # float64 as in Gymnasium: theta is never wrapped, and in float32 its rounding grows to
    # 3e-2 in the observations within one 200-step episode; in float64 they agree to 1e-6.
    state_dtype = torch.float64
    metadata = {**BatchedEnv.metadata, "render_fps": 30}

    max_speed = 8.0
    max_torque = 2.0
    dt = 0.05
    m = 1.0
    length = 1.0

    def __init__(self, num_envs: int, g: float = 10.0, **kwargs: Any):
        self.g = g
        high = np.array([1.0, 1.0, self.max_speed], dtype=np.float32)
        super().__init__(
            num_envs,
            spaces.Box(-high, high, dtype=np.float32),
            spaces.Box(-self.max_torque, self.max_torque, (1,), dtype=np.float32),
            **kwargs,
        )

    def reset_bounds(
        self, options: dict[str, Any] | None
    ) -> tuple[Sequence[float], Sequence[float]]:
        """``theta`` uniform in ``[-x_init, x_init]`` (default pi), ``theta_dot`` in ``[-y_init, y_init]`` (default 1).

        :param options: ``{"x_init": float, "y_init": float}``, either optional
        """
        options = options or {}
        x = utils.verify_number_and_cast(options.get("x_init", math.pi))
        y = utils.verify_number_and_cast(options.get("y_init", 1.0))
        return [-x, -y], [x, y]

    def transition(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of ``gymnasium.envs.classic_control.PendulumEnv``.

        :param state: ``(2, num_envs)``
        :param actions: ``(num_envs, 1)`` float32, clipped to ``[-2, 2]`` here
        """
        theta, theta_dot = state
        torque = actions[:, 0].clamp(-self.max_torque, self.max_torque)
        angle = torch.remainder(theta + math.pi, 2 * math.pi) - math.pi
        costs = angle.square() + 0.1 * theta_dot.square() + 0.001 * torque.square()
        theta_dot = (
            theta_dot
            + (
                3 * self.g / (2 * self.length) * torch.sin(theta)
                + 3.0 / (self.m * self.length**2) * torque
            )
            * self.dt
        ).clamp(-self.max_speed, self.max_speed)
        theta = theta + theta_dot * self.dt
        terminated = torch.zeros_like(theta, dtype=torch.bool)
        return torch.stack((theta, theta_dot)), (-costs).float(), terminated

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """``(cos theta, sin theta, theta_dot)``.

        :param state: ``(2, num_envs)``
        """
        theta, theta_dot = state
        return torch.stack((torch.cos(theta), torch.sin(theta), theta_dot), dim=1).float()

    def write_gymnasium_state(self, gymnasium_env: gymnasium.Env, index: int) -> None:
        """Copy the state and the last torque (which Gymnasium's renderer draws as an arrow).

        :param gymnasium_env: an unwrapped ``Pendulum-v1``, after reset
        :param index: which copy to copy
        """
        super().write_gymnasium_state(gymnasium_env, index)
        last = self._last_actions
        gymnasium_env.last_u = None if last is None else float(last[index, 0].clamp(-2.0, 2.0))
