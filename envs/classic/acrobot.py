"""Acrobot-v1 as batched tensor math: Gymnasium's "book" dynamics integrated with its RK4 step."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.envs.classic_control import utils

from rewardlab.envs.core import BatchedEnv


def _wrap(angle: torch.Tensor) -> torch.Tensor:
    """Gymnasium's ``wrap(x, -pi, pi)``: add or subtract 2 pi until the angle is in ``[-pi, pi]``."""
    turn = 2 * math.pi
    above = torch.ceil((angle - math.pi) / turn)
    below = torch.ceil((-math.pi - angle) / turn)
    return torch.where(
        angle > math.pi,
        angle - above * turn,
        torch.where(angle < -math.pi, angle + below * turn, angle),
    )


class AcrobotEnv(BatchedEnv):
    """Gymnasium's ``Acrobot-v1``: swing a two-link chain above the bar by torquing the joint.

    The state is ``(theta1, theta2, dtheta1, dtheta2)``; the observation
    ``(cos theta1, sin theta1, cos theta2, sin theta2, dtheta1, dtheta2)``. Actions 0, 1, 2
    apply torque -1, 0, +1. Reward -1 every step, 0 on the step that terminates (the tip
    above the bar: ``-cos theta1 - cos(theta1 + theta2) > 1``); truncation after 500 steps;
    reset uniform in ``[-0.1, 0.1]^4``.

    :param num_envs: how many copies to run
    :param kwargs: ``device``, ``seed``, ``max_episode_steps``, ``compile`` and
        ``validate_actions`` of :class:`rewardlab.envs.BatchedEnv`
    """

    gymnasium_id = "Acrobot-v1"
    state_dim = 4
    # float64 as in Gymnasium's RK4: the double pendulum is chaotic, and float32 rounding
    # grows until observations differ visibly after about 100-250 steps; in float64 they
    # agree to 1e-6 over whole 500-step episodes (tests/test_envs_classic.py).
    state_dtype = torch.float64
    metadata = {**BatchedEnv.metadata, "render_fps": 15}

    dt = 0.2
    link_length_1 = 1.0
    link_mass_1 = 1.0
    link_mass_2 = 1.0
    link_com_pos_1 = 0.5
    link_com_pos_2 = 0.5
    link_moi = 1.0
    max_vel_1 = 4 * math.pi
    max_vel_2 = 9 * math.pi

    def __init__(self, num_envs: int, **kwargs: Any):
        high = np.array([1.0, 1.0, 1.0, 1.0, self.max_vel_1, self.max_vel_2], dtype=np.float32)
        super().__init__(
            num_envs, spaces.Box(-high, high, dtype=np.float32), spaces.Discrete(3), **kwargs
        )

    def reset_bounds(
        self, options: dict[str, Any] | None
    ) -> tuple[Sequence[float], Sequence[float]]:
        """Uniform in ``[low, high]`` for all four state variables (default ``±0.1``).

        :param options: ``{"low": float, "high": float}``, either optional
        """
        low, high = utils.maybe_parse_reset_bounds(options, -0.1, 0.1)
        return [low] * 4, [high] * 4

    def _derivatives(
        self, state: tuple[torch.Tensor, ...], torque: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        """Gymnasium's ``AcrobotEnv._dsdt`` with ``book_or_nips = "book"``, term by term."""
        m1, m2 = self.link_mass_1, self.link_mass_2
        l1 = self.link_length_1
        lc1, lc2 = self.link_com_pos_1, self.link_com_pos_2
        i1 = i2 = self.link_moi
        g = 9.8
        theta1, theta2, dtheta1, dtheta2 = state
        cos2, sin2 = torch.cos(theta2), torch.sin(theta2)
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos2) + i1 + i2
        d2 = m2 * (lc2**2 + l1 * lc2 * cos2) + i2
        phi2 = m2 * lc2 * g * torch.cos(theta1 + theta2 - math.pi / 2.0)
        phi1 = (
            -m2 * l1 * lc2 * dtheta2**2 * sin2
            - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin2
            + (m1 * lc1 + m2 * l1) * g * torch.cos(theta1 - math.pi / 2)
            + phi2
        )
        ddtheta2 = (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * sin2 - phi2) / (
            m2 * lc2**2 + i2 - d2**2 / d1
        )
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return dtheta1, dtheta2, ddtheta1, ddtheta2

    def transition(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One RK4 step of length 0.2 as ``gymnasium.envs.classic_control.acrobot.rk4``.

        :param state: ``(4, num_envs)``
        :param actions: ``(num_envs,)`` int64 in ``{0, 1, 2}``
        """
        torque = (actions - 1).to(state.dtype)
        y0 = tuple(state)
        half = self.dt / 2.0
        k1 = self._derivatives(y0, torque)
        k2 = self._derivatives(tuple(y + half * k for y, k in zip(y0, k1, strict=True)), torque)
        k3 = self._derivatives(tuple(y + half * k for y, k in zip(y0, k2, strict=True)), torque)
        k4 = self._derivatives(tuple(y + self.dt * k for y, k in zip(y0, k3, strict=True)), torque)
        theta1, theta2, dtheta1, dtheta2 = (
            y + self.dt / 6.0 * (a + 2 * b + 2 * c + d)
            for y, a, b, c, d in zip(y0, k1, k2, k3, k4, strict=True)
        )
        theta1, theta2 = _wrap(theta1), _wrap(theta2)
        dtheta1 = dtheta1.clamp(-self.max_vel_1, self.max_vel_1)
        dtheta2 = dtheta2.clamp(-self.max_vel_2, self.max_vel_2)
        terminated = -torch.cos(theta1) - torch.cos(theta2 + theta1) > 1.0
        reward = torch.where(terminated, 0.0, -1.0)
        return torch.stack((theta1, theta2, dtheta1, dtheta2)), reward, terminated

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """``(cos theta1, sin theta1, cos theta2, sin theta2, dtheta1, dtheta2)``.

        :param state: ``(4, num_envs)``
        """
        theta1, theta2, dtheta1, dtheta2 = state
        return torch.stack(
            (
                torch.cos(theta1),
                torch.sin(theta1),
                torch.cos(theta2),
                torch.sin(theta2),
                dtheta1,
                dtheta2,
            ),
            dim=1,
        ).float()
