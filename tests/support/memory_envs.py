"""A batched task that needs memory: remember the cue.

The first observation of an episode shows a cue, one of two; the next ones are blank; the
last asks for it back. Answering with the cue's action pays 1, the other action -1. A policy
that sees one observation at a time answers at chance (an expected return of 0); one that
remembers the cue earns 1 an episode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode


class RememberTheCue:
    """Batched (``docs/batched_envs.md``, same-step autoreset): episodes of ``delay + 1``
    steps a env.

    Observations, 3 features: ``[cue is 0, cue is 1, asked]``, the cue shown at an episode's
    first step only, ``asked`` at its last. Actions: 0 or 1, read only at the last step.

    :param num_envs: the envs.
    :param delay: steps from the cue to the question, one for every env or one per env (so
        that episodes end at known, different steps).
    :param seed: seeds the cues.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}
    spec_id = "RememberTheCue-v0"

    def __init__(self, num_envs: int, delay: int | Sequence[int] = 3, seed: int = 0) -> None:
        self.num_envs = num_envs
        self.device = torch.device("cpu")
        delays = [delay] * num_envs if isinstance(delay, int) else list(delay)
        if len(delays) != num_envs or min(delays) < 1:
            raise ValueError(f"delay={delay!r} must be at least 1, one value or one per env")
        self.delay = torch.tensor(delays)
        self.single_observation_space = gymnasium.spaces.Box(0.0, 1.0, (3,), np.float32)
        self.single_action_space = gymnasium.spaces.Discrete(2)
        self.generator = torch.Generator().manual_seed(seed)
        self.cue = torch.zeros(num_envs, dtype=torch.int64)
        self.t = torch.zeros(num_envs, dtype=torch.int64)

    def observe(self) -> torch.Tensor:
        shown = torch.nn.functional.one_hot(self.cue, 2).float() * (self.t == 0).unsqueeze(-1)
        return torch.cat([shown, (self.t == self.delay).float().unsqueeze(-1)], dim=-1)

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[torch.Tensor, dict]:
        if seed is not None:
            self.generator.manual_seed(seed)
        self.t.zero_()
        self.cue = torch.randint(0, 2, (self.num_envs,), generator=self.generator)
        return self.observe(), {}

    def step(self, actions: torch.Tensor) -> tuple:
        asked = self.t == self.delay
        reward = torch.where(actions == self.cue, 1.0, -1.0) * asked
        self.t = self.t + 1
        final_obs = self.observe()
        fresh = torch.randint(0, 2, (self.num_envs,), generator=self.generator)
        self.cue = torch.where(asked, fresh, self.cue)
        self.t = torch.where(asked, 0, self.t)
        info = {"final_obs": final_obs, "reward_components": {"extrinsic": reward}}
        return self.observe(), reward, asked, torch.zeros_like(asked), info

    def close(self) -> None:
        pass
