"""DeepSea, bsuite's hard-exploration chain (Osband et al. 2019), as a batched torch env."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from rewardlab.envs.core import BatchedEnv, WholeNumberBox
from rewardlab.envs.registration import register


class DeepSeaEnv(BatchedEnv):
    """DeepSea(N) from bsuite: an ``N x N`` grid where the agent starts at the top left and
    falls one row per step, choosing left or right, until it leaves the bottom row.

    - Observation: the ``N x N`` one-hot grid of the agent's cell, flattened to ``N * N``
      float32 (the last observation of an episode shows the bottom row, as in bsuite).
    - Actions: ``Discrete(2)``. Which action means "right" is drawn at random for every cell
      (``randomize_actions``) and fixed for the env instance by ``mapping_seed`` (default:
      ``seed``), the same for all ``num_envs`` copies.
    - Reward: moving right costs ``0.01 / N``; moving right from the last column pays 1
      (only possible on the last step, after going right all the way). The optimal return
      is ``1 - 0.01 = 0.99``; every other policy gets at most 0, and a uniformly random one
      finds the treasure with probability ``2 ** -N``.
    - Episodes last exactly ``N`` steps and end terminated; the time limit is never reached.

    Example::

        >>> import torch
        >>> from rewardlab import envs
        >>> env = envs.make("DeepSea-v0", num_envs=2, size=5, seed=0)
        >>> obs, info = env.reset()
        >>> obs.shape
        torch.Size([2, 25])
        >>> right = env.right_actions()  # the actions that mean "right" in each copy's cell
        >>> obs, reward, terminated, truncated, info = env.step(right)

    :param num_envs: how many copies to run
    :param size: ``N``, the side of the grid (at least 1)
    :param randomize_actions: draw the meaning of the actions per cell; ``False``: action 1
        is always "right"
    :param mapping_seed: seed of that draw; ``None`` uses ``seed`` (and a random draw if both
        are ``None``)
    :param move_cost: the unscaled cost of moving right (bsuite's 0.01), divided by ``N``
    :param kwargs: ``device``, ``seed``, ``compile`` and ``validate_actions`` of
        :class:`rewardlab.envs.BatchedEnv`
    """

    gymnasium_id = "DeepSea-v0"
    state_dim = 2  # (row, column)

    def __init__(
        self,
        num_envs: int,
        size: int = 10,
        randomize_actions: bool = True,
        mapping_seed: int | None = None,
        move_cost: float = 0.01,
        **kwargs: Any,
    ):
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
            raise ValueError(f"size must be a positive int, got {size!r}")
        if "max_episode_steps" in kwargs:
            raise ValueError(
                "DeepSea episodes last exactly `size` steps; max_episode_steps cannot be set"
            )
        self.size = int(size)
        self.move_cost = move_cost / self.size
        super().__init__(
            num_envs,
            WholeNumberBox(0.0, 1.0, (self.size * self.size,), dtype=np.float32),
            spaces.Discrete(2),
            max_episode_steps=self.size + 1,
            **kwargs,
        )
        if mapping_seed is None:
            mapping_seed = kwargs.get("seed")
        if randomize_actions:
            draw = np.random.default_rng(mapping_seed).integers(0, 2, (self.size, self.size))
        else:
            draw = np.ones((self.size, self.size), dtype=np.int64)
        self.action_mapping = torch.as_tensor(draw, dtype=torch.int64, device=self.device)

    def reset_bounds(
        self, options: dict[str, Any] | None
    ) -> tuple[Sequence[float], Sequence[float]]:
        """Every episode starts in the top-left cell.

        :param options: not used
        """
        return [0.0, 0.0], [0.0, 0.0]

    def transition(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Fall one row, moving one column left or right, as bsuite's ``DeepSea._step``.

        :param state: ``(2, num_envs)`` rows and columns (as floats)
        :param actions: ``(num_envs,)`` int64 in ``{0, 1}``
        """
        row, column = state[0].long(), state[1].long()
        right = actions == self.action_mapping[row, column]
        treasure = right & (column == self.size - 1)
        reward = treasure.float() - right.float() * self.move_cost
        column = torch.where(
            right, (column + 1).clamp(max=self.size - 1), (column - 1).clamp(min=0)
        )
        row = row + 1
        return torch.stack((row, column)).float(), reward, row == self.size

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """The one-hot grid of each copy's cell; a copy past the bottom shows the bottom row.

        :param state: ``(2, num_envs)``
        """
        row = state[0].long().clamp(max=self.size - 1)
        cell = row * self.size + state[1].long()
        # A comparison rather than one_hot, which checks its input's range (a host sync that
        # also keeps the step from compiling).
        cells = torch.arange(self.size * self.size, device=cell.device)
        return (cell[:, None] == cells).float()

    def right_actions(self) -> torch.Tensor:
        """The action that moves each copy right from its current cell, ``(num_envs,)`` int64."""
        row, column = self.state[:, 0].long(), self.state[:, 1].long()
        return self.action_mapping[row, column]

    def render(self, index: int = 0) -> np.ndarray:
        """Draw copy ``index``: the agent's cell white, the treasure gold, 8 pixels a cell.

        :param index: which copy to draw
        :return: an RGB array ``(8 N, 8 N, 3)`` of uint8
        """
        if not 0 <= index < self.num_envs:
            raise ValueError(f"index={index} is not a copy of this env: use 0..{self.num_envs - 1}")
        grid = np.zeros((self.size, self.size, 3), dtype=np.uint8)
        grid[-1, -1] = (255, 200, 0)
        row, column = (int(v) for v in self.state[index])
        grid[min(row, self.size - 1), column] = (255, 255, 255)
        return grid.repeat(8, axis=0).repeat(8, axis=1)

    def __repr__(self) -> str:
        return f"DeepSeaEnv(size={self.size}, num_envs={self.num_envs}, device={self.device})"


register("DeepSea-v0", DeepSeaEnv)
