"""CartPole-v1 as batched tensor math, with Gymnasium's dynamics, spaces and reset."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.envs.classic_control import utils

from rewardlab.envs.core import BatchedEnv


class CartPoleEnv(BatchedEnv):
    """Gymnasium's ``CartPole-v1``: push a cart left (0) or right (1) to keep a pole upright.

    The state ``(x, x_dot, theta, theta_dot)`` is the observation. Reward 1 every step,
    termination when ``|x| > 2.4`` or ``|theta| > 12°``, truncation after 500 steps, reset
    states uniform in ``[-0.05, 0.05]^4`` (``options={"low": ..., "high": ...}`` changes that).

    The state is float32 where Gymnasium's is float64, for speed: one step agrees to float32
    rounding (1e-7), and as the upright pole is unstable the difference grows by about 5%
    a step over an episode, to about 2e-5 after 80 steps (``tests/test_envs_classic.py``).

    :param num_envs: how many copies to run
    :param kwargs: ``device``, ``seed``, ``max_episode_steps``, ``compile`` and
        ``validate_actions`` of :class:`rewardlab.envs.BatchedEnv`
    """

    gymnasium_id = "CartPole-v1"
    state_dim = 4
    metadata = {**BatchedEnv.metadata, "render_fps": 50}

    gravity = 9.8
    masscart = 1.0
    masspole = 0.1
    total_mass = masspole + masscart
    length = 0.5  # half the pole's length
    polemass_length = masspole * length
    force_mag = 10.0
    tau = 0.02
    theta_threshold_radians = 12 * 2 * math.pi / 360
    x_threshold = 2.4

    def __init__(self, num_envs: int, **kwargs: Any):
        high = np.array(
            [self.x_threshold * 2, np.inf, self.theta_threshold_radians * 2, np.inf],
            dtype=np.float32,
        )
        super().__init__(
            num_envs,
            spaces.Box(-high, high, dtype=np.float32),
            spaces.Discrete(2),
            **kwargs,
        )

    def reset_bounds(
        self, options: dict[str, Any] | None
    ) -> tuple[Sequence[float], Sequence[float]]:
        """Uniform in ``[low, high]`` for all four state variables (default ``±0.05``).

        :param options: ``{"low": float, "high": float}``, either optional
        """
        low, high = utils.maybe_parse_reset_bounds(options, -0.05, 0.05)
        return [low] * 4, [high] * 4

    def transition(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Euler step of the cart-pole equations, as ``gymnasium.envs.classic_control.CartPoleEnv``.

        :param state: ``(4, num_envs)``
        :param actions: ``(num_envs,)`` int64 in ``{0, 1}``
        """
        x, x_dot, theta, theta_dot = state
        force = torch.where(actions == 1, self.force_mag, -self.force_mag)
        costheta = torch.cos(theta)
        sintheta = torch.sin(theta)
        temp = (force + self.polemass_length * theta_dot.square() * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta.square() / self.total_mass)
        )
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        terminated = (
            (x < -self.x_threshold)
            | (x > self.x_threshold)
            | (theta < -self.theta_threshold_radians)
            | (theta > self.theta_threshold_radians)
        )
        reward = torch.ones_like(x)
        return torch.stack((x, x_dot, theta, theta_dot)), reward, terminated

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """The observation is the state itself.

        :param state: ``(4, num_envs)``
        """
        # The same as state.T.contiguous(), which Inductor compiles to slower code.
        return torch.stack(state.unbind(0), dim=1)
