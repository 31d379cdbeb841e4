"""Fruit collection, the task of Hybrid Reward Architecture (van Seijen et al., 2017), batched.

Two ids are registered:

- ``FruitCollection-v0``: the paper's task, a 10 x 10 grid with 10 possible fruit positions
  (:data:`FRUIT_POSITIONS`), 5 fruits per episode, at most 300 steps;
- ``FruitCollection-Large-v0``: a 20 x 20 grid with 20 possible positions
  (:data:`LARGE_FRUIT_POSITIONS`), 10 fruits per episode, at most 600 steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from rewardlab.envs.core import BatchedEnv, StepReturn, WholeNumberBox
from rewardlab.envs.registration import register

# (row, column) of each possible fruit position; fixed for the env id.
FRUIT_POSITIONS = ((0, 2), (1, 7), (2, 4), (3, 0), (3, 9), (5, 2), (6, 6), (7, 9), (8, 1), (9, 5))
LARGE_FRUIT_POSITIONS = (
    (0, 4), (0, 15), (2, 9), (3, 1), (3, 18), (5, 6), (6, 12), (7, 3), (8, 16), (9, 9),
    (10, 0), (11, 13), (12, 5), (13, 19), (14, 10), (15, 2), (16, 15), (17, 7), (19, 0), (19, 12),
)  # fmt: skip
# Row and column change of each action: 0 up, 1 right, 2 down, 3 left.
MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))


class FruitCollectionEnv(BatchedEnv):
    """An agent walks a ``size x size`` grid and eats the fruits placed on it.

    - Fruit positions: ``fruit_positions``, fixed for the env; every episode places
      ``num_fruits`` fruits on a uniformly random subset of them, and the agent on a uniformly
      random cell without a fruit.
    - Actions: ``Discrete(4)``: 0 up, 1 right, 2 down, 3 left; a move into the border leaves
      the agent where it is.
    - Reward: +1 for each fruit eaten (by stepping onto its cell). The episode ends,
      terminated, when the last fruit is eaten, or truncated after ``max_episode_steps``.
      The best possible return is ``num_fruits``.
    - Reward components: ``fruit_k`` is 1 on the step that eats the fruit at position ``k``
      (``fruit_positions[k]``), else 0; ``extrinsic`` is their sum, the reward.
    - Observation: float32 ``size * size + K`` (``K = len(fruit_positions)``): the one-hot
      of the agent's cell (``row * size + column``), then one presence bit per fruit position.
      :meth:`feature_masks` gives the features relevant to each ``fruit_k`` (the agent's cell
      and bit ``k``), the paper's "HRA+1".

    The state is ``(row, column, present_0, ..., present_{K-1})``.

    Example::

        >>> import torch
        >>> from rewardlab import envs
        >>> env = envs.make("FruitCollection-v0", num_envs=4, seed=0)
        >>> obs, info = env.reset()
        >>> obs.shape
        torch.Size([4, 110])
        >>> obs, reward, terminated, truncated, info = env.step(torch.zeros(4, dtype=torch.int64))
        >>> sorted(info["reward_components"])[:3]
        ['extrinsic', 'fruit_0', 'fruit_1']

    :param num_envs: how many copies to run
    :param size: the side of the grid
    :param fruit_positions: the possible fruit cells as ``(row, column)``, distinct
    :param num_fruits: how many fruits each episode places, at most ``len(fruit_positions)``
    :param max_episode_steps: the time limit
    :param kwargs: ``device``, ``seed``, ``compile`` and ``validate_actions`` of
        :class:`rewardlab.envs.BatchedEnv`
    """

    gymnasium_id = "FruitCollection-v0"

    def __init__(
        self,
        num_envs: int,
        size: int = 10,
        fruit_positions: Sequence[tuple[int, int]] = FRUIT_POSITIONS,
        num_fruits: int = 5,
        max_episode_steps: int = 300,
        **kwargs: Any,
    ):
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 2:
            raise ValueError(f"size must be an int of at least 2, got {size!r}")
        positions = [tuple(int(v) for v in p) for p in fruit_positions]
        if not positions or len(set(positions)) != len(positions):
            raise ValueError(
                f"fruit_positions must be distinct (row, column) pairs, got {positions}"
            )
        outside = [p for p in positions if not (0 <= p[0] < size and 0 <= p[1] < size)]
        if outside:
            raise ValueError(f"fruit_positions {outside} lie outside the {size} x {size} grid")
        if not isinstance(num_fruits, int | np.integer) or not 1 <= num_fruits <= len(positions):
            raise ValueError(
                f"num_fruits must be in [1, {len(positions)}] (the number of fruit positions), "
                f"got {num_fruits!r}"
            )
        self.size = int(size)
        self.fruit_positions = positions
        self.num_positions = len(positions)
        self.num_fruits = int(num_fruits)
        self.num_cells = self.size * self.size
        self.state_dim = 2 + self.num_positions
        super().__init__(
            num_envs,
            WholeNumberBox(0.0, 1.0, (self.num_cells + self.num_positions,), dtype=np.float32),
            spaces.Discrete(len(MOVES)),
            max_episode_steps=max_episode_steps,
            **kwargs,
        )
        self.fruit_cells = torch.tensor(
            [row * self.size + column for row, column in positions], device=self.device
        )
        self._moves = torch.tensor(MOVES, dtype=torch.float32, device=self.device)
        self._cells = torch.arange(self.num_cells, device=self.device)

    @property
    def fruit_names(self) -> list[str]:
        """The per-fruit reward components, ``fruit_0`` .. ``fruit_{K-1}``, which :meth:`step`
        adds to ``extrinsic`` (``component_names`` stays the carried step's, ``extrinsic``)."""
        return [f"fruit_{k}" for k in range(self.num_positions)]

    def feature_masks(self) -> dict[str, torch.Tensor]:
        """For each ``fruit_k``, a bool mask over the observation: the agent's cell and bit ``k``.

        Pass it as ``rewardlab.agents.HRA(env, feature_masks=env.feature_masks())`` to give each head
        only its fruit's features (the paper's "HRA+1").
        """
        masks = {}
        for k, name in enumerate(self.fruit_names):
            mask = torch.zeros(self.single_observation_space.shape, dtype=torch.bool)
            mask[: self.num_cells] = True
            mask[self.num_cells + k] = True
            masks[name] = mask
        return masks

    def reset_bounds(
        self, options: dict[str, Any] | None
    ) -> tuple[Sequence[float], Sequence[float]]:
        """The range of each state variable; reset states are drawn by :meth:`_draw_reset_states`.

        :param options: not used
        """
        return [0.0] * self.state_dim, [self.size - 1.0, self.size - 1.0] + [1.0] * (
            self.state_dim - 2
        )

    def _draw_reset_states(self, count: int) -> torch.Tensor:
        """``count`` start states: fruits on a random ``num_fruits``-subset of the positions and
        the agent on a random cell without a fruit (not a uniform box, so this replaces the
        base class's draw)."""
        scores = torch.rand(
            (self.num_positions, count), generator=self.generator, device=self.device
        )
        present = torch.zeros_like(scores)
        present.scatter_(0, scores.topk(self.num_fruits, dim=0).indices, 1.0)
        cell_scores = torch.rand(
            (count, self.num_cells), generator=self.generator, device=self.device
        )
        cell_scores[:, self.fruit_cells] -= 2.0 * present.T  # cells with a fruit never win
        cell = cell_scores.argmax(dim=1)
        row, column = (cell // self.size).float(), (cell % self.size).float()
        return torch.cat((row[None], column[None], present))

    def transition(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Move, eat the fruit on the new cell if there is one, end when none is left.

        :param state: ``(2 + K, num_envs)``
        :param actions: ``(num_envs,)`` int64 in ``[0, 4)``
        """
        move = self._moves[actions]
        row = (state[0] + move[:, 0]).clamp(0, self.size - 1)
        column = (state[1] + move[:, 1]).clamp(0, self.size - 1)
        cell = (row * self.size + column).long()
        present = state[2:]
        eaten = (cell == self.fruit_cells[:, None]) & (present > 0.5)
        present = present * ~eaten
        reward = eaten.sum(dim=0).float()
        terminated = present.sum(dim=0) == 0
        return torch.cat((row[None], column[None], present)), reward, terminated

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """The one-hot of the agent's cell, then the fruit presence bits.

        :param state: ``(2 + K, num_envs)``
        """
        cell = (state[0] * self.size + state[1]).long()
        # A comparison rather than one_hot, which checks its input's range (a host sync that
        # also keeps the step from compiling).
        position = (cell[:, None] == self._cells).float()
        return torch.cat((position, state[2:].T), dim=1)

    def step(self, actions: Any) -> StepReturn:
        """Step every copy; ``info["reward_components"]`` adds ``fruit_k`` to ``extrinsic``.

        :param actions: ``(num_envs,)`` integers in ``[0, 4)``, a tensor or numpy array
        """
        present_before = self._state[2:] if self._state is not None else None
        obs, reward, terminated, truncated, info = super().step(actions)
        # Fruits only disappear, so what was present before minus what is present in the
        # true last observation is what this step ate.
        eaten = present_before.T - info["final_obs"][:, self.num_cells :]
        for k, name in enumerate(self.fruit_names):
            info["reward_components"][name] = eaten[:, k]
        return obs, reward, terminated, truncated, info

    def render(self, index: int = 0) -> np.ndarray:
        """Draw copy ``index``: the agent white, fruits green, 8 pixels a cell.

        :param index: which copy to draw
        :return: an RGB array ``(8 size, 8 size, 3)`` of uint8
        """
        if not 0 <= index < self.num_envs:
            raise ValueError(f"index={index} is not a copy of this env: use 0..{self.num_envs - 1}")
        state = self.state[index].tolist()
        grid = np.zeros((self.size, self.size, 3), dtype=np.uint8)
        for (row, column), present in zip(self.fruit_positions, state[2:]):
            if present > 0.5:
                grid[row, column] = (0, 200, 0)
        grid[int(state[0]), int(state[1])] = (255, 255, 255)
        return grid.repeat(8, axis=0).repeat(8, axis=1)

    def __repr__(self) -> str:
        return (
            f"FruitCollectionEnv(size={self.size}, positions={self.num_positions}, "
            f"fruits={self.num_fruits}, num_envs={self.num_envs}, device={self.device})"
        )


def make_large(num_envs: int, max_episode_steps: int = 600, **kwargs: Any) -> FruitCollectionEnv:
    """``FruitCollection-Large-v0``: 20 x 20, the 20 :data:`LARGE_FRUIT_POSITIONS`, 10 fruits.

    :param num_envs: how many copies to run
    :param max_episode_steps: the time limit
    :param kwargs: as for :class:`FruitCollectionEnv`
    """
    return FruitCollectionEnv(
        num_envs, size=20, fruit_positions=LARGE_FRUIT_POSITIONS, num_fruits=10,
        max_episode_steps=max_episode_steps, **kwargs,
    )  # fmt: skip


register("FruitCollection-v0", FruitCollectionEnv)
register("FruitCollection-Large-v0", make_large)
