"""Batched environments in torch, on CPU or GPU, with Gymnasium's dynamics.

Example::

    >>> import envs
    >>> env = envs.make("CartPole-v1", num_envs=4096, device="cpu", seed=0)
    >>> obs, info = env.reset()
    >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
"""

from envs import deepsea  # noqa: F401  (registers DeepSea-v0)
from envs.classic import CartPoleEnv
from envs.core import BatchedEnv, BatchedWrapper
from envs.registration import make, register, registered

register("CartPole-v1", CartPoleEnv)

__all__ = ["BatchedEnv", "BatchedWrapper", "CartPoleEnv", "make", "register", "registered"]
