"""Default budgets of a search candidate: env steps, envs and PPO settings per task.

A search can only tell a good reward from a bad one at a budget where a good reward
solves the task: there the human reference (the env's reward plus our potential-based
shaping) clearly beats the sparse one and the normalised score is defined. The classic
tasks' budgets, HalfCheetah-Backward's and Hopper-Backward's are ones where it does on
this project's reference machine (2 cores), measured by ``python -m benchmarks.search_budgets``
(``benchmarks/results/search_budgets*.md``); the classic tasks' are small enough that a
search at the CLI's defaults stays within about 10 minutes there. Ant-TurnInPlace trains
with less starting exploration noise (``log_std_init`` -1.5: at PPO's default of 0, random
actions end most episodes within 40 steps, the ant bouncing above 1 m or leaving the circle)
over 64 envs, 4,096 steps a rollout in minibatches of 1,024, for 400k steps: there its human
reference succeeds in 70% of the evaluation episodes and the sparse one in none (3 seeds,
``search_budgets_ant_400k.md``), which is all a search needs to tell rewards apart. At three
times the steps (1.2M, the earlier default) the human reference reached 88% (5 seeds,
``search_defaults_ant.md``) but a search took 98.5 minutes on two cores; at 400k steps each
training takes about a third of that time. Short of solving every seed, its budget says so
in the report.

Tasks without a budget of their own get :data:`GENERIC`; :func:`default_budget` says so,
and the report repeats it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium

from rewardlab.agents.ppo import PPOConfig
from rewardlab.llm_reward.training.records import Budget

__all__ = ["BUDGETS", "GENERIC", "SOLVED", "Budget", "default_budget", "learner_discount",
           "solve_threshold"]


_MUJOCO = {"n_steps": 128, "batch_size": 512, "n_epochs": 10, "learning_rate": 3e-4, "anneal_lr": True,
           "normalize_obs": True, "normalize_reward": True, "log_std_init": 0.0, "ent_coef": 0.0}

#: per task: the classic-control settings of benchmarks/ppo_speed.py (tuned for time to
#: solve), with steps where the human reference solves; MuJoCo behaviours with the PPO
#: paper's settings over 16 envs
BUDGETS: dict[str, Budget] = {
    "CartPole-v1": Budget(60_000, 64, {"n_steps": 32, "n_epochs": 10, "learning_rate": 1e-3, "gamma": 0.98,
                                       "gae_lambda": 0.8}),
    "Acrobot-v1": Budget(100_000, 128, {"n_steps": 32, "n_epochs": 4, "learning_rate": 3e-3}),
    "MountainCar-v0": Budget(150_000, 32, {"n_steps": 64, "n_epochs": 10, "learning_rate": 1e-3,
                                           "normalize_reward": True}),
    "MountainCarContinuous-v0": Budget(150_000, 32, {"n_steps": 64, "n_epochs": 10, "learning_rate": 1e-3,
                                                     "normalize_reward": True}),
    "Pendulum-v1": Budget(150_000, 64, {"n_steps": 64, "n_epochs": 10, "batch_size": 512, "learning_rate": 1e-3,
                                        "gamma": 0.9, "normalize_obs": True, "normalize_reward": True,
                                        "anneal_lr": True}),
    "HalfCheetah-Backward-v0": Budget(150_000, 16, dict(_MUJOCO)),
    "Hopper-Backward-v0": Budget(300_000, 16, dict(_MUJOCO)),
    "Ant-TurnInPlace-v0": Budget(400_000, 64, {**_MUJOCO, "n_steps": 64, "batch_size": 1024,
                                                 "log_std_init": -1.5}, note=(
        "the default budget of Ant-TurnInPlace-v0, where the human reference does not succeed in every "
        "evaluation episode of every seed (benchmarks/results/search_budgets_ant_400k.md): a search can beat it")),
}

#: any other env: PPO's defaults over 16 envs
GENERIC = Budget(
    100_000, 16, {},
    note="no budget was measured for this env: 100,000 steps over 16 envs with PPO's defaults; if the "
         "human and sparse rewards tie, raise --steps",
)


#: the final fitness (the env's own return) that solves a task, where this project sets it:
#: Gymnasium's thresholds where they exist (CartPole, Acrobot, MountainCarContinuous),
#: MountainCar's and Pendulum's the issue targets' (Gymnasium's -110 for MountainCar is past
#: what its human reference reaches at the default budget; Pendulum has none of its own)
SOLVED = {"CartPole-v1": 475.0, "MountainCar-v0": -150.0, "MountainCarContinuous-v0": 90.0,
          "Acrobot-v1": -100.0, "Pendulum-v1": -400.0}


def solve_threshold(env_id: str) -> float | None:
    """The final fitness that solves ``env_id``: :data:`SOLVED`, else the ``reward_threshold``
    of its Gymnasium registration, else ``None`` (the task sets none).

    :param env_id: the env.
    """
    if env_id in SOLVED:
        return SOLVED[env_id]
    try:
        threshold = gymnasium.spec(env_id).reward_threshold
    except gymnasium.error.Error:  # not a registered Gymnasium id (a batched env, a file's env)
        return None
    return None if threshold is None else float(threshold)


def default_budget(env_id: str) -> Budget:
    """The budget a search candidate of ``env_id`` trains with unless told otherwise.

    :param env_id: the env.
    """
    budget = BUDGETS.get(env_id)
    if budget is not None:
        return Budget(budget.steps, budget.num_envs, dict(budget.ppo_kwargs),
                      note=budget.note or f"the default budget of {env_id} (llm_reward/search/budgets.py)")
    if env_id.endswith("-v5"):  # the MuJoCo locomotion tasks
        return Budget(300_000, 16, dict(_MUJOCO),
                      note="the MuJoCo default: 300,000 steps over 16 envs with the PPO paper's settings")
    return GENERIC


def learner_discount(ppo_kwargs: Mapping[str, Any], component: str) -> float:
    """The discount a candidate trained with ``ppo_kwargs`` learns the reward component
    ``component`` with, as its learner's config says: what a potential-based term written for
    that candidate must use to telescope (a budget's ``gamma`` differs from PPO's default).

    :param ppo_kwargs: ``rewardlab.agents.PPO`` settings (a budget's, or the search's).
    :param component: the component that holds the shaping term.
    """
    return PPOConfig.from_dict(ppo_kwargs).discount(component)
