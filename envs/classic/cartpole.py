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
        # Gymnasium's formulas, written with fused operators (addcmul is a + value * b * c,
        # add with alpha a + alpha * b): in eager mode each operator is a dispatch, which
        # at a few thousand envs costs more than its arithmetic.
        mass = self.total_mass
        # temp = (force + polemass_length * theta_dot**2 * sintheta) / total_mass, where the
        # force is +force_mag for action 1 and -force_mag for 0
        force_per_mass = actions * (2 * self.force_mag / mass) - self.force_mag / mass
        costheta = torch.cos(theta)
        sintheta = torch.sin(theta)
        temp = torch.addcmul(
            force_per_mass, theta_dot.square(), sintheta, value=self.polemass_length / mass
        )
        # thetaacc = (gravity * sintheta - costheta * temp)
        #            / (length * (4/3 - masspole * costheta**2 / total_mass))
        numerator = torch.addcmul(self.gravity * sintheta, costheta, temp, value=-1.0)
        denominator = torch.addcmul(
            torch.full_like(theta, self.length * 4.0 / 3.0),
            costheta,
            costheta,
            value=-self.length * self.masspole / mass,
        )
        thetaacc = numerator / denominator
        # xacc = temp - polemass_length * thetaacc * costheta / total_mass
        xacc = torch.addcmul(temp, thetaacc, costheta, value=-self.polemass_length / mass)
        x = torch.add(x, x_dot, alpha=self.tau)
        x_dot = torch.add(x_dot, xacc, alpha=self.tau)
        theta = torch.add(theta, theta_dot, alpha=self.tau)
        theta_dot = torch.add(theta_dot, thetaacc, alpha=self.tau)
        terminated = (x.abs() > self.x_threshold) | (theta.abs() > self.theta_threshold_radians)
        reward = torch.ones_like(x)
        return torch.stack((x, x_dot, theta, theta_dot)), reward, terminated

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """The observation is the state itself.

        :param state: ``(4, num_envs)``
        """
        return self._transposed_state(state)
