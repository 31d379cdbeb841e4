"""MiniGrid as a :class:`~rewardlab.envs.BatchedEnv`: the step and the egocentric view as
tensor code over all envs, the layouts from MiniGrid's own generator."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium import spaces

from rewardlab.common.compiled import source_fingerprint
from rewardlab.envs.batched_minigrid.layouts import (
    BALL,
    BOX,
    CLOSED,
    COLOUR_SHIFT,
    DOOR,
    EMPTY,
    FLOOR,
    GOAL,
    KEY,
    LAVA,
    LOCKED,
    NOTHING,
    OPEN,
    STATE_SHIFT,
    TARGET_SHIFT,
    WALL,
    WALL_CODE,
    Rows,
    decode_layout,
    encode_layout,
    row_visibility_table,
    success_rule,
    target_of,
)
from rewardlab.envs.core import _RUN_STATE, BatchedEnv, WholeNumberBox, object_fingerprint

VIEW = 7  # MiniGrid's agent_view_size, the default of every batched id
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE = range(7)


@functools.cache
def _visibility_table() -> np.ndarray:
    return row_visibility_table()


def view_offsets() -> np.ndarray:
    """Where each cell of the agent's view lies relative to the agent, per direction.

    Entry ``[axis, vx * 7 + vy, direction]`` is the x (axis 0) or y (axis 1) offset of view
    cell ``(vx, vy)``: MiniGrid's ``get_view_exts`` slice rotated left ``direction + 1``
    times puts the agent at ``(3, 6)`` looking towards ``vy = 0``, so the cell lies
    ``6 - vy`` steps ahead and ``vx - 3`` steps to the agent's right.

    :return: int64 ``(2, 49, 4)``
    """
    ahead = np.array([(1, 0), (0, 1), (-1, 0), (0, -1)])  # MiniGrid's DIR_TO_VEC
    right = np.stack([-ahead[:, 1], ahead[:, 0]], axis=1)  # MiniGrid's right_vec
    vx, vy = np.meshgrid(np.arange(VIEW), np.arange(VIEW), indexing="ij")
    forward = (VIEW - 1 - vy).reshape(-1, 1)
    lateral = (vx - VIEW // 2).reshape(-1, 1)
    offsets = forward[None] * ahead.T[:, None, :] + lateral[None] * right.T[:, None, :]
    return offsets.astype(np.int64)


class BatchedMiniGridEnv(BatchedEnv):
    """``num_envs`` copies of a MiniGrid task, stepped as tensor code on one device.

    MiniGrid's semantics, checked step for step against MiniGrid itself
    (``tests/envs/batched_minigrid``): the 7 actions (left, right, forward, pickup, drop,
    toggle, done); doors open, closed and locked, opened by a key of their colour; boxes
    that hold an object and give it up when toggled; lava; the reward
    ``1 - 0.9 * step_count / max_steps`` on reaching the goal (or, in ``Unlock``,
    ``UnlockPickup``, ``BlockedUnlockPickup``, ``KeyCorridor`` and ``ObstructedMaze``, on
    opening the door or picking up the object of the mission); truncation at ``max_steps``.

    - Observation: the agent's ``7 x 7 x 3`` view (object, colour and state index per cell),
      with MiniGrid's occlusion (``see_through_walls=False``, all but ``Empty``) and the carried object shown
      at the agent's cell, flattened to ``(147,)`` float32 in MiniGrid's ``(x, y, channel)``
      order: what the Gymnasium adapter gives for the same id (``rewardlab.envs.minigrid``).
    - Actions: ``Discrete(7)``.
    - Layouts: a pool of ``layouts`` reset states made once, at construction, by MiniGrid's
      own generator (``env.reset(seed=s)`` for ``layouts`` seeds drawn from ``seed``): the
      distribution of rooms, doors, keys and goals is MiniGrid's, over that many layouts.
      Each reset draws one from the pool with the env's torch generator. Making a layout
      costs MiniGrid's reset, about half a millisecond (``benchmarks/minigrid_throughput.py``
      reports the time for its ids), so the default 4096 take a few seconds once.

    The state of a copy is one int16 column (:class:`~rewardlab.envs.batched_minigrid.layouts.Rows`):
    the grid's cell codes, the contents of its boxes (where the task has boxes), the
    agent's position, direction and carried object, and MiniGrid's ``step_count``.

    Example::

        >>> import torch
        >>> from rewardlab import envs
        >>> env = envs.make("MiniGrid-DoorKey-8x8-v0", num_envs=4, seed=0, layouts=16)
        >>> obs, info = env.reset()
        >>> obs.shape
        torch.Size([4, 147])
        >>> obs, reward, terminated, truncated, info = env.step(torch.full((4,), 2))

    :param num_envs: how many copies to run
    :param env_id: the MiniGrid id, e.g. ``"MiniGrid-KeyCorridorS3R3-v0"``
    :param layouts: how many layouts the pool holds, at least 1
    :param max_episode_steps: MiniGrid's ``max_steps`` (the time limit and the reward's
        denominator); ``None`` keeps the id's own
    :param kwargs: ``device``, ``seed``, ``compile`` and ``validate_actions`` of
        :class:`rewardlab.envs.BatchedEnv`
    :raises ImportError: minigrid is not installed
    :raises ValueError: an id MiniGrid does not know, or whose step adds rules this env does
        not reproduce, or a bad ``layouts``
    """

    state_dtype = torch.int16
    metadata = {**BatchedEnv.metadata, "render_fps": 10}

    def __init__(
        self,
        num_envs: int,
        env_id: str = "MiniGrid-DoorKey-8x8-v0",
        layouts: int = 4096,
        max_episode_steps: int | None = None,
        **kwargs: Any,
    ):
        if isinstance(layouts, bool) or not isinstance(layouts, int | np.integer) or layouts < 1:
            raise ValueError(f"layouts must be a positive int (the size of the layout pool), got {layouts!r}")
        try:
            import minigrid  # noqa: F401  (registers the MiniGrid ids with Gymnasium)
        except ImportError as error:
            raise ImportError(
                "MiniGrid envs need the minigrid package: pip install 'rewardlab[minigrid]'"
            ) from error
        self.gymnasium_id = env_id
        make_kwargs = {} if max_episode_steps is None else {"max_steps": int(max_episode_steps)}
        try:
            source = gymnasium.make(env_id, **make_kwargs).unwrapped
        except gymnasium.error.Error as error:
            raise ValueError(f"env_id={env_id!r} is not a MiniGrid id Gymnasium knows: {error}") from error
        if not hasattr(source, "grid") or getattr(source, "agent_view_size", VIEW) != VIEW:
            raise ValueError(
                f"env_id={env_id!r} is not a MiniGrid task with a 7 x 7 view; use the Gymnasium "
                "adapter for it (rewardlab.envs.GymnasiumBatchedEnv)"
            )
        self.see_through_walls = bool(source.see_through_walls)
        self.success = success_rule(source)
        self.layout_seeds = np.random.default_rng(kwargs.get("seed")).integers(
            0, 2**31 - 1, size=int(layouts)
        )
        columns, boxes = self._make_layouts(source)
        self.rows = Rows(source.width, source.height, boxes)
        super().__init__(
            num_envs,
            WholeNumberBox(0.0, 255.0, (VIEW * VIEW * 3,), dtype=np.float32),
            spaces.Discrete(7),
            max_episode_steps=int(source.max_steps),
            **kwargs,
        )
        self.max_steps = int(source.max_steps)
        self.state_dim = self.rows.dim
        self._layouts = torch.as_tensor(columns.T.copy(), device=self.device)
        self.offsets = torch.as_tensor(view_offsets(), dtype=torch.int16, device=self.device)
        self.visibility = torch.as_tensor(_visibility_table(), device=self.device)
        self.row_bits = torch.tensor([1 << i for i in range(VIEW)], dtype=torch.int64, device=self.device)
        self.column_index = torch.arange(VIEW, dtype=torch.int64, device=self.device)

    def _make_layouts(self, source: Any) -> tuple[np.ndarray, bool]:
        """The pool's columns ``(layouts, dim)`` as MiniGrid makes them, and whether any
        layout has a box (without boxes, the contents plane and row are left out)."""
        full = Rows(source.width, source.height, boxes=True)
        columns = []
        for layout_seed in self.layout_seeds:
            source.reset(seed=int(layout_seed))
            columns.append(encode_layout(source, full, target_of(source, self.success)))
        pool = np.stack(columns)
        boxes = bool(np.any(pool[:, : full.cells] & 15 == BOX))
        if not boxes:
            keep = np.r_[0 : full.cells, full.agent_x : full.carried_contents, full.step_count]
            pool = pool[:, keep]
        return pool, boxes

    # ----------------------------------------------------------------- the task
    def reset_bounds(
        self, options: dict[str, Any] | None
    ) -> tuple[Sequence[float], Sequence[float]]:
        """Unused bounds (reset states come from the layout pool), as the contract asks.

        :param options: not used
        """
        return [0] * self.state_dim, [0] * self.state_dim

    def _draw_reset_states(self, count: int) -> torch.Tensor:
        """``count`` reset states drawn from the layout pool with the env's generator."""
        picks = torch.randint(
            self._layouts.shape[1], (count,), generator=self.generator, device=self.device
        )
        return self._layouts[:, picks]

    def transition(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of ``MiniGridEnv.step`` (and the success rule of the task) for every copy.

        :param state: int16 ``(state_dim, num_envs)``
        :param actions: int64 ``(num_envs,)`` in ``0..6``
        """
        rows = self.rows
        grid = state[: rows.cells]
        x, y = state[rows.agent_x], state[rows.agent_y]
        direction, carrying = state[rows.direction], state[rows.carrying]
        step_count = state[rows.step_count] + 1

        dx = (direction == 0).short() - (direction == 2).short()
        dy = (direction == 1).short() - (direction == 3).short()
        front = ((y + dy) * rows.width + (x + dx)).long().unsqueeze(0)
        cell = grid.gather(0, front).squeeze(0)
        kind = cell & 15
        door_state = cell >> STATE_SHIFT & 3

        turn = (actions == RIGHT).short() - (actions == LEFT).short()
        direction = (direction + turn) & 3

        forward = actions == FORWARD
        passable = (kind == EMPTY) | (kind == FLOOR) | (kind == GOAL) | (kind == LAVA)
        passable = passable | ((kind == DOOR) & (door_state == OPEN))
        moves = forward & passable
        x = torch.where(moves, x + dx, x)
        y = torch.where(moves, y + dy, y)
        goal = forward & (kind == GOAL)
        terminated = goal | (forward & (kind == LAVA))

        hand_empty = carrying == NOTHING
        picks = (actions == PICKUP) & ((kind == KEY) | (kind == BALL) | (kind == BOX)) & hand_empty
        drops = (actions == DROP) & (kind == EMPTY) & ~hand_empty
        toggles = actions == TOGGLE
        # a locked door opens with a key of its colour; an unlocked one flips open <-> closed
        key_fits = ((carrying & 15) == KEY) & ((carrying ^ cell) >> COLOUR_SHIFT & 7 == 0)
        door = toggles & (kind == DOOR)
        unlocks = door & (door_state == LOCKED) & key_fits
        flips = door & (door_state != LOCKED)
        new_door_state = torch.where(unlocks | (door_state == CLOSED), OPEN, CLOSED).short()
        door_cell = (cell & ~(3 << STATE_SHIFT)) | (new_door_state << STATE_SHIFT)
        opens_box = toggles & (kind == BOX)

        new_cell = torch.where(unlocks | flips, door_cell, cell)
        new_cell = torch.where(picks, NOTHING, torch.where(drops, carrying, new_cell))
        planes = []
        if rows.boxes:
            contents = state[rows.contents : rows.contents + rows.cells]
            inside = contents.gather(0, front).squeeze(0)
            carried_contents = state[rows.carried_contents]
            new_cell = torch.where(opens_box, inside, new_cell)
            new_inside = torch.where(picks | opens_box, NOTHING, inside)
            new_inside = torch.where(drops, carried_contents, new_inside)
            carried_contents = torch.where(picks, inside, torch.where(drops, NOTHING, carried_contents))
            planes.append(contents.scatter(0, front, new_inside.unsqueeze(0)))
        planes.insert(0, grid.scatter(0, front, new_cell.unsqueeze(0)))
        carrying = torch.where(picks, cell, torch.where(drops, NOTHING, carrying))

        success = goal
        if self.success == "pickup":
            success = success | ((actions == PICKUP) & (carrying >> TARGET_SHIFT & 1 == 1))
        elif self.success == "open":
            success = success | (toggles & (new_cell >> TARGET_SHIFT & 1 == 1) & (kind == DOOR)
                                 & (new_cell >> STATE_SHIFT & 3 == OPEN))  # fmt: skip
        terminated = terminated | success
        # MiniGrid's _reward in float64, as it computes it, then float32
        reward = 1 - 0.9 * (step_count.double() / self.max_steps)
        reward = torch.where(success, reward, 0.0).float()

        agent = [x, y, direction, carrying]
        if rows.boxes:
            agent.append(carried_contents)
        agent.append(step_count)
        planes.append(torch.stack(agent))
        return torch.cat(planes), reward, terminated

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """MiniGrid's ``gen_obs()["image"]`` of every copy, flattened: ``(num_envs, 147)`` float32.

        :param state: int16 ``(state_dim, num_envs)``
        """
        rows = self.rows
        x, y = state[rows.agent_x], state[rows.agent_y]
        direction = state[rows.direction].long()
        # the world cell under each view cell (vx * 7 + vy), walls outside the grid
        seen_x = x + self.offsets[0][:, direction]
        seen_y = y + self.offsets[1][:, direction]
        inside = (seen_x >= 0) & (seen_x < rows.width) & (seen_y >= 0) & (seen_y < rows.height)
        index = seen_y.clamp(0, rows.height - 1) * rows.width + seen_x.clamp(0, rows.width - 1)
        cells = state[: rows.cells].gather(0, index.long())
        cells = torch.where(inside, cells, WALL_CODE)  # (49, num_envs)

        cells = self._hide_occluded(cells)
        agent_cell = (VIEW // 2) * VIEW + VIEW - 1
        cells = torch.cat([cells[:agent_cell], state[rows.carrying].unsqueeze(0), cells[agent_cell + 1 :]])
        codes = cells.T
        image = torch.stack([codes & 15, codes >> COLOUR_SHIFT & 7, codes >> STATE_SHIFT & 3], dim=2)
        return image.reshape(-1, VIEW * VIEW * 3).float()

    def _hide_occluded(self, cells: torch.Tensor) -> torch.Tensor:
        """MiniGrid's ``process_vis``: walls and closed doors hide what lies behind them
        (code 0, ``unseen``), unless the task sees through walls (``Empty``).

        :param cells: int16 ``(49, num_envs)`` codes of the view, cell ``vx * 7 + vy``
        """
        if self.see_through_walls:
            return cells
        kind = cells & 15
        see_behind = ~((kind == WALL) | ((kind == DOOR) & (cells >> STATE_SHIFT & 3 != OPEN)))
        see_bits = (see_behind.view(VIEW, VIEW, -1).long() * self.row_bits.view(VIEW, 1, 1)).sum(0)
        marked = torch.full_like(see_bits[0], 1 << (VIEW // 2))  # the agent's cell
        visible_rows = []
        for row in reversed(range(VIEW)):
            entry = self.visibility[marked | see_bits[row] << VIEW]
            visible_rows.append(entry & (1 << VIEW) - 1)
            marked = entry >> VIEW
        visible_bits = torch.stack(visible_rows[::-1])  # (vy, num_envs)
        visible = (visible_bits.unsqueeze(0) >> self.column_index.view(VIEW, 1, 1)) & 1 == 1
        return torch.where(visible.view(VIEW * VIEW, -1), cells, 0)

    # ------------------------------------------------------------- the contract
    def step_fingerprint(self) -> str:
        """:meth:`BatchedEnv.step_fingerprint`, without the layout pool (the step never
        reads it: a compiled step serves every seed)."""
        skip = _RUN_STATE | {"_layouts", "layout_seeds"}
        return object_fingerprint(self, source_fingerprint("rewardlab.envs"), skip=skip)

    def write_gymnasium_state(self, gymnasium_env: gymnasium.Env, index: int) -> None:
        """Put copy ``index``'s grid, agent and carried object into an unwrapped MiniGrid env.

        :param gymnasium_env: e.g. ``gymnasium.make(env_id).unwrapped``, after reset
        :param index: which copy to copy
        """
        decode_layout(self.state[index].cpu().numpy(), self.rows, gymnasium_env)

    def read_gymnasium_state(self, gymnasium_env: gymnasium.Env, index: int) -> None:
        """Make copy ``index`` the state of an unwrapped MiniGrid env of the same task: its
        grid, agent, carried object and step count (the inverse of
        :meth:`write_gymnasium_state`; the state is not drawn from the pool).

        :param gymnasium_env: e.g. ``gymnasium.make(env_id).unwrapped``, after reset
        :param index: which copy to overwrite
        """
        if self._state is None:
            raise RuntimeError(f"{self} has no state yet: call reset() first")
        if not 0 <= index < self.num_envs:
            raise ValueError(f"index={index} is not a copy of this env: use 0..{self.num_envs - 1}")
        column = encode_layout(gymnasium_env, self.rows, target_of(gymnasium_env, self.success))
        self._state[:, index] = torch.as_tensor(column, device=self.device)
        self._elapsed[index] = int(gymnasium_env.step_count)

    def __repr__(self) -> str:
        return f"BatchedMiniGridEnv({self.spec_id}, num_envs={self.num_envs}, device={self.device})"
