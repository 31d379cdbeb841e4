"""The on-device storage of one on-policy rollout and what a learner reads from it: the
reward components the env reported (checked against the value heads at the first step),
a per-rollout reward's relabelling, the reward each value head learns from, and the
episode statistics."""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rewardlab.agents.ppo_config import INTRINSIC_COMPONENT, SUMMED_REWARD_HEAD, ValueHead


def episode_sums(
    per_step: torch.Tensor, running: torch.Tensor, episode_ended: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sums of per-step values over each episode, at every step of a rollout.

    :param per_step: ``(T, N, K)``: K values per step and env (rewards, a 1 to count steps).
    :param running: ``(N, K)``, the sums of the episodes under way when the rollout began.
    :param episode_ended: bool ``(T, N)``.
    :return: ``(sums, running)``: ``sums[t]`` the sums of each env's episode up to and
        including step ``t`` (its total where the episode ended at ``t``), ``running`` the
        sums to carry into the next rollout.
    """
    continues = (~episode_ended).unsqueeze(-1).to(per_step.dtype)
    sums = torch.empty_like(per_step)
    previous, keeps = running, torch.ones_like(continues[0])
    for t in range(per_step.shape[0]):
        # sums[t] = per_step[t] + sums[t - 1] while the episode goes on, one operator a step
        previous = torch.addcmul(per_step[t], previous, keeps, out=sums[t])
        keeps = continues[t]
    return sums, previous * keeps


@dataclass
class Rollout:
    """Preallocated on-device storage for one rollout of ``n_steps`` x ``num_envs``."""

    obs: torch.Tensor  # raw observations the policy acted on, (T, N, *obs_shape)
    final_obs: torch.Tensor  # the state each step led to (true last obs where an episode ended)
    actions: torch.Tensor  # (T, N) or (T, N, action_dim), as sampled
    log_prob: torch.Tensor  # the behaviour policy's log-probability of the actions, (T, N)
    rewards: torch.Tensor  # the env's (summed) reward, (T, N)
    terminated: torch.Tensor  # bool (T, N)
    truncated: torch.Tensor  # bool (T, N)
    components: torch.Tensor | None = None  # (C, T, N), allocated at the first step
    #: the env's reward components, in the order of ``components`` (known after a first step)
    component_names: list[str] | None = None
    #: the components a per-rollout reward returns, after the env's in ``components``
    relabelled_names: list[str] | None = None

    @classmethod
    def empty(
        cls, n_steps: int, num_envs: int, obs_shape: Sequence[int], action_shape: Sequence[int] | None,
        device: torch.device,
    ) -> Rollout:  # fmt: skip
        """Zeros for ``n_steps`` steps of ``num_envs`` envs; ``action_shape`` None: discrete actions."""
        T, N = n_steps, num_envs
        if action_shape is None:
            actions = torch.zeros((T, N), dtype=torch.int64, device=device)
        else:
            actions = torch.zeros((T, N, *action_shape), device=device)
        return cls(
            obs=torch.zeros((T, N, *obs_shape), device=device),
            final_obs=torch.zeros((T, N, *obs_shape), device=device),
            actions=actions,
            log_prob=torch.zeros((T, N), device=device),
            rewards=torch.zeros((T, N), device=device),
            terminated=torch.zeros((T, N), dtype=torch.bool, device=device),
            truncated=torch.zeros((T, N), dtype=torch.bool, device=device),
        )

    def all_component_names(self) -> list[str]:
        """The names of the rollout's components: the env's, then a per-rollout reward's."""
        return [*(self.component_names or []), *(self.relabelled_names or [])]

    def check_first_step(
        self, reward: torch.Tensor, components: Mapping[str, torch.Tensor], heads: Sequence[ValueHead],
        intrinsic: bool,
    ) -> None:  # fmt: skip
        """Check a first step's reward components against the value heads (``intrinsic``: an
        intrinsic module gives the ``"intrinsic"`` one) and allocate their storage."""
        names = list(components)
        if "extrinsic" not in components:
            raise ValueError(
                f"the env reports no 'extrinsic' reward component (it reports {names}); "
                "batched envs must put their own reward in info['reward_components']['extrinsic']"
            )
        from_intrinsic_module = {INTRINSIC_COMPONENT} if intrinsic else set()
        missing = [
            h.component for h in heads
            if h.component not in (*names, SUMMED_REWARD_HEAD, *from_intrinsic_module)
        ]  # fmt: skip
        if missing:
            raise ValueError(
                f"value_heads names {missing}, which the env does not report in "
                f"info['reward_components'] (it reports {names}); add the wrapper that "
                "produces them, pass intrinsic= for 'intrinsic', or drop those heads"
            )
        headed = [h.component for h in heads if h.component in components]
        if headed and not torch.allclose(sum(components[c] for c in headed), reward, atol=1e-5):
            uncovered = [c for c in names if c not in headed]
            warnings.warn(
                f"the value heads {headed} do not add up to the env's reward; the rest "
                f"(components {uncovered}) is not learned from. Give it a head if it should be.",
                stacklevel=4,
            )
        self.component_names = names
        self.components = torch.zeros((len(names), *self.rewards.shape), device=self.rewards.device)

    def relabel(self, reward_fn: Callable[..., Any], taken_actions: torch.Tensor) -> None:
        """Replace the rewards with ``reward_fn``'s on the rollout's transitions, and store its
        components after the env's (their storage made at the first call).

        :param reward_fn: as :class:`rewardlab.agents.PPO` takes it.
        :param taken_actions: the actions as the env took them.
        """
        assert self.components is not None and self.component_names is not None
        T, N = self.rewards.shape
        rows = T * N

        def flat(values: torch.Tensor) -> torch.Tensor:
            return values.reshape(rows, *values.shape[2:])

        with torch.no_grad():
            result = reward_fn(
                flat(self.obs), flat(taken_actions), flat(self.final_obs), flat(self.terminated), flat(self.rewards)
            )
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], Mapping)):
            raise TypeError(f"reward_fn must return (reward, components), got {type(result).__name__}")
        reward, components = result
        for what, value in (("the reward", reward), *((f"component {k!r}", v) for k, v in components.items())):
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != (rows,) or not value.is_floating_point():
                shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise ValueError(f"reward_fn returned {what} as {shape}; it must be a float tensor of shape "
                                 f"({rows},), one value per transition of the rollout (n_steps * num_envs)")
        if self.relabelled_names is None:
            clash = [name for name in components if name in self.component_names]
            if clash:
                raise ValueError(f"reward_fn returned components {clash} that the env reports too; rename them")
            self.relabelled_names = list(components)
            extra = torch.zeros((len(components), T, N), device=self.rewards.device)
            self.components = torch.cat([self.components, extra])
        elif list(components) != self.relabelled_names:
            raise ValueError(f"reward_fn returned the components {list(components)} after {self.relabelled_names}; "
                             "it must return the same ones every time")
        self.rewards.copy_(reward.reshape(T, N))
        first = len(self.component_names)
        for index, value in enumerate(components.values()):
            self.components[first + index].copy_(value.reshape(T, N))

    def head_rewards(self, heads: Sequence[ValueHead], intrinsic_reward: torch.Tensor | None) -> torch.Tensor:
        """The reward each value head learns from, ``(T, N, H)``: a component, or the summed
        reward (an intrinsic bonus has a head of its own)."""
        names = self.all_component_names()
        assert self.components is not None
        per_head = []
        for head in heads:
            if head.component == SUMMED_REWARD_HEAD:
                per_head.append(self.rewards)
            elif head.component == INTRINSIC_COMPONENT and intrinsic_reward is not None:
                per_head.append(intrinsic_reward)
            else:
                per_head.append(self.components[names.index(head.component)])
        return torch.stack(per_head, dim=-1)

    def episode_statistics(
        self, extra: Mapping[str, torch.Tensor], running: torch.Tensor | None, episode_ended: torch.Tensor,
        ep_info_buffer: deque[dict[str, float]],
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:  # fmt: skip
        """Per-step means and finished-episode sums of every component and of ``extra``
        (``(T, N)`` values by name, such as an intrinsic bonus); fills ``ep_info_buffer``
        with the finished episodes' extrinsic return and length, as SB3 does.

        Episode sums carry over from one rollout to the next (``running``: the sums
        returned last time, None at the start); reading the finished episodes is this
        method's one host sync.

        :return: ``(statistics, running)``.
        """
        names = [*self.all_component_names(), *extra]
        assert self.components is not None
        columns = [*self.components[: len(names) - len(extra)], *extra.values()]
        columns.append(torch.ones_like(self.rewards))  # episode length
        per_step = torch.stack(columns, dim=-1)  # (T, N, C + 1)
        at_step, running = episode_sums(
            per_step, running if running is not None else torch.zeros_like(per_step[0]), episode_ended
        )
        finished = at_step[episode_ended]  # (E, C + 1), in time order

        stats = {f"reward/{name}": per_step[..., i].mean() for i, name in enumerate(names)}
        if len(finished):
            means = finished.mean(dim=0)
            stats |= {f"episode/{name}": means[i] for i, name in enumerate(names)}
            extrinsic = names.index("extrinsic")
            for row in finished[-ep_info_buffer.maxlen :].tolist():
                ep_info_buffer.append({"r": row[extrinsic], "l": int(row[-1])})
        return stats, running
