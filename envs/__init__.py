"""Batched environments in torch, on CPU or GPU, with Gymnasium's dynamics, and their descriptions.

:func:`make` builds a batched env by id; :func:`describe` names the variables of an env's
observation (what reward programs and the LLM policy's codecs know of it).

Example::

    >>> from rewardlab import envs
    >>> env = envs.make("CartPole-v1", num_envs=4096, device="cpu", seed=0)
    >>> obs, info = env.reset()
    >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
"""

from rewardlab.envs import (
    batched_minigrid,  # noqa: F401  (registers the batched MiniGrid ids)
    deepsea,  # noqa: F401  (registers DeepSea-v0)
    fruit,  # noqa: F401  (registers FruitCollection-v0 and FruitCollection-Large-v0)
    mujoco,  # noqa: F401  (registers the MuJoCo v5 tasks; making one needs the mujoco extra)
)
from rewardlab.envs.classic import (
    AcrobotEnv,
    CartPoleEnv,
    ContinuousMountainCarEnv,
    MountainCarEnv,
    PendulumEnv,
)
from rewardlab.envs.core import BatchedEnv, BatchedWrapper, WholeNumberBox
from rewardlab.envs.descriptions import (
    EnvDescription,
    describe,
    register_description,
    registered_descriptions,
)
from rewardlab.envs.gymnasium_env import GymnasiumBatchedEnv
from rewardlab.envs.mujoco import descriptions as _mujoco_descriptions  # noqa: F401  (registers them)
from rewardlab.envs.registration import check_id, make, register, register_family, registered

register("CartPole-v1", CartPoleEnv)
register("MountainCar-v0", MountainCarEnv)
register("MountainCarContinuous-v0", ContinuousMountainCarEnv)
register("Acrobot-v1", AcrobotEnv)
register("Pendulum-v1", PendulumEnv)

__all__ = [
    "AcrobotEnv",
    "BatchedEnv",
    "BatchedWrapper",
    "CartPoleEnv",
    "ContinuousMountainCarEnv",
    "EnvDescription",
    "GymnasiumBatchedEnv",
    "MountainCarEnv",
    "PendulumEnv",
    "WholeNumberBox",
    "check_id",
    "describe",
    "make",
    "register",
    "register_description",
    "register_family",
    "registered",
    "registered_descriptions",
]
