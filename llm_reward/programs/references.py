"""Reference reward programs: each env's own (sparse) reward and a human-written dense one.

A search needs baselines: Eureka normalises a program's score as
``(method - sparse) / |human - sparse|``. Both references are reward programs in source
form, so they go through the same checks, sandbox and training as any candidate:

- ``"sparse"`` reproduces the env's own reward exactly (one component, ``"task"``);
- ``"human"`` is the env's reward plus potential-based shaping
  ``F = gamma * phi(s') * (1 - terminated) - phi(s)`` with the formula of the env's built-in
  potential in ``rewardlab.shaping.potentials`` (cart-pole margin, mountain-car energy, acrobot tip
  height, pendulum energy; weights 1, 100 (continuous: 10, goal at 0.45), 10 and 5) and
  ``GAMMA`` the discount of the learner that trains on it (``reference_programs(env_id,
  gamma)``; a source writes ``$gamma`` where it goes); components ``"task"`` and ``"shaping"``.
  Shaping of this form leaves the optimal policy unchanged, at that discount only: at any
  other, the term no longer telescopes and is a dense bonus of its own.

MuJoCo tasks (Gymnasium's v5 locomotion): ``"human"`` is Gymnasium's own dense reward, so
it is the ``"sparse"`` one. The observation holds the velocities at the end of each step,
not the x displacement over it that the forward reward divides by the step's duration, so
their programs take the mean of the x velocity before and after the step: per step it
can be off by a quarter of the reward's typical size (HalfCheetah, under random actions),
over an episode by 1-4% of the return; every other term is exact. The new
behaviours (``HalfCheetah-Backward-v0``, ``Hopper-Backward-v0``, ``Ant-TurnInPlace-v0``)
reproduce their success reward exactly as ``"sparse"``; ``"human"`` is a hand-written
dense reward: the success reward (times 100 where a healthy bonus would otherwise make
ending the episode costly, 1 / (1 - gamma)) plus the behaviour's velocity, a healthy
bonus and a control cost (Gymnasium's; Hopper's healthy bonus and the ant's healthy bonus
and control cost are a tenth of Gymnasium's, and the ant's turning rate pays less the
further it drifts from the start, see their programs).

    >>> from rewardlab import llm_reward
    >>> programs = llm_reward.reference_programs("CartPole-v1")
    >>> sorted(programs)
    ['human', 'sparse']

Other issues add theirs with :func:`register_reference_programs`.
"""

from __future__ import annotations

import re
import textwrap

from rewardlab.agents.ppo import PPOConfig
from rewardlab.envs.mujoco.behaviours import AntTurnInPlaceEnv, HopperBackwardEnv
from rewardlab.llm_reward.programs.source import RewardProgram

__all__ = [
    "SHAPING", "own_reward_program", "reference_programs", "register_reference_programs",
    "registered_reference_programs",
]

#: the component of a human reference that holds its potential-based shaping term
SHAPING = "shaping"
#: where a reference source writes the learner's discount
_GAMMA = re.compile(r"\$gamma\b")

_CARTPOLE_HUMAN = '''
import math

import torch

GAMMA = $gamma
THETA_MAX = 12 * 2 * math.pi / 360
X_MAX = 2.4


def potential(x, theta):
    """How far the pole and cart are from failing (rewardlab.shaping.potentials.CartPoleUpright)."""
    upright = torch.clamp(1 - (theta / THETA_MAX) ** 2, min=0.0)
    centred = torch.clamp(1 - (x / X_MAX) ** 2, min=0.0)
    return 0.5 * (upright + centred)


def compute_reward(x, theta, next_x, next_theta, terminated):
    task = torch.ones_like(x)
    alive = 1.0 - terminated.float()
    shaping = GAMMA * potential(next_x, next_theta) * alive - potential(x, theta)
    return task + shaping, {"task": task, "shaping": shaping}
'''

_MOUNTAIN_CAR_HUMAN = '''
import math

import torch

GAMMA = $gamma
GRAVITY = 0.0025
GOAL_POSITION = {goal}
WEIGHT = {weight}
GOAL_ENERGY = GRAVITY / 3 * math.sin(3 * GOAL_POSITION)
VALLEY_ENERGY = -GRAVITY / 3


def potential(position, velocity):
    """Mechanical energy relative to the goal's (rewardlab.shaping.potentials.MountainCarEnergy)."""
    energy = 0.5 * velocity**2 + GRAVITY / 3 * torch.sin(3 * position)
    return WEIGHT * (energy - GOAL_ENERGY) / (GOAL_ENERGY - VALLEY_ENERGY)


def compute_reward(position, velocity, next_position, next_velocity, action, terminated):
    task = {task}
    alive = 1.0 - terminated.float()
    shaping = GAMMA * potential(next_position, next_velocity) * alive - potential(position, velocity)
    return task + shaping, {{"task": task, "shaping": shaping}}
'''

_ACROBOT_HUMAN = '''
import torch

GAMMA = $gamma
WEIGHT = 10.0


def potential(tip_height):
    """Height of the tip relative to the goal line (rewardlab.shaping.potentials.AcrobotTipHeight)."""
    return WEIGHT * (tip_height - 1.0) / 3.0


def compute_reward(tip_height, next_tip_height, terminated):
    task = terminated.float() - 1.0
    alive = 1.0 - terminated.float()
    shaping = GAMMA * potential(next_tip_height) * alive - potential(tip_height)
    return task + shaping, {"task": task, "shaping": shaping}
'''

_PENDULUM_HUMAN = '''
import torch

GAMMA = $gamma
WEIGHT = 5.0
UPRIGHT_ENERGY = 3 * 10.0 / (2 * 1.0)


def potential(cos_theta, theta_dot):
    """Distance from the energy of resting upright (rewardlab.shaping.potentials.PendulumEnergy)."""
    energy = 0.5 * theta_dot**2 + UPRIGHT_ENERGY * cos_theta
    return -WEIGHT * torch.abs(energy - UPRIGHT_ENERGY) / (2 * UPRIGHT_ENERGY)


def compute_reward(theta, theta_dot, cos_theta, next_cos_theta, next_theta_dot, action):
    torque = torch.clamp(action, -2.0, 2.0)
    task = -(theta**2 + 0.1 * theta_dot**2 + 0.001 * torque**2)
    shaping = GAMMA * potential(next_cos_theta, next_theta_dot) - potential(cos_theta, theta_dot)
    return task + shaping, {"task": task, "shaping": shaping}
'''


def _sparse(arguments: str, task: str) -> str:
    return f'''
import torch


def compute_reward({arguments}):
    task = {task}
    return task, {{"task": task}}
'''


_SOURCES: dict[str, dict[str, str]] = {
    "CartPole-v1": {
        "sparse": _sparse("x", "torch.ones_like(x)"),
        "human": _CARTPOLE_HUMAN,
    },
    "MountainCar-v0": {
        "sparse": _sparse("position", "-torch.ones_like(position)"),
        "human": _MOUNTAIN_CAR_HUMAN.format(
            goal=0.5, weight=100.0, task="-torch.ones_like(position)"
        ),
    },
    "MountainCarContinuous-v0": {
        "sparse": _sparse("action, terminated", "100.0 * terminated.float() - 0.1 * action**2"),
        "human": _MOUNTAIN_CAR_HUMAN.format(
            goal=0.45, weight=10.0, task="100.0 * terminated.float() - 0.1 * action**2"
        ),
    },
    "Acrobot-v1": {
        "sparse": _sparse("terminated", "terminated.float() - 1.0"),
        "human": _ACROBOT_HUMAN,
    },
    "Pendulum-v1": {
        "sparse": _sparse(
            "theta, theta_dot, action",
            "-(theta**2 + 0.1 * theta_dot**2 + 0.001 * torch.clamp(action, -2.0, 2.0) ** 2)",
        ),
        "human": _PENDULUM_HUMAN,
    },
}


# ------------------------------------------------------------------------ MuJoCo
def _gymnasium_reward(healthy: bool, ctrl_cost: float, contact_cost: float = 0.0) -> str:
    """A MuJoCo v5 locomotion task's own reward as a program (forward velocity as the step's mean)."""
    arguments = "x_velocity, next_x_velocity, action"
    task = f"0.5 * (x_velocity + next_x_velocity) - {ctrl_cost!r} * (action**2).sum(dim=-1)"
    if healthy:
        arguments += ", terminated"
        task += " + (1.0 - terminated.float())"
    if contact_cost:
        arguments += ", next_contact_forces_squared"
        task += f" - {contact_cost!r} * next_contact_forces_squared"
    return _sparse(arguments, task)


_INVERTED_PENDULUM = _sparse("terminated", "1.0 - terminated.float()")

_HALF_CHEETAH_BACKWARD_SPARSE = _sparse("terminated", "terminated.float()")

_HALF_CHEETAH_BACKWARD_HUMAN = '''
import torch

DT = 0.05


def compute_reward(x, next_x, action, terminated):
    success = terminated.float()
    backward = -(next_x - x) / DT
    ctrl_cost = -0.1 * (action**2).sum(dim=-1)
    return success + backward + ctrl_cost, {"success": success, "backward": backward, "ctrl_cost": ctrl_cost}
'''

# The sparse programs keep their constants inline: the evolve proposer borrows the function alone.
_HOPPER_BACKWARD_SUCCESS = _sparse(
    "next_x, next_torso_z, next_torso_angle, terminated",
    f"(terminated & (next_x <= {HopperBackwardEnv.target_x!r}) & (next_torso_z > 0.7) "
    "& (next_torso_angle.abs() < 0.2)).float()",
)

# Hopper-v5's healthy reward of 1 a step teaches standing still (PPO learned to stand and
# never hopped back); a tenth of it, with the backward velocity weighted twice, hops to the
# target at the default budget (benchmarks/results/search_budgets_mujoco_hopper.md).
_HOPPER_BACKWARD_HUMAN = f"""
import torch

TARGET_X = {HopperBackwardEnv.target_x!r}
DT = 0.008
SUCCESS_BONUS = 100.0
BACKWARD_WEIGHT = 2.0
HEALTHY_REWARD = 0.1


def upright(torso_z, torso_angle):
    return (torso_z > 0.7) & (torso_angle.abs() < 0.2)


def compute_reward(x, next_x, next_torso_z, next_torso_angle, action, terminated):
    still_up = upright(next_torso_z, next_torso_angle)
    success = SUCCESS_BONUS * (terminated & (next_x <= TARGET_X) & still_up).float()
    backward = BACKWARD_WEIGHT * -(next_x - x) / DT
    healthy = HEALTHY_REWARD * (still_up & ~terminated).float()
    ctrl_cost = -0.001 * (action**2).sum(dim=-1)
    reward = success + backward + healthy + ctrl_cost
    return reward, {{"success": success, "backward": backward, "healthy": healthy, "ctrl_cost": ctrl_cost}}
"""

_ANT_TURN_SUCCESS = _sparse(
    "next_turned, next_distance_from_start, next_torso_z, terminated",
    f"(terminated & (next_turned >= {AntTurnInPlaceEnv.target_turn!r}) "
    f"& (next_distance_from_start <= {AntTurnInPlaceEnv.radius!r}) & (next_torso_z >= 0.2) "
    "& (next_torso_z <= 1.0)).float()",
)

# Success ends the episode, so Ant-v5's healthy reward of 1 a step competes with the
# success bonus (a discounted stream of it is worth about as much): it is a tenth of
# Ant-v5's here, and so is the control cost (0.5), the pair that trained best of the
# weights tried in exploratory trainings, with PPO's starting exploration noise lowered
# (log_std_init -1.5, llm_reward/search/budgets.py). The turning reward is scaled by
# 1 - (distance / radius)**2: the ant's failures are leaving the circle while it spins,
# and so turning pays less the further it has drifted (nothing at the edge); a larger
# distance penalty alone trained worse in exploratory trainings. What it reaches is
# measured in benchmarks/results/search_budgets_ant.md.
_ANT_TURN_HUMAN = f"""
import torch

TARGET_TURN = {AntTurnInPlaceEnv.target_turn!r}
RADIUS = {AntTurnInPlaceEnv.radius!r}
DT = 0.05
SUCCESS_BONUS = 100.0
HEALTHY_REWARD = 0.1
CTRL_COST = 0.05


def compute_reward(turned, next_turned, next_distance_from_start, next_torso_z, action, terminated):
    healthy_now = (next_torso_z >= 0.2) & (next_torso_z <= 1.0)
    inside = next_distance_from_start <= RADIUS
    done_well = terminated & healthy_now & inside & (next_turned >= TARGET_TURN)
    success = SUCCESS_BONUS * done_well.float()
    centred = 1.0 - (next_distance_from_start / RADIUS) ** 2
    turning = (next_turned - turned) / DT * centred
    healthy = HEALTHY_REWARD * ((1.0 - terminated.float()) + done_well.float())
    drift = -((next_distance_from_start / RADIUS) ** 2)
    ctrl_cost = -CTRL_COST * (action**2).sum(dim=-1)
    reward = success + turning + healthy + drift + ctrl_cost
    components = {{"success": success, "turning": turning, "healthy": healthy, "drift": drift,
                  "ctrl_cost": ctrl_cost}}
    return reward, components
"""


def _same(source: str) -> dict[str, str]:
    return {"sparse": source, "human": source}


_SOURCES.update({
    "HalfCheetah-v5": _same(_gymnasium_reward(healthy=False, ctrl_cost=0.1)),
    "Hopper-v5": _same(_gymnasium_reward(healthy=True, ctrl_cost=0.001)),
    "Walker2d-v5": _same(_gymnasium_reward(healthy=True, ctrl_cost=0.001)),
    "Ant-v5": _same(_gymnasium_reward(healthy=True, ctrl_cost=0.5, contact_cost=5e-4)),
    "InvertedPendulum-v5": _same(_INVERTED_PENDULUM),
    "HalfCheetah-Backward-v0": {
        "sparse": _HALF_CHEETAH_BACKWARD_SPARSE, "human": _HALF_CHEETAH_BACKWARD_HUMAN
    },
    "Hopper-Backward-v0": {"sparse": _HOPPER_BACKWARD_SUCCESS, "human": _HOPPER_BACKWARD_HUMAN},
    "Ant-TurnInPlace-v0": {"sparse": _ANT_TURN_SUCCESS, "human": _ANT_TURN_HUMAN},
})  # fmt: skip


def register_reference_programs(
    env_id: str, sparse: str, human: str, overwrite: bool = False
) -> None:
    """Add the reference programs of ``env_id`` (both are checked now).

    :param env_id: the env id.
    :param sparse: source of a program reproducing the env's own reward.
    :param human: source of a human-written dense reward program; where it writes
        ``$gamma`` (``GAMMA = $gamma``), :func:`reference_programs` puts the discount of the
        learner that trains on it.
    :param overwrite: replace programs already registered for ``env_id``.
    :raises ValueError: ``env_id`` has programs and ``overwrite`` is False.
    :raises llm_reward.CheckError: a source fails the static checks.
    """
    if env_id in _SOURCES and not overwrite:
        raise ValueError(f"reference programs of {env_id!r} are registered; pass overwrite=True")
    for source in (sparse, human):
        _program(source, default_gamma()).check(env_id)
    _SOURCES[env_id] = {"sparse": sparse, "human": human}


_OWN_REWARD = _sparse("env_reward", "env_reward")


def registered_reference_programs() -> list[str]:
    """The env ids with reference programs, sorted."""
    return sorted(_SOURCES)


def default_gamma() -> float:
    """The discount of the shaping term when no learner's is given: rewardlab's PPO's default."""
    return PPOConfig().discount(SHAPING)


def reference_programs(env_id: str, gamma: float | None = None) -> dict[str, RewardProgram]:
    """``{"sparse": ..., "human": ...}``: the env's own reward and a human-written dense one.

    :param env_id: an env id with reference programs (:func:`registered_reference_programs`).
    :param gamma: the discount of the learner that trains on them (its config's
        ``discount("shaping")``): the human reference's shaping term telescopes at it alone;
        None: :func:`default_gamma`.
    :raises ValueError: there are none for ``env_id``, or ``gamma`` is not in [0, 1].
    """
    if env_id not in _SOURCES:
        raise ValueError(
            f"no reference programs for env_id={env_id!r}; known: "
            f"{', '.join(registered_reference_programs())}"
        )
    gamma = default_gamma() if gamma is None else gamma
    if isinstance(gamma, bool) or not isinstance(gamma, int | float) or not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be a number in [0, 1] (the learner's discount), got "
                         f"gamma={gamma!r}")
    return {kind: _program(source, float(gamma)) for kind, source in _SOURCES[env_id].items()}


def own_reward_program() -> RewardProgram:
    """The sparse reference of an env without reference programs of its own: the reward the
    env itself pays (a reward program's ``env_reward``), so that a search on a user's env
    compares its best program with the env's own reward, and the evolve proposer can build
    on it."""
    return _program(_OWN_REWARD, default_gamma())


def _program(source: str, gamma: float) -> RewardProgram:
    """The program of a reference source, with ``gamma`` written where it says ``$gamma``."""
    return RewardProgram.from_source(_GAMMA.sub(repr(gamma), textwrap.dedent(source).lstrip("\n")))
