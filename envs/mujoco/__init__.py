"""Batched MuJoCo locomotion: Gymnasium's v5 tasks stepped as a batch (the ``mujoco`` extra).

``envs.make("Hopper-v5", num_envs=N, device=...)`` and likewise ``HalfCheetah-v5``,
``Walker2d-v5``, ``Ant-v5`` and ``InvertedPendulum-v5``. The ids are registered whether or
not MuJoCo is installed; making one without it says which extra to install.
"""

from __future__ import annotations

from typing import Any

from envs.registration import register

TASKS = {
    "HalfCheetah-v5": "HalfCheetahEnv",
    "Hopper-v5": "HopperEnv",
    "Walker2d-v5": "Walker2dEnv",
    "Ant-v5": "AntEnv",
    "InvertedPendulum-v5": "InvertedPendulumEnv",
}


def _factory(class_name: str):
    def make(num_envs: int, **kwargs: Any):
        from envs.mujoco import tasks  # imports mujoco only when a task is made

        return getattr(tasks, class_name)(num_envs, **kwargs)

    make.__qualname__ = make.__name__ = f"make_{class_name}"
    return make


for _env_id, _class_name in TASKS.items():
    register(_env_id, _factory(_class_name))
