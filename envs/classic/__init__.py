"""Gymnasium's classic-control tasks as batched torch envs."""

from envs.classic.cartpole import CartPoleEnv

__all__ = ["CartPoleEnv"]
