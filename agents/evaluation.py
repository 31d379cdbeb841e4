"""Evaluate a policy on a batched env: one episode per env, all envs at once."""

from __future__ import annotations

from typing import Any

import torch


def evaluate_batched(
    model: Any, env_id: str, episodes: int = 10, seed: int = 0, device: str = "cpu",
    deterministic: bool = True, max_steps: int = 100_000,
) -> list[float]:
    """True returns of ``episodes`` episodes of ``model`` on a fresh, unshaped batched env.

    The return is the sum of the env's own reward (``reward_components["extrinsic"]``),
    never a shaped one. Each of ``episodes`` envs runs exactly one episode.

    :param model: anything with ``predict(obs_tensor, deterministic=...) -> (actions, _)``.
    :param env_id: a batched env id (``rewardlab.envs.registered()``).
    :param episodes: how many episodes (and envs).
    :param seed: seeds the evaluation env.
    :param device: where the env lives.
    :param deterministic: act greedily.
    :param max_steps: a bound on the steps, for envs without a time limit.
    :return: one true return per episode.
    """
    from rewardlab import envs

    if episodes < 1:
        raise ValueError(f"episodes={episodes!r} must be at least 1")
    env = envs.make(env_id, num_envs=episodes, device=device, seed=seed)
    obs, _ = env.reset(seed=seed)
    returns = torch.zeros(episodes, dtype=torch.float64, device=env.device)
    running = torch.ones(episodes, dtype=torch.bool, device=env.device)
    for _ in range(max_steps):
        actions, _ = model.predict(obs, deterministic=deterministic)
        obs, _, terminated, truncated, info = env.step(actions)
        returns += info["reward_components"]["extrinsic"].double() * running
        running &= ~(terminated | truncated)
        if not running.any():
            break
    env.close()
    return returns.tolist()
