"""Gymnasium's classic-control tasks as batched torch envs."""

from envs.classic.acrobot import AcrobotEnv
from envs.classic.cartpole import CartPoleEnv
from envs.classic.mountain_car import ContinuousMountainCarEnv, MountainCarEnv
from envs.classic.pendulum import PendulumEnv

__all__ = [
    "AcrobotEnv",
    "CartPoleEnv",
    "ContinuousMountainCarEnv",
    "MountainCarEnv",
    "PendulumEnv",
]
