"""Built-in potentials, found by env id.

Every potential takes a batch ``(N, *obs_shape)``, as a numpy array or a torch
tensor, and returns ``(N,)`` of the same kind. Those meant for episodic tasks
with a goal are at most about zero near the goal, so that ``phi(terminal) = 0``
costs nothing for reaching it.

    >>> from rewardlab.shaping import potentials
    >>> sorted(potentials.available())[:3]
    ['Acrobot-v1', 'Ant-v5', 'CartPole-v1']
    >>> phi = potentials.for_env("MountainCar-v0")
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import torch

from rewardlab.shaping.core import Batch, Potential, check_scale
from rewardlab.shaping.llm_ranked import LLMRankedPotential, chat_judge  # noqa: F401  (re-exported)


def _xp(batch: Batch) -> ModuleType:
    return torch if isinstance(batch, torch.Tensor) else np


def _check_width(potential: Any, obs: Batch, width: int) -> None:
    if obs.ndim != 2 or obs.shape[1] != width:
        raise ValueError(
            f"{type(potential).__name__} takes observations of shape (N, {width}); got "
            f"{tuple(obs.shape)}"
        )


class MountainCarEnergy:
    """Mechanical energy of the car, ``0.5 v^2 + (g / 3) sin(3x)``, relative to the goal.

    ``phi = weight * (E - E_goal) / (E_goal - E_valley)``: ``-weight`` at rest in
    the valley, 0 at rest on the goal; the dynamics conserve ``E`` when the
    engine is off, so the potential rewards exactly the pumping the task needs.
    Works for ``MountainCar-v0`` and ``MountainCarContinuous-v0`` (same hill).

    :param weight: the potential's magnitude, in units of reward.
    :param goal_position: the x where the episode ends.
    """

    gravity = 0.0025

    traces = True  # tensor math only: a learner may compile it into its rollout

    def __init__(self, weight: float = 100.0, goal_position: float = 0.5):
        self.weight = check_scale(weight)
        self.goal_energy = self.gravity / 3 * math.sin(3 * goal_position)
        self.valley_energy = -self.gravity / 3

    def __call__(self, obs: Batch) -> Batch:
        _check_width(self, obs, 2)
        xp = _xp(obs)
        position, velocity = obs[:, 0], obs[:, 1]
        energy = 0.5 * velocity**2 + self.gravity / 3 * xp.sin(3 * position)
        return self.weight * (energy - self.goal_energy) / (self.goal_energy - self.valley_energy)


class CartPoleUpright:
    """How far the cart and pole are from failing: ``weight * mean(1 - (x/x_max)^2, 1 - (theta/theta_max)^2)``.

    Each term is clipped at 0. Non-negative, so falling (``phi(terminal) = 0``)
    costs what was left.

    :param weight: the potential's magnitude, in units of reward.
    """

    x_max = 2.4
    theta_max = 12 * 2 * math.pi / 360

    traces = True  # tensor math only: a learner may compile it into its rollout

    def __init__(self, weight: float = 1.0):
        self.weight = check_scale(weight)
        self._inverse_limits = np.array([1 / self.x_max, 1 / self.theta_max], dtype=np.float32)

    def __call__(self, obs: Batch) -> Batch:
        _check_width(self, obs, 4)
        if isinstance(obs, torch.Tensor):
            scaled = obs[:, 0::2] * torch.as_tensor(self._inverse_limits, device=obs.device)
            left = torch.relu(1.0 - scaled * scaled)
        else:
            scaled = obs[:, 0::2] * self._inverse_limits  # columns x and theta
            left = np.maximum(1.0 - scaled * scaled, 0.0)
        return (left[:, 0] + left[:, 1]) * (0.5 * self.weight)


class AcrobotTipHeight:
    """Height of the tip, ``-cos(t1) - cos(t1 + t2)``, relative to the goal line (1).

    ``phi = weight * (height - 1) / 3``: ``-weight`` hanging down, 0 on the goal line.

    :param weight: the potential's magnitude, in units of reward.
    """

    traces = True  # tensor math only: a learner may compile it into its rollout

    def __init__(self, weight: float = 10.0):
        self.weight = check_scale(weight)

    def __call__(self, obs: Batch) -> Batch:
        _check_width(self, obs, 6)
        cos1, sin1, cos2, sin2 = obs[:, 0], obs[:, 1], obs[:, 2], obs[:, 3]
        height = -cos1 - (cos1 * cos2 - sin1 * sin2)
        return self.weight * (height - 1.0) / 3.0


class PendulumEnergy:
    """Distance of the pendulum's energy from that of resting upright.

    With Gymnasium's dynamics ``E = 0.5 w^2 + (3g / 2l) cos(theta)`` is conserved
    without torque; ``phi = -weight * |E - E_up| / (2 * E_up)``, 0 at the energy of
    the upright rest and ``-weight`` hanging still.

    :param weight: the potential's magnitude, in units of reward.
    """

    upright_energy = 3 * 10.0 / (2 * 1.0)

    traces = True  # tensor math only: a learner may compile it into its rollout

    def __init__(self, weight: float = 5.0):
        self.weight = check_scale(weight)

    def __call__(self, obs: Batch) -> Batch:
        _check_width(self, obs, 3)
        xp = _xp(obs)
        energy = 0.5 * obs[:, 2] ** 2 + self.upright_energy * obs[:, 0]
        return -self.weight * xp.abs(energy - self.upright_energy) / (2 * self.upright_energy)


class MiniGridGoalDistance:
    """Manhattan distance from the agent to the goal on a fully observed MiniGrid.

    Takes the grid encoding of ``minigrid.wrappers.FullyObsWrapper`` (with
    ``ImgObsWrapper``): a batch ``(N, width, height, 3)`` whose first channel is the
    object index (agent 10, goal 8). ``phi = -weight * distance / (width + height)``;
    0 on the goal.

    :param weight: the potential's magnitude, in units of reward.
    """

    agent_index = 10
    goal_index = 8

    def __init__(self, weight: float = 1.0):
        self.weight = check_scale(weight)

    def __call__(self, obs: Batch) -> Batch:
        if obs.ndim != 4 or obs.shape[-1] != 3:
            raise ValueError(
                "MiniGridGoalDistance takes fully observed grids of shape (N, width, height, 3) "
                f"(FullyObsWrapper + ImgObsWrapper); got {tuple(obs.shape)}"
            )
        width, height = obs.shape[1], obs.shape[2]
        objects = obs[..., 0].reshape(len(obs), -1)
        agent = _first_cell(objects == self.agent_index)
        goal = _first_cell(objects == self.goal_index)
        # The agent's cell hides the goal once it stands on it: the distance is then 0.
        has_goal = (objects == self.goal_index).any(1)
        distance = abs(agent // height - goal // height) + abs(agent % height - goal % height)
        distance = distance * has_goal
        return -self.weight * distance / (width + height)


def _first_cell(mask: Batch) -> Batch:
    if isinstance(mask, torch.Tensor):
        return mask.to(torch.uint8).argmax(1).to(torch.float32)
    return mask.argmax(1).astype(np.float64)


def _closeness(value: Batch, centre: float, half_width: float) -> Batch:
    """``1 - ((value - centre) / half_width)^2`` clipped at 0: 1 at the centre, 0 at the edges and past them."""
    scaled = (value - centre) / half_width
    return (1.0 - scaled * scaled).clip(min=0.0)


class _TorsoHealthMargin:
    """Hopper and Walker2d: closeness of the torso's height and angle to the middle of the healthy ranges.

    Reads observation columns 0 (torso height ``qpos[1]``) and 1 (torso angle ``qpos[2]``) of
    Gymnasium's v5 layout. A subclass sets the ranges of its task; ``z_open_top`` says that the
    healthy heights have no top, so heights at or above ``z_centre`` all count as centred.
    """

    width: int
    z_low: float
    z_centre: float
    z_open_top = False
    angle_max: float

    def __init__(self, weight: float = 1.0):
        self.weight = check_scale(weight)

    def __call__(self, obs: Batch) -> Batch:
        _check_width(self, obs, self.width)
        height = obs[:, 0].clip(max=self.z_centre) if self.z_open_top else obs[:, 0]
        height_term = _closeness(height, self.z_centre, self.z_centre - self.z_low)
        angle_term = _closeness(obs[:, 1], 0.0, self.angle_max)
        return (height_term + angle_term) * (0.5 * self.weight)


class HopperHealthMargin(_TorsoHealthMargin):
    """How far Hopper's torso is from falling: ``weight * mean(height term, angle term)``.

    Each term is ``1 - (d / d_max)^2`` clipped at 0: the angle's distance from 0 over 0.2 rad,
    the height's shortfall below the standing height 1.25 over its distance to the fall line
    0.7 (Gymnasium's healthy range has no top, so higher hops count as standing). A hop that
    keeps the torso high and level keeps the potential up; falling (``phi(terminal) = 0``)
    costs what was left, so the shaping pays for staying healthy longer.

    :param weight: the potential's magnitude, in units of reward: 1 is one step's healthy reward.
    """

    width = 11
    z_low, z_centre, z_open_top = 0.7, 1.25, True
    angle_max = 0.2


class Walker2dHealthMargin(_TorsoHealthMargin):
    """How far Walker2d's torso is from falling: ``weight * mean(height term, angle term)``.

    Each term is ``1 - (d / d_max)^2`` clipped at 0, ``d`` the distance from the centre of
    Gymnasium's healthy range: height 1.4 in (0.8, 2.0), angle 0 in (-1, 1) rad. Non-negative
    and 0 at the ranges' edges, so falling (``phi(terminal) = 0``) costs what was left and the
    shaping pays for staying healthy longer.

    :param weight: the potential's magnitude, in units of reward: 1 is one step's healthy reward.
    """

    width = 17
    z_low, z_centre = 0.8, 1.4
    angle_max = 1.0


class AntUpright:
    """How far Ant's torso is from falling: ``weight * mean(height term, uprightness)``.

    The height term is ``1 - (d / 0.4)^2`` clipped at 0, ``d`` the torso height's distance from
    0.6, the centre of Gymnasium's healthy range (0.2, 1.0). Uprightness is ``(1 + u_z) / 2``,
    ``u_z`` the world-z component of the torso's up axis, from the quaternion ``(w, x, y, z)``
    as ``(w^2 + z^2) / |q|^2``: 1 upright, 0 upside down, so the shaping charges for tipping
    over, from which Ant does not recover, as well as for leaving the healthy heights.
    Takes Gymnasium's v5 layout with or without the contact forces (105 or 27 columns).

    :param weight: the potential's magnitude, in units of reward: 1 is one step's healthy reward.
    """

    widths = (105, 27)
    z_centre, z_half_range = 0.6, 0.4

    def __init__(self, weight: float = 1.0):
        self.weight = check_scale(weight)

    def __call__(self, obs: Batch) -> Batch:
        if obs.ndim != 2 or obs.shape[1] not in self.widths:
            raise ValueError(
                f"AntUpright takes observations of shape (N, 105), or (N, 27) without contact "
                f"forces; got {tuple(obs.shape)}"
            )
        height_term = _closeness(obs[:, 0], self.z_centre, self.z_half_range)
        quaternion = obs[:, 1:5] * obs[:, 1:5]
        uprightness = (quaternion[:, 0] + quaternion[:, 3]) / quaternion.sum(1)
        return (height_term + uprightness) * (0.5 * self.weight)


class HalfCheetahUpright:
    """Uprightness of HalfCheetah's torso: ``weight * cos(pitch)``, the pitch being observation column 1.

    ``weight`` upright, ``-weight`` on its back: the shaping charges ``2 * weight`` for the
    flip onto the back, the local optimum (running on its back) that learners often fall
    into early and then cannot leave.

    :param weight: the potential's magnitude, in units of reward.
    """

    def __init__(self, weight: float = 1.0):
        self.weight = check_scale(weight)

    def __call__(self, obs: Batch) -> Batch:
        _check_width(self, obs, 17)
        return self.weight * _xp(obs).cos(obs[:, 1])


class InvertedPendulumUpright:
    """How far the pole is from falling: ``weight * (1 - (theta / 0.2)^2)``, clipped at 0.

    ``theta`` is the pole angle (observation column 1); the episode terminates at
    ``|theta| > 0.2``. Non-negative, so falling (``phi(terminal) = 0``) costs what was left.

    :param weight: the potential's magnitude, in units of reward: 1 is one step's reward.
    """

    theta_max = 0.2

    def __init__(self, weight: float = 1.0):
        self.weight = check_scale(weight)

    def __call__(self, obs: Batch) -> Batch:
        _check_width(self, obs, 4)
        return self.weight * _closeness(obs[:, 1], 0.0, self.theta_max)


class ValuePotential:
    """``phi = V(s)`` of a trained critic: an SB3 model or any torch module.

    Shaping with a learned value function is still potential-based, so policy
    invariance holds whatever the critic learned (Wiewiora, 2003: it acts as a
    Q initialisation).

    :param critic: an SB3 model (its ``policy.predict_values`` is used) or a torch
        module mapping a float tensor batch to ``(N,)`` or ``(N, 1)`` values.
    :param weight: multiplies the values.
    """

    def __init__(self, critic: Any, weight: float = 1.0):
        policy = getattr(critic, "policy", None)
        if policy is not None and hasattr(policy, "predict_values"):
            self._values = policy.predict_values
            self._device = policy.device
        elif isinstance(critic, torch.nn.Module):
            self._values = critic
            self._device = next(critic.parameters(), torch.empty(0)).device
        else:
            raise ValueError(
                f"critic={type(critic).__name__} is neither an SB3 model with "
                "policy.predict_values nor a torch.nn.Module"
            )
        self.weight = check_scale(weight)

    def __call__(self, obs: Batch) -> Batch:
        is_numpy = not isinstance(obs, torch.Tensor)
        batch = torch.as_tensor(np.asarray(obs) if is_numpy else obs, dtype=torch.float32)
        with torch.no_grad():
            values = self._values(batch.to(self._device)).reshape(len(batch))
        values = self.weight * values
        return values.cpu().numpy().astype(np.float64) if is_numpy else values.to(obs.device)


class ScheduledPotential:
    """A potential whose scale follows a schedule over training: ``phi_t = c(t) * phi``.

    A dynamic potential (Devlin & Kudenko, 2012): the shaping
    ``gamma * phi_{t+1}(s') - phi_t(s)`` keeps the optimal policy unchanged, so the
    shaping can be annealed to zero without breaking invariance.

    :param potential: the static potential to scale.
    :param schedule: ``c(t)``, ``t`` the number of transitions seen by the wrapper.
    """

    def __init__(self, potential: Potential, schedule: Callable[[int], float]):
        if not callable(potential) or not callable(schedule):
            raise ValueError("ScheduledPotential takes a callable potential and a callable schedule")
        self.potential = potential
        self.schedule = schedule

    def __call__(self, obs: Batch, t: int = 0) -> Batch:
        return self.schedule(t) * self.potential(obs)


def linear_schedule(start: float, end: float, steps: int) -> Callable[[int], float]:
    """``c(t)`` going linearly from ``start`` to ``end`` over ``steps`` transitions, then ``end``."""
    if steps <= 0:
        raise ValueError(f"steps={steps!r} must be a positive number of transitions")

    def schedule(t: int) -> float:
        return start + (end - start) * min(t / steps, 1.0)

    return schedule


_BUILT_IN: dict[str, tuple[Callable[..., Potential], str]] = {
    "MountainCar-v0": (MountainCarEnergy, "mechanical energy of the car relative to the goal"),
    "MountainCarContinuous-v0": (
        lambda **kwargs: MountainCarEnergy(**{"weight": 10.0, **kwargs}),
        "mechanical energy of the car relative to the goal",
    ),
    "CartPole-v1": (CartPoleUpright, "pole angle and cart position left before failing"),
    "Acrobot-v1": (AcrobotTipHeight, "height of the tip relative to the goal line"),
    "Pendulum-v1": (PendulumEnergy, "distance from the energy of resting upright"),
    "MiniGrid": (MiniGridGoalDistance, "Manhattan distance to the goal (fully observed grid)"),
    "Hopper-v5": (HopperHealthMargin, "torso height and angle left before falling"),
    "Walker2d-v5": (Walker2dHealthMargin, "torso height and angle left before falling"),
    "Ant-v5": (AntUpright, "torso height in the healthy range and uprightness"),
    "HalfCheetah-v5": (HalfCheetahUpright, "uprightness of the torso, cos of its pitch"),
    "InvertedPendulum-v5": (InvertedPendulumUpright, "pole angle left before falling"),
}


def available() -> dict[str, str]:
    """Env ids with a built-in potential, each with a one-line description.

    ``"MiniGrid"`` stands for every ``MiniGrid-*`` task with a goal square, a user's
    ``module:MiniGrid-*`` too.
    """
    return {env_id: description for env_id, (_, description) in _BUILT_IN.items()}


def for_env(env_id: str, **kwargs: Any) -> Potential:
    """The built-in potential for ``env_id``; keyword arguments go to its constructor (e.g. ``weight``).

    :raises ValueError: if there is none, listing the env ids that have one.
    """
    # a user's task under its module's name (module:MiniGrid-Lava-v0) is a MiniGrid task too
    key = "MiniGrid" if env_id.rpartition(":")[2].startswith("MiniGrid-") else env_id
    if key not in _BUILT_IN:
        known = ", ".join(sorted(_BUILT_IN))
        raise ValueError(
            f"no built-in potential for env_id={env_id!r}; known: {known} (MiniGrid means any "
            "MiniGrid-* task). Pass your own callable phi(obs_batch) -> (N,) instead"
        )
    return _BUILT_IN[key][0](**kwargs)
