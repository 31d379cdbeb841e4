"""New behaviours on the batched MuJoCo tasks: a sparse reward and a precise success rule each.

Locomotion behaviours in the spirit of Text2Reward's, which none of Gymnasium's own
rewards asks for. Each env pays +1 on the step that achieves the behaviour, and that step
ends the episode; every other step pays 0 (the reward component ``"success"``). Dense
rewards that teach them are reward programs (``rewardlab.llm_reward.reference_programs``); the
success rules, read from the observation, are in ``rewardlab.llm_reward.describe(env_id).success``.

- ``HalfCheetah-Backward-v0``: run backwards; success on the first step with the torso's
  x <= -20 m (it starts within 0.1 m of 0). Episodes otherwise end after 1000 steps.
- ``Hopper-Backward-v0``: hop backwards; success on the first step with the torso's
  x <= -2 m while the torso is still up: its height and angle inside Hopper's healthy
  ranges (> 0.7 m, within +-0.2 rad). An unhealthy step (Hopper's health rule) ends the
  episode without success.
- ``Ant-TurnInPlace-v0``: turn counter-clockwise on the spot; success on the first step
  on which the torso's heading has turned by 2 pi in total since the episode started
  (clockwise turning counts against it) while healthy and within 1 m (horizontally) of
  where the episode started. Leaving that circle, or an unhealthy step, ends the episode
  without success.

Each observation holds what its rule reads: the planar runners observe their x position
(``exclude_current_positions_from_observation=False``), the ant observes its
displacement from the start and the angle turned (three columns appended to Ant-v5's).
The reward terms of the base tasks (and their weights) do not apply, so those arguments
are refused, as are the observation-layout flags the success rules depend on.

Example::

    >>> from rewardlab import envs
    >>> env = envs.make("HalfCheetah-Backward-v0", num_envs=8, seed=0)
    >>> obs, info = env.reset()
    >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    >>> float(obs[0, 0])  # the torso's x  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

from rewardlab.envs.mujoco.tasks import AntEnv, HalfCheetahEnv, HopperEnv, Terms

EXCLUDE_POSITIONS = "exclude_current_positions_from_observation"


def _refuse(env: type, kwargs: dict[str, Any], names: Iterable[str]) -> None:
    given = sorted(name for name in names if name in kwargs)
    if given:
        raise ValueError(
            f"{env.__name__} takes no {', '.join(given)}: its reward is the success flag alone "
            "and its success rule reads a fixed observation layout; drop the argument(s)"
        )


def wrap_angle(angle: torch.Tensor) -> torch.Tensor:
    """``angle`` wrapped into ``[-pi, pi)``."""
    return torch.remainder(angle + math.pi, 2 * math.pi) - math.pi


class HalfCheetahBackwardEnv(HalfCheetahEnv):
    """``HalfCheetah-Backward-v0``: run backwards until the torso's x is at most ``target_x``.

    Reward 1 on the success step, which ends the episode, else 0. The observation is
    HalfCheetah-v5's with the x position first (18 columns).
    """

    target_x = -20.0

    def __init__(self, num_envs: int, **kwargs: Any):
        _refuse(type(self), kwargs, ("forward_reward_weight", "ctrl_cost_weight", EXCLUDE_POSITIONS))
        super().__init__(num_envs, exclude_current_positions_from_observation=False, **kwargs)

    def evaluate(self, before: torch.Tensor, action: torch.Tensor) -> Terms:
        _, _, info = self._motion(before, action)
        success = info["x_position"] <= self.target_x
        return {"success": success.to(torch.float64)}, success, info


class HopperBackwardEnv(HopperEnv):
    """``Hopper-Backward-v0``: hop backwards until the torso's x is at most ``target_x``, still up.

    Reward 1 on the success step (x <= ``target_x`` and :meth:`is_upright`, the part of the
    health rule that the observation shows), which ends the episode, else 0; an unhealthy
    step ends it too (with ``terminate_when_unhealthy``, the default). The observation is Hopper-v5's with the x position first (12 columns).
    """

    target_x = -2.0

    def __init__(self, num_envs: int, **kwargs: Any):
        _refuse(type(self), kwargs,
                ("forward_reward_weight", "ctrl_cost_weight", "healthy_reward", EXCLUDE_POSITIONS))
        super().__init__(num_envs, exclude_current_positions_from_observation=False, **kwargs)

    def evaluate(self, before: torch.Tensor, action: torch.Tensor) -> Terms:
        _, _, info = self._motion(before, action)
        success = (info["x_position"] <= self.target_x) & self.is_upright()
        terminated = success
        if self._terminate_when_unhealthy:
            terminated = terminated | ~self.is_healthy()
        return {"success": success.to(torch.float64)}, terminated, info


class AntTurnInPlaceEnv(AntEnv):
    """``Ant-TurnInPlace-v0``: turn counter-clockwise by ``target_turn`` without leaving ``radius``.

    The angle turned sums the wrapped change of the torso's heading (:meth:`heading`) over
    the episode's steps. Reward 1 on the success step (turned >= ``target_turn``, healthy,
    within ``radius`` of the start), which ends the episode, else 0; leaving the circle
    ends it too, and so does an unhealthy step (with ``terminate_when_unhealthy``).

    The observation is Ant-v5's (105 columns) followed by ``x - x_start``, ``y - y_start``
    and the angle turned. :meth:`set_state` keeps the episode's start and angle so far; the
    heading change it makes is counted at the next step, like any other.
    """

    target_turn = 2 * math.pi
    radius = 1.0

    def __init__(self, num_envs: int, **kwargs: Any):
        _refuse(type(self), kwargs, (
            "forward_reward_weight", "ctrl_cost_weight", "contact_cost_weight", "healthy_reward",
            EXCLUDE_POSITIONS, "include_cfrc_ext_in_observation",
        ))  # fmt: skip
        super().__init__(num_envs, **kwargs)
        sim = self.backend.device
        self._start_xy = torch.zeros((self.num_envs, 2), dtype=torch.float64, device=sim)
        self._last_heading = torch.zeros(self.num_envs, dtype=torch.float64, device=sim)
        self._turned = torch.zeros(self.num_envs, dtype=torch.float64, device=sim)

    def observation_size(self) -> int:
        return super().observation_size() + 3

    def heading(self) -> torch.Tensor:
        """The torso's yaw ``(num_envs,)`` in ``[-pi, pi]``: the angle of its x-axis in the ground plane.

        Read from the free joint's quaternion, which need not have unit length (reset noise
        is added to it as it is to every ``qpos`` entry).
        """
        w, x, y, z = self.qpos[:, 3:7].unbind(dim=1)
        return torch.atan2(2 * (w * z + x * y), w * w + x * x - y * y - z * z)

    def turned(self) -> torch.Tensor:
        """The angle turned since each episode started ``(num_envs,)``, counter-clockwise positive (a copy)."""
        return self._turned.clone()

    def displacement(self) -> torch.Tensor:
        """The torso's ``(x, y)`` minus where each episode started, ``(num_envs, 2)``."""
        return self.qpos[:, :2] - self._start_xy

    def on_reset(self, ids: torch.Tensor) -> None:
        self._start_xy[ids] = self.qpos[ids, :2]
        self._last_heading[ids] = self.heading()[ids]
        self._turned[ids] = 0.0

    def observe(self) -> torch.Tensor:
        return torch.cat([super().observe(), self.displacement(), self._turned[:, None]], dim=1)

    def evaluate(self, before: torch.Tensor, action: torch.Tensor) -> Terms:
        heading = self.heading()
        self._turned += wrap_angle(heading - self._last_heading)
        self._last_heading.copy_(heading)
        distance = self.displacement().norm(dim=1)
        inside = distance <= self.radius
        healthy = self.is_healthy()
        success = healthy & inside & (self._turned >= self.target_turn)
        terminated = success | ~inside
        if self._terminate_when_unhealthy:
            terminated = terminated | ~healthy
        info = {
            "x_position": self.qpos[:, 0].clone(),
            "y_position": self.qpos[:, 1].clone(),
            "distance_from_start": distance,
            "turned": self._turned.clone(),
        }
        return {"success": success.to(torch.float64)}, terminated, info
