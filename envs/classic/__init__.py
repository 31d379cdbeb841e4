"""Gymnasium's classic-control tasks as batched torch envs."""

from rewardlab.envs.classic.acrobot import AcrobotEnv
from rewardlab.envs.classic.cartpole import CartPoleEnv
from rewardlab.envs.classic.mountain_car import ContinuousMountainCarEnv, MountainCarEnv
from rewardlab.envs.classic.pendulum import PendulumEnv

__all__ = [
    "AcrobotEnv",
    "CartPoleEnv",
    "ContinuousMountainCarEnv",
    "MountainCarEnv",
    "PendulumEnv",
]
