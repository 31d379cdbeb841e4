"""Batched MuJoCo locomotion: Gymnasium's v5 tasks stepped as a batch (the ``mujoco`` extra).

``rewardlab.envs.make("Hopper-v5", num_envs=N, device=...)`` and likewise ``HalfCheetah-v5``,
``Walker2d-v5``, ``Ant-v5`` and ``InvertedPendulum-v5``; new behaviours on them with
sparse rewards (:mod:`rewardlab.envs.mujoco.behaviours`): ``HalfCheetah-Backward-v0``,
``Hopper-Backward-v0`` and ``Ant-TurnInPlace-v0``. The ids are registered whether or not
MuJoCo is installed; making one without it says which extra to install.
"""

from __future__ import annotations

import importlib
from typing import Any

from rewardlab.envs.registration import register

TASKS = {
    "HalfCheetah-v5": "HalfCheetahEnv",
    "Hopper-v5": "HopperEnv",
    "Walker2d-v5": "Walker2dEnv",
    "Ant-v5": "AntEnv",
    "InvertedPendulum-v5": "InvertedPendulumEnv",
}
BEHAVIOURS = {
    "HalfCheetah-Backward-v0": "HalfCheetahBackwardEnv",
    "Hopper-Backward-v0": "HopperBackwardEnv",
    "Ant-TurnInPlace-v0": "AntTurnInPlaceEnv",
}


def _factory(module_name: str, class_name: str):
    def make(num_envs: int, **kwargs: Any):
        # Imported only when an env is made; its constructor is what imports mujoco.
        module = importlib.import_module(f"rewardlab.envs.mujoco.{module_name}")
        return getattr(module, class_name)(num_envs, **kwargs)

    make.__qualname__ = make.__name__ = f"make_{class_name}"
    return make


for _env_id, _class_name in TASKS.items():
    register(_env_id, _factory("tasks", _class_name))
for _env_id, _class_name in BEHAVIOURS.items():
    register(_env_id, _factory("behaviours", _class_name))
