"""The true return of a policy on a batched env: one episode per env, all envs at once.

Every evaluation in rewardlab goes through :func:`play_episodes`: ``rewardlab train``'s
final score (:func:`evaluate_batched`), the reward search's fitness, and the benchmarks'
solve clocks. The return is the sum of the env's own reward
(``info["reward_components"]["extrinsic"]``), never a shaped one, so a wrapped env scores
the same as a bare one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# A success rule: (true last observations, terminated, truncated) -> bool (N,)
SuccessRule = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
# How far observations are toward success: obs (N, ...) -> (N,) in [0, 1]
PartialRule = Callable[[torch.Tensor], torch.Tensor]
# An episode's success from its true return: returns (E,) -> bool (E,)
ReturnRule = Callable[[torch.Tensor], torch.Tensor]
#: an episode's partial success counts in steps of this much (rounded down), so that a
#: state barely off the start counts 0 and noise in the start states orders no policies
PARTIAL_STEP = 0.05


@dataclass(frozen=True)
class Episodes:
    """What :func:`play_episodes` measured.

    :param returns: the true return of each env's episode.
    :param successes: whether each episode met the success rule; None without a rule.
    :param partial: each episode's best partial success (1 for a success); None without a rule.
    """

    returns: list[float]
    successes: list[bool] | None = None
    partial: list[float] | None = None

    @property
    def mean_return(self) -> float:
        return sum(self.returns) / len(self.returns)

    @property
    def success_rate(self) -> float | None:
        return None if self.successes is None else sum(self.successes) / len(self.successes)

    @property
    def partial_success(self) -> float | None:
        """The mean of the episodes' partial success, each and the mean rounded down to
        :data:`PARTIAL_STEP` (a non-finite value counts 0): one episode of ten that barely
        moved is no signal either."""
        if self.partial is None:
            return None
        steps = [_floored(value) if math.isfinite(value) else 0.0 for value in self.partial]
        return _floored(sum(steps) / len(steps))


def play_episodes(
    policy: Any,
    env: Any,
    *,
    seed: int | None = None,
    deterministic: bool = True,
    success: SuccessRule | None = None,
    max_steps: int | None = None,
    partial: PartialRule | None = None,
) -> Episodes:
    """Play the first episode of every env of ``env`` to its end and measure it.

    :param policy: a model with ``predict(obs, deterministic=...) -> (actions, _)`` (ours
        or SB3's), or a function ``obs -> actions``.
    :param env: a batched env (reset here); it is left open.
    :param seed: seeds the reset (the same start states for the same seed); None: the
        env's own stream.
    :param deterministic: act greedily (for a model with ``predict``).
    :param success: a success rule read from the last observation, or None.
    :param max_steps: a bound on the steps; default the env's ``max_episode_steps`` (or
        100,000 for an env without a time limit).
    :param partial: how far an observation is toward success, or None: each episode's best
        over its observations is kept, a success counting 1.
    """
    act = _actions_of(policy, deterministic)
    limit = max_steps or getattr(env, "max_episode_steps", None) or 100_000
    obs, _ = env.reset(seed=seed)
    returns = torch.zeros(env.num_envs, dtype=torch.float64, device=env.device)
    running = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
    succeeded = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
    best = torch.zeros(env.num_envs, dtype=torch.float64, device=env.device)
    for _ in range(limit):
        obs, _, terminated, truncated, info = env.step(act(obs))
        returns += info["reward_components"]["extrinsic"].double() * running
        ended = (terminated | truncated) & running
        if success is not None:
            succeeded |= ended & success(info["final_obs"], terminated, truncated)
        if partial is not None:
            # an ended episode's last state is its final observation; a state that ended it
            # without success (a fall, leaving the allowed area) does not count, the one before did
            states = torch.where(ended.view(-1, *([1] * (obs.dim() - 1))), info["final_obs"], obs)
            counted = running & ~(terminated & ended & ~succeeded) if success is not None else running
            values = torch.nan_to_num(partial(states).double(), nan=0.0, posinf=0.0, neginf=0.0)
            best = torch.where(counted, torch.maximum(best, values), best)
        running &= ~ended
        if not running.any():
            break
    if partial is not None and success is not None:
        best = torch.where(succeeded, torch.ones_like(best), best)
    return Episodes(returns.tolist(), succeeded.tolist() if success is not None else None,
                    best.tolist() if partial is not None else None)


def _floored(value: float) -> float:
    return math.floor(value / PARTIAL_STEP + 1e-9) * PARTIAL_STEP


def positive_return(returns: torch.Tensor) -> torch.Tensor:
    """MiniGrid's success rule: the episode was paid, which MiniGrid does only for reaching
    the task's goal (``1 - 0.9 * steps / max_steps``), so stepping into lava or running out
    of time is no success.

    :param returns: the episodes' true returns ``(E,)``.
    """
    return returns > 0


def success_rule_of(env: Any) -> ReturnRule | None:
    """The rule that tells an episode of ``env`` succeeded from its true return, or None for
    an env without one (its return is the whole measure).

    :param env: a batched env, wrapped or not.
    """
    from rewardlab.envs.batched_minigrid.env import BatchedMiniGridEnv, minigrid_reward

    unwrapped = getattr(env, "unwrapped", env)
    # a reward_fn of the user's own (a step penalty, say) pays failed episodes too: their
    # return no longer tells a success
    if isinstance(unwrapped, BatchedMiniGridEnv) and unwrapped.reward_fn is minigrid_reward:
        return positive_return
    return None


def evaluate_batched(
    model: Any, env_id: str, episodes: int = 10, seed: int = 0, device: str = "cpu",
    deterministic: bool = True, max_steps: int | None = None, env_kwargs: dict[str, Any] | None = None,
) -> Episodes:
    """``episodes`` episodes of ``model`` on a fresh, unshaped batched env: their true returns,
    and their successes where the env has a success rule (:func:`success_rule_of`).

    :param model: anything with ``predict(obs_tensor, deterministic=...) -> (actions, _)``.
    :param env_id: a batched env id (``rewardlab.envs.registered()``).
    :param episodes: how many episodes (and envs).
    :param seed: seeds the evaluation env.
    :param device: where the env lives.
    :param deterministic: act greedily.
    :param max_steps: a bound on the steps (see :func:`play_episodes`).
    :param env_kwargs: passed to the env (``rewardlab.envs.make(env_id, ..., **env_kwargs)``).
    """
    from rewardlab import envs

    if episodes < 1:
        raise ValueError(f"episodes={episodes!r} must be at least 1")
    env = envs.make(env_id, num_envs=episodes, device=device, seed=seed, **(env_kwargs or {}))
    try:
        played = play_episodes(model, env, seed=seed, deterministic=deterministic, max_steps=max_steps)
        rule = success_rule_of(env)
    finally:
        env.close()
    if rule is None:
        return played
    return Episodes(played.returns, rule(torch.tensor(played.returns)).tolist())


def _actions_of(policy: Any, deterministic: bool) -> Callable[[Any], Any]:
    if hasattr(policy, "predict"):
        # a recurrent policy's state carried from step to step (each env's first episode is
        # the one measured, so no episode starts after the first step)
        state: list[Any] = [None]

        def act(obs: Any) -> Any:
            actions, state[0] = policy.predict(obs, state=state[0], deterministic=deterministic)
            return actions

        return act
    if callable(policy):
        return policy
    raise TypeError(
        f"policy={type(policy).__name__} neither has predict(obs, deterministic=...) nor is a "
        "function obs -> actions"
    )
