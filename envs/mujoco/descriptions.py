"""Descriptions of the batched MuJoCo tasks and behaviours, registered when ``rewardlab.envs`` is imported.

Text2Reward style, as :mod:`rewardlab.envs.descriptions`: every variable is read from the
observation of the env made with its default arguments (Gymnasium's v5 layouts, see
``envs/mujoco``), so describing an env never imports MuJoCo. Besides the observed
columns, the descriptions derive what a reward writer reaches for: the torso's real
height, its uprightness and heading from Ant's quaternion, the yaw rate about the
vertical, whether each of Ant's feet touches something (from the contact forces in the
observation).

- ``HalfCheetah-v5``, ``Hopper-v5``, ``Walker2d-v5``, ``Ant-v5``, ``InvertedPendulum-v5``:
  scored by the env's own return (InvertedPendulum: lasting 1000 steps is a success);
- ``HalfCheetah-Backward-v0``, ``Hopper-Backward-v0``, ``Ant-TurnInPlace-v0``
  (:mod:`rewardlab.envs.mujoco.behaviours`): scored by their success rules, read from the last
  observation.

    >>> from rewardlab import envs
    >>> envs.describe("Hopper-v5").state_names[:3]
    ('torso_z', 'torso_angle', 'thigh_angle')

Velocities of the planar runners and Ant are MuJoCo's ``qvel`` at the end of the step;
the env's forward reward is the torso's x displacement over the step divided by its
duration, which the observation of the standard tasks does not hold (the behaviours
observe x).
"""

from __future__ import annotations

import math

import torch

from rewardlab.envs.descriptions import (
    ActionVariable,
    EnvDescription,
    Reader,
    StateVariable,
    column,
    register_description,
    success_if_truncated,
)
from rewardlab.envs.mujoco.behaviours import (
    AntTurnInPlaceEnv,
    HalfCheetahBackwardEnv,
    HopperBackwardEnv,
)

__all__ = ["DESCRIPTIONS"]

# Hopper-v5's and Walker2d-v5's velocities are clipped to this in their observations.
VELOCITY_CLIP = 10.0
# Health rules of the default arguments (envs/mujoco/tasks.py).
HOPPER_Z_MIN, HOPPER_ANGLE_MAX = 0.7, 0.2
WALKER_Z_RANGE, WALKER_ANGLE_MAX = (0.8, 2.0), 1.0
ANT_Z_RANGE = (0.2, 1.0)
# HalfCheetah's torso sits 0.7 m above its rootz joint's zero.
HALF_CHEETAH_TORSO_HEIGHT = 0.7


def _shifted(index: int, offset: float) -> Reader:
    def read(obs: torch.Tensor) -> torch.Tensor:
        return obs[:, index] + offset

    return read


# ---------------------------------------------------------------- planar runners
# (variable prefix, meaning, Gymnasium's joint, joint range in rad)
HALF_CHEETAH_JOINTS = (
    ("back_thigh", "back thigh joint (bthigh)", (-0.52, 1.05)),
    ("back_shin", "back shin joint (bshin)", (-0.785, 0.785)),
    ("back_foot", "back foot joint (bfoot)", (-0.4, 0.785)),
    ("front_thigh", "front thigh joint (fthigh)", (-1.0, 0.7)),
    ("front_shin", "front shin joint (fshin)", (-1.2, 0.87)),
    ("front_foot", "front foot joint (ffoot)", (-0.5, 0.5)),
)
_LEG = (-150 * math.pi / 180, 0.0)
_FOOT = (-math.pi / 4, math.pi / 4)
HOPPER_JOINTS = (
    ("thigh", "thigh joint (hip)", _LEG),
    ("leg", "leg joint (knee)", _LEG),
    ("foot", "foot joint (ankle)", _FOOT),
)
WALKER_JOINTS = (
    ("right_thigh", "right hip joint (thigh_joint)", _LEG),
    ("right_leg", "right knee joint (leg_joint)", _LEG),
    ("right_foot", "right ankle joint (foot_joint)", _FOOT),
    ("left_thigh", "left hip joint (thigh_left_joint)", _LEG),
    ("left_leg", "left knee joint (leg_left_joint)", _LEG),
    ("left_foot", "left ankle joint (foot_left_joint)", _FOOT),
)


def _planar_state(
    joints: tuple[tuple[str, str, tuple[float, float]], ...],
    height_offset: float,
    velocity_clip: float | None,
    observes_x: bool,
) -> tuple[StateVariable, ...]:
    """HalfCheetah's, Hopper's or Walker2d's observation: ``qpos[1:]`` (or all of ``qpos``), then ``qvel``."""
    first = 1 if observes_x else 0
    state = []
    if observes_x:
        state.append(StateVariable("x", "x position of the torso (+x is forward; episodes start within "
                                   "0.1 m of x = 0)", "m", read=column(0)))
    height = ("height of the torso's centre above the ground", "m")
    state.append(StateVariable("torso_z", *height, read=_shifted(first, height_offset) if height_offset
                               else column(first)))
    state.append(StateVariable("torso_angle", "pitch of the torso, 0 = as at the start, positive = "
                               "tilted nose-down (top leaning forward)", "rad", read=column(first + 1)))
    for index, (name, meaning, (low, high)) in enumerate(joints):
        state.append(StateVariable(f"{name}_angle", f"angle of the {meaning}", "rad", low, high,
                                   column(first + 2 + index)))
    velocities = first + 2 + len(joints)
    low, high = (None, None) if velocity_clip is None else (-velocity_clip, velocity_clip)
    clipped = "" if velocity_clip is None else f" (clipped to +-{velocity_clip:g})"
    state += [
        StateVariable("x_velocity", f"forward velocity of the torso{clipped}", "m/s", low, high,
                      column(velocities)),
        StateVariable("z_velocity", f"vertical velocity of the torso{clipped}", "m/s", low, high,
                      column(velocities + 1)),
        StateVariable("torso_angular_velocity", f"rate of change of torso_angle{clipped}", "rad/s", low,
                      high, column(velocities + 2)),
    ]
    for index, (name, meaning, _) in enumerate(joints):
        state.append(StateVariable(f"{name}_angular_velocity", f"angular velocity of the {meaning}{clipped}",
                                   "rad/s", low, high, column(velocities + 3 + index)))
    return tuple(state)


def _half_cheetah_state(observes_x: bool) -> tuple[StateVariable, ...]:
    return _planar_state(HALF_CHEETAH_JOINTS, HALF_CHEETAH_TORSO_HEIGHT, None, observes_x)


def _hopper_state(observes_x: bool) -> tuple[StateVariable, ...]:
    return _planar_state(HOPPER_JOINTS, 0.0, VELOCITY_CLIP, observes_x)


def _torques(names: str, count: int, gears: str, costed: bool = True) -> ActionVariable:
    cost = ", the environment's control cost uses them as given" if costed else ""
    return ActionVariable(
        f"joint torques in [-1, 1] on {names} (motor gears {gears} N m per unit); MuJoCo clips them "
        f"to [-1, 1]{cost}", "float32", (count,),
    )


_HALF_CHEETAH_TORQUES = ("back_thigh, back_shin, back_foot, front_thigh, front_shin, front_foot", 6,
                         "120, 90, 60, 120, 60, 30")
_HOPPER_TORQUES = ("thigh, leg, foot", 3, "200")
_ANT_TORQUES = ("hip_1, ankle_1, hip_2, ankle_2, hip_3, ankle_3, hip_4, ankle_4", 8, "150")
_WALKER_TORQUES = ("right_thigh, right_leg, right_foot, left_thigh, left_leg, left_foot", 6, "100")

# ------------------------------------------------------------------------- ant
ANT_HIP = (-math.pi / 6, math.pi / 6)
ANT_ANKLE_UP, ANT_ANKLE_DOWN = (math.pi / 6, 70 * math.pi / 180), (-70 * math.pi / 180, -math.pi / 6)
# (leg, where it points in the torso's frame, ankle range)
ANT_LEGS = (("1", "+x +y", ANT_ANKLE_UP), ("2", "-x +y", ANT_ANKLE_DOWN),
            ("3", "-x -y", ANT_ANKLE_DOWN), ("4", "+x -y", ANT_ANKLE_UP))
ANT_CONTACT_START = 27  # cfrc_ext of bodies 1..13, 6 columns each
ANT_CONTACT_END = ANT_CONTACT_START + 13 * 6
# The lower leg (foot) of leg i is body 3 i + 1.
ANT_FOOT_BODIES = (4, 7, 10, 13)


def _rotation_z_row(obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The third row of the torso's rotation matrix (world z in torso coordinates), from its
    quaternion, which need not have unit length (reset noise is added to it)."""
    w, x, y, z = obs[:, 1], obs[:, 2], obs[:, 3], obs[:, 4]
    norm = w * w + x * x + y * y + z * z
    return 2 * (x * z - w * y) / norm, 2 * (y * z + w * x) / norm, (w * w - x * x - y * y + z * z) / norm


def _torso_up(obs: torch.Tensor) -> torch.Tensor:
    return _rotation_z_row(obs)[2]


def _torso_yaw(obs: torch.Tensor) -> torch.Tensor:
    w, x, y, z = obs[:, 1], obs[:, 2], obs[:, 3], obs[:, 4]
    return torch.atan2(2 * (w * z + x * y), w * w + x * x - y * y - z * z)


def _yaw_rate(obs: torch.Tensor) -> torch.Tensor:
    # The world z component of the angular velocity, which the observation gives in the torso's frame.
    row = _rotation_z_row(obs)
    return row[0] * obs[:, 16] + row[1] * obs[:, 17] + row[2] * obs[:, 18]


def _foot_contact(body: int) -> Reader:
    start = ANT_CONTACT_START + (body - 1) * 6

    def read(obs: torch.Tensor) -> torch.Tensor:
        return (obs[:, start : start + 6].abs().amax(dim=1) > 0).to(obs.dtype)

    return read


def _contact_forces_squared(obs: torch.Tensor) -> torch.Tensor:
    return obs[:, ANT_CONTACT_START:ANT_CONTACT_END].square().sum(dim=1)


def _ant_state() -> tuple[StateVariable, ...]:
    """Ant-v5's observation: ``qpos[2:]``, ``qvel``, then the clipped contact forces."""
    low, high = ANT_Z_RANGE
    state = [
        StateVariable("torso_z", f"height of the torso's centre above the ground (healthy in [{low:g}, "
                      f"{high:g}])", "m", read=column(0)),
        *(StateVariable(f"torso_q{axis}", f"torso orientation quaternion, {axis} component", "", -1.0, 1.0,
                        column(1 + index)) for index, axis in enumerate("wxyz")),
        StateVariable("torso_up", "uprightness: the vertical component of the torso's z axis (1 = upright, "
                      "0 = on its side, -1 = upside down)", "", -1.0, 1.0, _torso_up),
        StateVariable("torso_yaw", "heading: angle of the torso's x axis in the ground plane, "
                      "counter-clockwise from +x", "rad", -math.pi, math.pi, _torso_yaw),
    ]
    for index, (leg, where, ankle) in enumerate(ANT_LEGS):
        state += [
            StateVariable(f"hip_{leg}_angle", f"hip angle of leg {leg} (pointing {where} from the torso)",
                          "rad", *ANT_HIP, column(5 + 2 * index)),
            StateVariable(f"ankle_{leg}_angle", f"ankle angle of leg {leg}", "rad", *ankle, column(6 + 2 * index)),
        ]
    state += [
        StateVariable("x_velocity", "velocity of the torso along the world's x axis (forward)", "m/s",
                      read=column(13)),
        StateVariable("y_velocity", "velocity of the torso along the world's y axis", "m/s", read=column(14)),
        StateVariable("z_velocity", "vertical velocity of the torso", "m/s", read=column(15)),
        *(StateVariable(f"torso_angular_velocity_{axis}", f"angular velocity of the torso about its own "
                        f"{axis} axis", "rad/s", read=column(16 + index)) for index, axis in enumerate("xyz")),
        StateVariable("yaw_rate", "angular velocity of the torso about the world's vertical axis, "
                      "counter-clockwise positive", "rad/s", read=_yaw_rate),
    ]
    for index, (leg, _, _) in enumerate(ANT_LEGS):
        state += [
            StateVariable(f"hip_{leg}_angular_velocity", f"angular velocity of leg {leg}'s hip", "rad/s",
                          read=column(19 + 2 * index)),
            StateVariable(f"ankle_{leg}_angular_velocity", f"angular velocity of leg {leg}'s ankle", "rad/s",
                          read=column(20 + 2 * index)),
        ]
    state += [
        *(StateVariable(f"foot_{leg}_contact", f"1.0 while the lower part of leg {leg} touches the ground "
                        "(or anything), else 0.0", "", 0.0, 1.0, _foot_contact(body))
          for (leg, _, _), body in zip(ANT_LEGS, ANT_FOOT_BODIES, strict=True)),
        StateVariable("contact_forces_squared", "sum of squares of the external contact forces and torques "
                      "on the ant's bodies, each clipped to [-1, 1] (Ant-v5's contact cost is 5e-4 times this)",
                      "", 0.0, 78.0, _contact_forces_squared),
    ]
    return tuple(state)


def _distance(obs: torch.Tensor) -> torch.Tensor:
    return torch.hypot(obs[:, ANT_CONTACT_END], obs[:, ANT_CONTACT_END + 1])


def _turn_state() -> tuple[StateVariable, ...]:
    radius = AntTurnInPlaceEnv.radius
    return (
        *_ant_state(),
        StateVariable("x_from_start", "torso x minus its x when the episode started", "m",
                      read=column(ANT_CONTACT_END)),
        StateVariable("y_from_start", "torso y minus its y when the episode started", "m",
                      read=column(ANT_CONTACT_END + 1)),
        StateVariable("distance_from_start", f"horizontal distance of the torso from where the episode "
                      f"started (the episode ends beyond {radius:g} m)", "m", 0.0, None, _distance),
        StateVariable("turned", "angle the heading (torso_yaw) has turned since the episode started, "
                      "counter-clockwise positive, summed over steps (not wrapped)", "rad",
                      read=column(ANT_CONTACT_END + 2)),
    )


# ----------------------------------------------------------------- success rules
def half_cheetah_backward_success(
    final_obs: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor
) -> torch.Tensor:
    """``HalfCheetah-Backward-v0``: the episode ended with the torso's x <= ``target_x`` (-20 m)."""
    return terminated & (final_obs[:, 0] <= HalfCheetahBackwardEnv.target_x)


def hopper_backward_success(
    final_obs: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor
) -> torch.Tensor:
    """``Hopper-Backward-v0``: the episode ended with x <= -2 m, torso height > 0.7 m and |angle| < 0.2 rad."""
    x, z, angle = final_obs[:, 0], final_obs[:, 1], final_obs[:, 2]
    upright = (z > HOPPER_Z_MIN) & (angle.abs() < HOPPER_ANGLE_MAX)
    return terminated & (x <= HopperBackwardEnv.target_x) & upright


def ant_turn_in_place_success(
    final_obs: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor
) -> torch.Tensor:
    """``Ant-TurnInPlace-v0``: the episode ended having turned >= 2 pi, healthy, within 1 m of the start."""
    low, high = ANT_Z_RANGE
    z, turned = final_obs[:, 0], final_obs[:, ANT_CONTACT_END + 2]
    healthy = torch.isfinite(final_obs).all(dim=1) & (low <= z) & (z <= high)
    inside = _distance(final_obs) <= AntTurnInPlaceEnv.radius
    return terminated & healthy & inside & (turned >= AntTurnInPlaceEnv.target_turn)


# ------------------------------------------------------- partial success (for early stopping)
# How far a state is toward each behaviour's success, 1 at the target: the distance run or
# the angle turned so far over the target's. The health and circle conditions are left out:
# an episode that breaks them ends, and play_episodes counts its best state before that.
def half_cheetah_backward_partial(obs: torch.Tensor) -> torch.Tensor:
    """``HalfCheetah-Backward-v0``: x over the target's -20 m, in [0, 1]."""
    return (obs[:, 0] / HalfCheetahBackwardEnv.target_x).clamp(0.0, 1.0)


def hopper_backward_partial(obs: torch.Tensor) -> torch.Tensor:
    """``Hopper-Backward-v0``: x over the target's -2 m, in [0, 1]."""
    return (obs[:, 0] / HopperBackwardEnv.target_x).clamp(0.0, 1.0)


def ant_turn_in_place_partial(obs: torch.Tensor) -> torch.Tensor:
    """``Ant-TurnInPlace-v0``: the angle turned counter-clockwise over a full turn, in [0, 1]."""
    return (obs[:, ANT_CONTACT_END + 2] / AntTurnInPlaceEnv.target_turn).clamp(0.0, 1.0)


# ------------------------------------------------------------------ descriptions
_PLANAR_RETURN = (
    "the episode return: the sum over steps of the torso's forward velocity (x_velocity, measured as the x "
    "displacement over the step divided by its {dt:g} s){healthy} minus {ctrl:g} * sum(action**2)."
)

DESCRIPTIONS = (
    EnvDescription(
        env_id="HalfCheetah-v5",
        summary=(
            "a planar two-legged cat-like robot runs forward (+x) by applying torques to its six leg "
            "joints. The environment rewards forward velocity and charges 0.1 * sum(action**2); episodes "
            "last 1000 steps of 0.05 s and never end early."
        ),
        state=_half_cheetah_state(observes_x=False),
        action=_torques(*_HALF_CHEETAH_TORQUES),
        success_metric=_PLANAR_RETURN.format(dt=0.05, healthy="", ctrl=0.1),
        terminated_meaning="always False (HalfCheetah episodes only end at the time limit)",
    ),
    EnvDescription(
        env_id="Hopper-v5",
        summary=(
            "a planar one-legged robot hops forward (+x) by applying torques to its thigh, leg and foot "
            "joints. The environment rewards forward velocity, pays 1 per healthy step and charges "
            "0.001 * sum(action**2). The episode ends when the hopper is unhealthy (torso_z <= 0.7, "
            "|torso_angle| >= 0.2, or any other joint angle or velocity beyond +-100) or after 1000 steps "
            "of 0.008 s."
        ),
        state=_hopper_state(observes_x=False),
        action=_torques(*_HOPPER_TORQUES),
        success_metric=_PLANAR_RETURN.format(dt=0.008, healthy=" plus 1 per healthy step", ctrl=0.001),
        terminated_meaning="the hopper became unhealthy (fell) with this step",
    ),
    EnvDescription(
        env_id="Walker2d-v5",
        summary=(
            "a planar two-legged robot walks forward (+x) by applying torques to the hip, knee and ankle "
            "of each leg. The environment rewards forward velocity, pays 1 per healthy step and charges "
            "0.001 * sum(action**2). The episode ends when the walker is unhealthy (torso_z outside "
            f"({WALKER_Z_RANGE[0]:g}, {WALKER_Z_RANGE[1]:g}) or |torso_angle| >= {WALKER_ANGLE_MAX:g}) or "
            "after 1000 steps of 0.008 s."
        ),
        state=_planar_state(WALKER_JOINTS, 0.0, VELOCITY_CLIP, observes_x=False),
        action=_torques(*_WALKER_TORQUES),
        success_metric=_PLANAR_RETURN.format(dt=0.008, healthy=" plus 1 per healthy step", ctrl=0.001),
        terminated_meaning="the walker became unhealthy (fell) with this step",
    ),
    EnvDescription(
        env_id="Ant-v5",
        summary=(
            "a four-legged robot walks forward (+x) on a plane by applying torques to the hip and ankle of "
            "each leg. The environment rewards the torso's x velocity, pays 1 per healthy step and charges "
            "0.5 * sum(action**2) and 5e-4 * contact_forces_squared. The episode ends when the ant is "
            f"unhealthy (torso_z outside [{ANT_Z_RANGE[0]:g}, {ANT_Z_RANGE[1]:g}] or a non-finite state) "
            "or after 1000 steps of 0.05 s."
        ),
        state=_ant_state(),
        action=_torques(*_ANT_TORQUES),
        success_metric=(
            "the episode return: the sum over steps of the torso's x_velocity (measured as the x displacement "
            "over the step divided by its 0.05 s) plus 1 per healthy step minus 0.5 * sum(action**2) minus "
            "5e-4 * contact_forces_squared."
        ),
        terminated_meaning="the ant became unhealthy (fell, flipped or jumped too high) with this step",
    ),
    EnvDescription(
        env_id="InvertedPendulum-v5",
        summary=(
            "push a cart along a rail to keep a pole hinged on it upright. The environment pays 1 per step "
            "while |pole_angle| <= 0.2 rad; the episode ends when it is beyond that or after 1000 steps."
        ),
        state=(
            StateVariable("cart_position", "position of the cart on the rail (0 = centre)", "m", -1.0, 1.0,
                          column(0)),
            StateVariable("pole_angle", "angle of the pole from upright", "rad", -math.pi / 2, math.pi / 2,
                          column(1)),
            StateVariable("cart_velocity", "velocity of the cart", "m/s", read=column(2)),
            StateVariable("pole_angular_velocity", "angular velocity of the pole", "rad/s", read=column(3)),
        ),
        action=ActionVariable("force on the cart in [-3, 3] (clipped)", "float32"),
        success_metric=(
            "episode length = episode return (+1 per step while the pole is up, 1000 at most); an episode "
            "that lasts 1000 steps is a success."
        ),
        success=success_if_truncated,
        terminated_meaning="the pole fell beyond 0.2 rad with this step",
    ),
    EnvDescription(
        env_id="HalfCheetah-Backward-v0",
        summary=(
            "the HalfCheetah robot (a planar two-legged cat-like runner) must run backwards: the episode is "
            f"a success on the first step with x <= {HalfCheetahBackwardEnv.target_x:g} m, which ends it "
            "with the environment's only reward, 1. Otherwise episodes last 1000 steps of 0.05 s."
        ),
        state=_half_cheetah_state(observes_x=True),
        action=_torques(*_HALF_CHEETAH_TORQUES, costed=False),
        success_metric=(
            f"the success rate: the share of episodes that reach x <= {HalfCheetahBackwardEnv.target_x:g} m "
            "within 1000 steps (the episode return is 1 for those, else 0)."
        ),
        success=half_cheetah_backward_success,
        partial_success=half_cheetah_backward_partial,
        terminated_meaning=f"the torso reached x <= {HalfCheetahBackwardEnv.target_x:g} m (success) with this step",
    ),
    EnvDescription(
        env_id="Hopper-Backward-v0",
        summary=(
            "the Hopper robot (a planar one-legged hopper) must hop backwards: the episode is a success on "
            f"the first step with x <= {HopperBackwardEnv.target_x:g} m while torso_z > {HOPPER_Z_MIN:g} and "
            f"|torso_angle| < {HOPPER_ANGLE_MAX:g}, which ends it with the environment's only reward, 1. "
            f"It ends without success when the hopper is unhealthy (torso_z <= {HOPPER_Z_MIN:g}, "
            f"|torso_angle| >= {HOPPER_ANGLE_MAX:g}, or any other joint angle or velocity beyond +-100), "
            "or after 1000 steps of 0.008 s."
        ),
        state=_hopper_state(observes_x=True),
        action=_torques(*_HOPPER_TORQUES, costed=False),
        success_metric=(
            f"the success rate: the share of episodes that reach x <= {HopperBackwardEnv.target_x:g} m "
            "upright before falling and within 1000 steps (the episode return is 1 for those, else 0)."
        ),
        success=hopper_backward_success,
        partial_success=hopper_backward_partial,
        terminated_meaning="the hopper succeeded or became unhealthy (fell) with this step",
    ),
    EnvDescription(
        env_id="Ant-TurnInPlace-v0",
        summary=(
            "the Ant robot (four legs on a plane) must turn counter-clockwise on the spot: the episode is "
            "a success on the first step on which turned >= 2*pi while the ant is healthy (torso_z in "
            f"[{ANT_Z_RANGE[0]:g}, {ANT_Z_RANGE[1]:g}]) and distance_from_start <= "
            f"{AntTurnInPlaceEnv.radius:g} m, which ends it with the environment's only reward, 1. It ends "
            f"without success when distance_from_start > {AntTurnInPlaceEnv.radius:g} m or the ant is "
            "unhealthy, or after 1000 steps of 0.05 s."
        ),
        state=_turn_state(),
        action=_torques(*_ANT_TORQUES, costed=False),
        success_metric=(
            "the success rate: the share of episodes that turn counter-clockwise by a full circle (2*pi) "
            f"within {AntTurnInPlaceEnv.radius:g} m of the start and within 1000 steps (the episode return "
            "is 1 for those, else 0)."
        ),
        success=ant_turn_in_place_success,
        partial_success=ant_turn_in_place_partial,
        terminated_meaning=(
            "the ant succeeded, left the circle around its start or became unhealthy with this step"
        ),
    ),
)

for _description in DESCRIPTIONS:
    register_description(_description)
