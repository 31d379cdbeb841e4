"""Gymnasium's v5 MuJoCo tasks as batched envs: HalfCheetah, Hopper, Walker2d, Ant, InvertedPendulum.

Each class mirrors Gymnasium's ``<task>_v5.py``: the same keyword arguments with the same
defaults, and the same formulas, written over a batch. Reward terms carry Gymnasium's names
and enter the reward with their sign (``ctrl_cost`` and ``contact_cost`` are negative).

Example::

    >>> from rewardlab import envs
    >>> env = envs.make("Hopper-v5", num_envs=64, seed=0)
    >>> obs, info = env.reset()
    >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    >>> sorted(info["reward_components"])
    ['ctrl_cost', 'extrinsic', 'forward_reward', 'healthy_reward']
"""

from __future__ import annotations

import math

import torch

from rewardlab.envs.mujoco.core import MujocoEnv

Terms = tuple[dict[str, torch.Tensor], torch.Tensor, dict[str, torch.Tensor]]


def _inside(value: torch.Tensor, low: float, high: float) -> torch.Tensor:
    return (low < value) & (value < high)


def _check_range(name: str, value: tuple[float, float]) -> tuple[float, float]:
    low, high = (float(v) for v in value)
    if math.isnan(low) or math.isnan(high) or low >= high:
        raise ValueError(f"{name} must be (low, high) with low < high, got {value!r}")
    return low, high


class _PlanarRunner(MujocoEnv):
    """HalfCheetah, Hopper and Walker2d: a planar body moving along x, ``qpos[0]`` being x."""

    def __init__(
        self,
        num_envs: int,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 0.1,
        exclude_current_positions_from_observation: bool = True,
        **kwargs,
    ):
        self._forward_reward_weight = float(forward_reward_weight)
        self._ctrl_cost_weight = float(ctrl_cost_weight)
        self._exclude_current_positions = bool(exclude_current_positions_from_observation)
        super().__init__(num_envs, **kwargs)

    def observation_size(self) -> int:
        return self.model.nq + self.model.nv - self._exclude_current_positions

    def _velocity_observation(self) -> torch.Tensor:
        return self.qvel

    def observe(self) -> torch.Tensor:
        position = self.qpos[:, 1:] if self._exclude_current_positions else self.qpos
        return torch.cat([position, self._velocity_observation()], dim=1)

    def position_before(self) -> torch.Tensor:
        return self.qpos[:, 0].clone()

    def _motion(self, before: torch.Tensor, action: torch.Tensor) -> Terms:
        x_position = self.qpos[:, 0].clone()
        x_velocity = (x_position - before) / self.dt
        components = {
            "forward_reward": self._forward_reward_weight * x_velocity,
            "ctrl_cost": -self._ctrl_cost_weight * action.square().sum(dim=1),
        }
        info = {"x_position": x_position, "x_velocity": x_velocity}
        return components, torch.zeros_like(x_position, dtype=torch.bool), info


class HalfCheetahEnv(_PlanarRunner):
    """Gymnasium's ``HalfCheetah-v5``, batched: run forward; never terminates.

    Reward ``forward_reward_weight * x_velocity - ctrl_cost_weight * |a|^2``.
    """

    gymnasium_id = "HalfCheetah-v5"
    xml_file = "half_cheetah.xml"
    frame_skip = 5
    reset_noise_scale = 0.1
    qvel_noise = "normal"

    def evaluate(self, before: torch.Tensor, action: torch.Tensor) -> Terms:
        components, terminated, info = self._motion(before, action)
        info["reward_forward"] = components["forward_reward"]
        info["reward_ctrl"] = components["ctrl_cost"]
        return components, terminated, info


class _HealthyRunner(_PlanarRunner):
    """Hopper and Walker2d: a healthy bonus, and the episode ends when the body falls."""

    reset_noise_scale = 5e-3

    def __init__(
        self,
        num_envs: int,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 1e-3,
        healthy_reward: float = 1.0,
        terminate_when_unhealthy: bool = True,
        **kwargs,
    ):
        self._healthy_reward = float(healthy_reward)
        self._terminate_when_unhealthy = bool(terminate_when_unhealthy)
        super().__init__(num_envs, forward_reward_weight, ctrl_cost_weight, **kwargs)

    def _velocity_observation(self) -> torch.Tensor:
        return self.qvel.clamp(-10.0, 10.0)

    def is_healthy(self) -> torch.Tensor:
        """Bool ``(num_envs,)``: the torso is within the task's height and angle ranges."""
        raise NotImplementedError

    def evaluate(self, before: torch.Tensor, action: torch.Tensor) -> Terms:
        components, _, info = self._motion(before, action)
        healthy = self.is_healthy()
        components["healthy_reward"] = healthy.to(torch.float64) * self._healthy_reward
        terminated = ~healthy if self._terminate_when_unhealthy else torch.zeros_like(healthy)
        info["reward_forward"] = components["forward_reward"]
        info["reward_ctrl"] = components["ctrl_cost"]
        info["reward_survive"] = components["healthy_reward"]
        return components, terminated, info


class HopperEnv(_HealthyRunner):
    """Gymnasium's ``Hopper-v5``, batched: hop forward without falling.

    Healthy while every ``state_vector()[2:]`` entry is inside ``healthy_state_range``, the
    torso height ``qpos[1]`` inside ``healthy_z_range`` and its angle ``qpos[2]`` inside
    ``healthy_angle_range`` (all strict).
    """

    gymnasium_id = "Hopper-v5"
    xml_file = "hopper.xml"
    frame_skip = 4

    def __init__(
        self,
        num_envs: int,
        healthy_state_range: tuple[float, float] = (-100.0, 100.0),
        healthy_z_range: tuple[float, float] = (0.7, float("inf")),
        healthy_angle_range: tuple[float, float] = (-0.2, 0.2),
        **kwargs,
    ):
        self._healthy_state_range = _check_range("healthy_state_range", healthy_state_range)
        self._healthy_z_range = _check_range("healthy_z_range", healthy_z_range)
        self._healthy_angle_range = _check_range("healthy_angle_range", healthy_angle_range)
        super().__init__(num_envs, **kwargs)

    def is_upright(self) -> torch.Tensor:
        """Bool ``(num_envs,)``: torso height and angle inside their healthy ranges."""
        healthy_z = _inside(self.qpos[:, 1], *self._healthy_z_range)
        return healthy_z & _inside(self.qpos[:, 2], *self._healthy_angle_range)

    def is_healthy(self) -> torch.Tensor:
        state = torch.cat([self.qpos[:, 2:], self.qvel], dim=1)
        healthy_state = _inside(state, *self._healthy_state_range).all(dim=1)
        return healthy_state & self.is_upright()

    def evaluate(self, before: torch.Tensor, action: torch.Tensor) -> Terms:
        components, terminated, info = super().evaluate(before, action)
        info["z_distance_from_origin"] = self.qpos[:, 1] - self.init_qpos[1]
        return components, terminated, info


class Walker2dEnv(_HealthyRunner):
    """Gymnasium's ``Walker2d-v5``, batched: walk forward on two legs without falling.

    Healthy while the torso height ``qpos[1]`` is inside ``healthy_z_range`` and its angle
    ``qpos[2]`` inside ``healthy_angle_range`` (strict).
    """

    gymnasium_id = "Walker2d-v5"
    xml_file = "walker2d_v5.xml"
    frame_skip = 4

    def __init__(
        self,
        num_envs: int,
        healthy_z_range: tuple[float, float] = (0.8, 2.0),
        healthy_angle_range: tuple[float, float] = (-1.0, 1.0),
        **kwargs,
    ):
        self._healthy_z_range = _check_range("healthy_z_range", healthy_z_range)
        self._healthy_angle_range = _check_range("healthy_angle_range", healthy_angle_range)
        super().__init__(num_envs, **kwargs)

    def is_healthy(self) -> torch.Tensor:
        healthy_z = _inside(self.qpos[:, 1], *self._healthy_z_range)
        healthy_angle = _inside(self.qpos[:, 2], *self._healthy_angle_range)
        return healthy_z & healthy_angle


class AntEnv(MujocoEnv):
    """Gymnasium's ``Ant-v5``, batched: a four-legged robot walks forward along x.

    Reward ``forward_reward + healthy_reward - ctrl_cost - contact_cost``; the forward
    velocity comes from the main body's ``xpos``; healthy while the state is finite and the
    torso height ``qpos[2]`` is inside ``healthy_z_range`` (inclusive). The observation ends
    with the clipped external contact forces of every body but the world (``cfrc_ext``).
    """

    gymnasium_id = "Ant-v5"
    xml_file = "ant.xml"
    frame_skip = 5
    reset_noise_scale = 0.1
    qvel_noise = "normal"

    def __init__(
        self,
        num_envs: int,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 0.5,
        contact_cost_weight: float = 5e-4,
        healthy_reward: float = 1.0,
        main_body: int | str = 1,
        terminate_when_unhealthy: bool = True,
        healthy_z_range: tuple[float, float] = (0.2, 1.0),
        contact_force_range: tuple[float, float] = (-1.0, 1.0),
        exclude_current_positions_from_observation: bool = True,
        include_cfrc_ext_in_observation: bool = True,
        **kwargs,
    ):
        self._forward_reward_weight = float(forward_reward_weight)
        self._ctrl_cost_weight = float(ctrl_cost_weight)
        self._contact_cost_weight = float(contact_cost_weight)
        self._healthy_reward = float(healthy_reward)
        self._main_body_key = main_body
        self._terminate_when_unhealthy = bool(terminate_when_unhealthy)
        self._healthy_z_range = _check_range("healthy_z_range", healthy_z_range)
        self._contact_force_range = _check_range("contact_force_range", contact_force_range)
        self._exclude_current_positions = bool(exclude_current_positions_from_observation)
        self._include_cfrc_ext = bool(include_cfrc_ext_in_observation)
        # Contact forces are computed only when something reads them.
        self.needs_cfrc_ext = self._include_cfrc_ext or self._contact_cost_weight != 0.0
        super().__init__(num_envs, **kwargs)
        try:
            self._main_body = self.model.body(main_body).id
        except (KeyError, IndexError) as error:
            raise ValueError(
                f"main_body={main_body!r} is not a body of {self.xml_file}; give a body id or "
                "name, e.g. 1 or 'torso'"
            ) from error

    def observation_size(self) -> int:
        size = self.model.nq + self.model.nv - 2 * self._exclude_current_positions
        return size + (self.model.nbody - 1) * 6 * self._include_cfrc_ext

    def _contact_forces(self) -> torch.Tensor:
        return self.backend.cfrc_ext().clamp(*self._contact_force_range)

    def observe(self) -> torch.Tensor:
        position = self.qpos[:, 2:] if self._exclude_current_positions else self.qpos
        parts = [position, self.qvel]
        if self._include_cfrc_ext:
            parts.append(self._contact_forces()[:, 1:].flatten(1))
        return torch.cat(parts, dim=1)

    def position_before(self) -> torch.Tensor:
        return self.backend.xpos[:, self._main_body, :2].clone()

    def is_healthy(self) -> torch.Tensor:
        """Bool ``(num_envs,)``: finite state and torso height inside ``healthy_z_range``."""
        finite = torch.isfinite(self.qpos).all(dim=1) & torch.isfinite(self.qvel).all(dim=1)
        low, high = self._healthy_z_range
        z = self.qpos[:, 2]
        return finite & (low <= z) & (z <= high)

    def evaluate(self, before: torch.Tensor, action: torch.Tensor) -> Terms:
        xy_velocity = (self.backend.xpos[:, self._main_body, :2] - before) / self.dt
        healthy = self.is_healthy()
        components = {
            "forward_reward": self._forward_reward_weight * xy_velocity[:, 0],
            "healthy_reward": healthy.to(torch.float64) * self._healthy_reward,
            "ctrl_cost": -self._ctrl_cost_weight * action.square().sum(dim=1),
        }
        if self.needs_cfrc_ext:
            contact = self._contact_forces().square().sum(dim=(1, 2))
            components["contact_cost"] = -self._contact_cost_weight * contact
        else:
            components["contact_cost"] = torch.zeros_like(components["ctrl_cost"])
        terminated = ~healthy if self._terminate_when_unhealthy else torch.zeros_like(healthy)
        info = {
            "x_position": self.qpos[:, 0].clone(),
            "y_position": self.qpos[:, 1].clone(),
            "distance_from_origin": self.qpos[:, :2].norm(dim=1),
            "x_velocity": xy_velocity[:, 0],
            "y_velocity": xy_velocity[:, 1],
            "reward_forward": components["forward_reward"],
            "reward_ctrl": components["ctrl_cost"],
            "reward_contact": components["contact_cost"],
            "reward_survive": components["healthy_reward"],
        }
        return components, terminated, info


class InvertedPendulumEnv(MujocoEnv):
    """Gymnasium's ``InvertedPendulum-v5``, batched: balance a pole on a cart.

    Reward 1 per step while the pole is within 0.2 rad of upright; the episode ends (reward 0
    on that step) when it leaves that range or the observation is not finite.
    """

    gymnasium_id = "InvertedPendulum-v5"
    xml_file = "inverted_pendulum.xml"
    frame_skip = 2
    reset_noise_scale = 0.01

    def observation_size(self) -> int:
        return self.model.nq + self.model.nv

    def observe(self) -> torch.Tensor:
        return torch.cat([self.qpos, self.qvel], dim=1)

    def position_before(self) -> torch.Tensor:
        return self.qpos[:, 0].clone()

    def evaluate(self, before: torch.Tensor, action: torch.Tensor) -> Terms:
        # Gymnasium's test on the observation, read from the state it is made of
        # (observation column 1 is the pole angle qpos[1]).
        finite = torch.isfinite(self.qpos).all(dim=1) & torch.isfinite(self.qvel).all(dim=1)
        terminated = ~finite | (self.qpos[:, 1].abs() > 0.2)
        survive = (~terminated).to(torch.float64)
        return {"healthy_reward": survive}, terminated, {"reward_survive": survive}
