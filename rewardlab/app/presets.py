"""Tuned settings per task family, in one place, as rl-zoo keeps its hyperparameters per env.

``rewardlab train`` starts from the preset that fits its env, learner and bonus, and the
benchmarks read the same entries, so the documented command is the benchmark's command:
``rewardlab train --env MiniGrid-KeyCorridorS4R3-v0 --intrinsic episodic`` trains with the
settings behind ``benchmarks/results/intrinsic_minigrid.md``. What a run is given (a flag,
the ``--config`` file, ``--hyperparameters``) overrides the preset key by key, and the run's
``config.json`` holds the result.

Each preset names the result file its settings were measured in; a change here is a change
to a benchmark's settings and is re-measured there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatch
from typing import Any

from rewardlab.app.trainers import is_mujoco

__all__ = ["MINIGRID_BONUS", "MINIGRID_BONUS_PPO", "Preset", "preset_for"]

#: PPO's settings for MiniGrid with an intrinsic bonus: short rollouts over many envs, large
#: batches, rewards normalised per head (the bonus's scale drifts as states are visited)
MINIGRID_BONUS_PPO: dict[str, Any] = {
    "n_steps": 64,
    "batch_size": 8192,
    "n_epochs": 4,
    "learning_rate": 5e-4,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "ent_coef": 0.01,
    "normalize_obs": True,
    "normalize_reward": True,
    "net_arch": [64, 64],
    "activation": "tanh",
}


@dataclass(frozen=True)
class Preset:
    """Settings of ``rewardlab train`` tuned for one family of tasks.

    :param name: what the run's line calls it.
    :param source: the result file whose runs used these settings.
    :param settings: run settings (``rewardlab train``'s config keys other than
        ``hyperparameters``), e.g. ``num_envs``.
    :param hyperparameters: the learner's settings.
    :param steps: env-step budgets of the tasks the benchmark ran, by env id.
    :param intrinsic_coef: the bonus's weight by id pattern (``fnmatch``), the first match
        winning, over ``settings``' ``intrinsic_coef``.
    """

    name: str
    source: str
    settings: dict[str, Any]
    hyperparameters: dict[str, Any]
    steps: dict[str, int] = field(default_factory=dict)
    intrinsic_coef: dict[str, float] = field(default_factory=dict)

    def settings_for(self, env_id: str) -> dict[str, Any]:
        """The run settings for ``env_id``: the family's, with its task's budget and bonus
        weight where the benchmark has them.

        :param env_id: the env id.
        """
        settings = dict(self.settings)
        if env_id in self.steps:
            settings["steps"] = self.steps[env_id]
        coef = next((c for pattern, c in self.intrinsic_coef.items() if fnmatch(env_id, pattern)), None)
        if coef is not None:
            settings["intrinsic_coef"] = coef
        return settings

    def apply(self, config: dict[str, Any], given: dict[str, Any]) -> list[str]:
        """Fill ``config`` with the preset where ``given`` (what the run was told) is silent;
        the hyperparameters key by key.

        :param config: the run's config, changed in place.
        :param given: the settings the run was given, by config key.
        :return: the settings the preset decided, as ``key=value``.
        """
        decided = []
        recurrent = (given.get("hyperparameters") or {}).get("recurrent")
        for key, value in self.settings_for(config["env"]).items():
            # the benchmarks' runs compiled a feed-forward policy; a recurrent update unrolls
            # the rollout into its graph, which rewardlab train compiles only when asked
            if key not in given and not (key == "compile" and recurrent):
                config[key] = value
                decided.append(f"{key}={_text(value)}")
        chosen = given.get("hyperparameters") or {}
        config["hyperparameters"] = {**self.hyperparameters, **chosen}
        decided += [f"{k}={_text(v)}" for k, v in self.hyperparameters.items() if k not in chosen]
        return decided


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


#: rewardlab's PPO on the batched MiniGrid with a bonus: the settings of every run in
#: ``intrinsic_minigrid.md`` (512 envs, compiled, final success over one episode per env)
MINIGRID_BONUS = Preset(
    name="minigrid-bonus",
    source="benchmarks/results/intrinsic_minigrid.md",
    settings={"num_envs": 512, "intrinsic_coef": 0.5, "compile": True, "eval_episodes": 512},
    hyperparameters=MINIGRID_BONUS_PPO,
    steps={
        "MiniGrid-DoorKey-16x16-v0": 3_000_000,
        "MiniGrid-KeyCorridorS4R3-v0": 6_000_000,
        "MiniGrid-KeyCorridorS5R3-v0": 12_000_000,
        "MiniGrid-KeyCorridorS6R3-v0": 25_000_000,
        "MiniGrid-MultiRoom-N6-v0": 10_000_000,
        "MiniGrid-ObstructedMaze-1Dl-v0": 10_000_000,
        "MiniGrid-ObstructedMaze-1Dlh-v0": 10_000_000,
        "MiniGrid-ObstructedMaze-1Dlhb-v0": 10_000_000,
    },
    # at 0.5 the count kept the agent from ObstructedMaze-1Dlh's goal; at 0.1 it solved it
    intrinsic_coef={"MiniGrid-ObstructedMaze-*": 0.1},
)


def _mujoco_preset() -> Preset:
    # the MuJoCo settings are PPO's own (agents.ppo_config), measured in mujoco_ppo.md
    from rewardlab.agents.ppo_config import MUJOCO_CONFIG

    return Preset("mujoco", "benchmarks/results/mujoco_ppo.md", {}, MUJOCO_CONFIG.to_dict())


def preset_for(env_id: str, algo: str, intrinsic: list[str]) -> Preset | None:
    """The preset for a run, or None: MiniGrid ids with a bonus (``MiniGrid-*``, a user's
    ``module:MiniGrid-*`` too) and the batched MuJoCo tasks, for ``--algo ppo``.

    :param env_id: the env id.
    :param algo: the learner (``rewardlab train --algo``).
    :param intrinsic: the bonus names (``--intrinsic``).
    """
    if algo != "ppo" or not isinstance(env_id, str):
        return None
    if intrinsic and fnmatch(env_id.rpartition(":")[2], "MiniGrid-*"):
        return MINIGRID_BONUS
    if is_mujoco(env_id):
        return _mujoco_preset()
    return None
