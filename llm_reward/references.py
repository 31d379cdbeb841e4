"""Reference reward programs: each env's own (sparse) reward and a human-written dense one.

A search needs baselines: Eureka normalises a program's score as
``(method - sparse) / |human - sparse|``. Both references are reward programs in source
form, so they go through the same checks, sandbox and training as any candidate:

- ``"sparse"`` reproduces the env's own reward exactly (one component, ``"task"``);
- ``"human"`` is the env's reward plus potential-based shaping
  ``F = gamma * phi(s') * (1 - terminated) - phi(s)`` with the formula of the env's built-in
  potential in ``shaping.potentials`` (cart-pole margin, mountain-car energy, acrobot tip
  height, pendulum energy; weights 1, 100 (continuous: 10, goal at 0.45), 10 and 5) and
  ``gamma = 0.99``, PPO's default discount; components ``"task"`` and ``"shaping"``.
  Shaping of this form leaves the optimal policy unchanged.

    >>> import llm_reward
    >>> programs = llm_reward.reference_programs("CartPole-v1")
    >>> sorted(programs)
    ['human', 'sparse']

Other issues add theirs with :func:`register_reference_programs`.
"""

from __future__ import annotations

import textwrap

from llm_reward.program import RewardProgram

__all__ = ["reference_programs", "register_reference_programs", "registered_reference_programs"]

_CARTPOLE_HUMAN = '''
import math

import torch

GAMMA = 0.99
THETA_MAX = 12 * 2 * math.pi / 360
X_MAX = 2.4


def potential(x, theta):
    """How far the pole and cart are from failing (shaping.potentials.CartPoleUpright)."""
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

GAMMA = 0.99
GRAVITY = 0.0025
GOAL_POSITION = {goal}
WEIGHT = {weight}
GOAL_ENERGY = GRAVITY / 3 * math.sin(3 * GOAL_POSITION)
VALLEY_ENERGY = -GRAVITY / 3


def potential(position, velocity):
    """Mechanical energy relative to the goal's (shaping.potentials.MountainCarEnergy)."""
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

GAMMA = 0.99
WEIGHT = 10.0


def potential(tip_height):
    """Height of the tip relative to the goal line (shaping.potentials.AcrobotTipHeight)."""
    return WEIGHT * (tip_height - 1.0) / 3.0


def compute_reward(tip_height, next_tip_height, terminated):
    task = terminated.float() - 1.0
    alive = 1.0 - terminated.float()
    shaping = GAMMA * potential(next_tip_height) * alive - potential(tip_height)
    return task + shaping, {"task": task, "shaping": shaping}
'''

_PENDULUM_HUMAN = '''
import torch

GAMMA = 0.99
WEIGHT = 5.0
UPRIGHT_ENERGY = 3 * 10.0 / (2 * 1.0)


def potential(cos_theta, theta_dot):
    """Distance from the energy of resting upright (shaping.potentials.PendulumEnergy)."""
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
        "human": _MOUNTAIN_CAR_HUMAN.format(goal=0.5, weight=100.0, task="-torch.ones_like(position)"),
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


def register_reference_programs(env_id: str, sparse: str, human: str, overwrite: bool = False) -> None:
    """Add the reference programs of ``env_id`` (both are checked now).

    :param env_id: the env id.
    :param sparse: source of a program reproducing the env's own reward.
    :param human: source of a human-written dense reward program.
    :param overwrite: replace programs already registered for ``env_id``.
    :raises ValueError: ``env_id`` has programs and ``overwrite`` is False.
    :raises llm_reward.CheckError: a source fails the static checks.
    """
    if env_id in _SOURCES and not overwrite:
        raise ValueError(f"reference programs of {env_id!r} are registered; pass overwrite=True")
    for source in (sparse, human):
        RewardProgram.from_source(textwrap.dedent(source)).check(env_id)
    _SOURCES[env_id] = {"sparse": sparse, "human": human}


def registered_reference_programs() -> list[str]:
    """The env ids with reference programs, sorted."""
    return sorted(_SOURCES)


def reference_programs(env_id: str) -> dict[str, RewardProgram]:
    """``{"sparse": ..., "human": ...}``: the env's own reward and a human-written dense one.

    :param env_id: an env id with reference programs (:func:`registered_reference_programs`).
    :raises ValueError: there are none for ``env_id``.
    """
    if env_id not in _SOURCES:
        raise ValueError(
            f"no reference programs for env_id={env_id!r}; known: "
            f"{', '.join(registered_reference_programs())}"
        )
    return {
        kind: RewardProgram.from_source(textwrap.dedent(source).lstrip("\n"))
        for kind, source in _SOURCES[env_id].items()
    }
