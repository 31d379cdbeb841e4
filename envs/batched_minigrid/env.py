"""MiniGrid as a :class:`~rewardlab.envs.BatchedEnv`: the step and the egocentric view as
tensor code over all envs, the layouts from MiniGrid's own generator."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

import gymnasium
import numpy as np
import torch
from gymnasium import spaces

from rewardlab.envs.batched_minigrid.layouts import (
    BALL,
    BOX,
    CLOSED,
    COLOUR_SHIFT,
    COMPACT_CODES,
    DOOR,
    EMPTY,
    FLOOR,
    FULL_CODES,
    GOAL,
    KEY,
    LAVA,
    LOCKED,
    NOTHING,
    OPEN,
    PAD,
    STATE_SHIFT,
    TARGET_SHIFT,
    WALL,
    NotBatchable,
    Rows,
    decode_layout,
    encode_layout,
    row_visibility_table,
    success_rule,
    target_of,
)
from rewardlab.envs.core import Actions, BatchedEnv, StepReturn, WholeNumberBox
from rewardlab.envs.minigrid import is_minigrid, mission_note, note_once

VIEW = 7  # MiniGrid's agent_view_size, the default of every batched id
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE = range(7)
_BATCHED_ARGUMENTS = ("device", "seed", "compile", "validate_actions")  # BatchedEnv's own
#: how many layouts of the pool one refresh replaces
REFRESH_CHUNK = 64
#: MiniGrid seeds of the pool's first layouts lie below this one, refreshed layouts' above it,
#: so that no env's refreshed layouts are another env's (an evaluation env's) first pool
FIRST_POOL_SEEDS = 2**31 - 1
AGENT_CELL = (VIEW // 2) * VIEW + VIEW - 1  # the agent's cell (3, 6) of the view, vx * 7 + vy


class StepEvents(NamedTuple):
    """What one step did in every copy of a batched MiniGrid task: what a ``success_fn`` and
    a ``reward_fn`` read. Every field is a ``(num_envs,)`` tensor but ``max_steps``.

    Objects are given as full cell codes (:mod:`~rewardlab.envs.batched_minigrid.layouts`):
    ``code & 15`` is MiniGrid's object index (``OBJECT_TO_IDX``: 4 door, 5 key, 6 ball,
    7 box; ``layouts.KEY`` and its neighbours name them), ``code >> 4 & 7`` its colour index
    (``COLOR_TO_IDX``), and code 1 stands for nothing.
    """

    #: int64, the actions taken (0 left, 1 right, 2 forward, 3 pickup, 4 drop, 5 toggle, 6 done)
    actions: torch.Tensor
    #: bool, walked onto the goal (which ends the episode, as in MiniGrid)
    reached_goal: torch.Tensor
    #: bool, walked into lava (which ends the episode, as in MiniGrid)
    entered_lava: torch.Tensor
    #: int64, the code of the cell in front of the agent before the step
    front: torch.Tensor
    #: int64, its code after the step (pickup, drop and toggle change it)
    front_after: torch.Tensor
    #: bool, the mission's own success in MiniGrid's tasks that have one (``SUCCESS_RULES``:
    #: picking up the target object, or opening the target door); False in the others
    target_done: torch.Tensor
    #: int64, the code of the object carried after the step, 1 for none
    carrying: torch.Tensor
    #: int64, MiniGrid's ``step_count`` after the step (1 on an episode's first step)
    step_count: torch.Tensor
    #: MiniGrid's ``max_steps``, the time limit
    max_steps: int

    # computed when read, so that a step whose rules do not read them does not pay for them
    @property
    def picked_up(self) -> torch.Tensor:
        """int64, the code of the object picked up, 1 where none was (a pickup is the only
        change the pickup action makes to the cell in front)."""
        picked = (self.actions == PICKUP) & (self.front != self.front_after)
        return torch.where(picked, self.front, NOTHING)

    @property
    def opened(self) -> torch.Tensor:
        """int64, the code (now open) of the door unlocked or opened, 1 where none was."""
        after, before = self.front_after, self.front
        opens = (self.actions == TOGGLE) & (after & 15 == DOOR) & (after >> STATE_SHIFT & 3 == OPEN)
        return torch.where(opens & (before >> STATE_SHIFT & 3 != OPEN), after, NOTHING)


def minigrid_success(events: StepEvents) -> torch.Tensor:
    """MiniGrid's success: the goal reached, or the mission's target picked up or opened.

    :param events: the step's events
    :return: bool ``(num_envs,)``
    """
    return events.reached_goal | events.target_done


def minigrid_reward(events: StepEvents, success: torch.Tensor) -> torch.Tensor:
    """MiniGrid's ``_reward``, ``1 - 0.9 * step_count / max_steps`` on success, else 0:
    computed in float64, as MiniGrid does, then float32.

    :param events: the step's events
    :param success: bool ``(num_envs,)``, the ``success_fn``'s verdict
    :return: float32 ``(num_envs,)``
    """
    reward = 1 - 0.9 * (events.step_count.double() / events.max_steps)
    return torch.where(success, reward, 0.0).float()


def _check_rule_output(value: Any, name: str, like: torch.Tensor, floating: bool) -> None:
    """Raise one line naming what a user's ``success_fn`` or ``reward_fn`` returned, unless it
    is a tensor of ``like``'s shape and device, float (``floating``) or bool."""
    expected = "a float" if floating else "a bool"
    if isinstance(value, torch.Tensor):
        kind_fits = value.is_floating_point() if floating else value.dtype == torch.bool
        if kind_fits and value.shape == like.shape and value.device == like.device:
            return
        got = f"a {value.dtype} tensor of shape {tuple(value.shape)} on {value.device}"
    else:
        got = f"a {type(value).__name__}"
    raise ValueError(
        f"{name} returned {got}; expected {expected} tensor of shape {tuple(like.shape)} on "
        f"{like.device}, one value per env"
    )


def lookup(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``table[index]`` along the first dimension, by ``index_select`` (several times
    faster than advanced indexing on CPU)."""
    return table.index_select(0, index.reshape(-1)).view(*index.shape, *table.shape[1:])


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
    Success and reward are two functions of the step's :class:`StepEvents` that a user can
    replace (``success_fn``, ``reward_fn``; MiniGrid's are :func:`minigrid_success` and
    :func:`minigrid_reward`). A success ends the episode, as do the goal and lava.

    - Observation: the agent's ``7 x 7 x 3`` view (object, colour and state index per cell),
      with MiniGrid's occlusion (``see_through_walls=False``, all but ``Empty``) and the carried object shown
      at the agent's cell, flattened to ``(147,)`` float32 in MiniGrid's ``(x, y, channel)``
      order: what the Gymnasium adapter gives for the same id (``rewardlab.envs.minigrid``).
    - Actions: ``Discrete(7)``.
    - Layouts: a pool of ``layouts`` reset states made by MiniGrid's own generator
      (``env.reset(seed=s)``, seeds drawn from ``seed``): each layout is exactly one of
      MiniGrid's, so their distribution is MiniGrid's. Each reset draws one from the pool
      with the env's torch generator. The pool refreshes as episodes start: after every
      ``reuse * 64`` episode starts, the 64 oldest layouts are replaced by new ones, so that
      a layout starts ``reuse`` episodes on average and a long run never learns a pool by
      heart. The new layouts are made ahead, in a thread, from the next seeds of the env's
      own stream, and swapped in at those fixed counts: the run stays deterministic given
      ``seed`` and the actions. The first pool's seeds lie below 2**31 - 1 and the refreshed
      ones above, so an env made with another seed (a held-out set for evaluation) never
      starts on this one's refreshed layouts. A layout costs one MiniGrid reset, 0.3 to
      5 ms on an idle core for most tasks and far more where MiniGrid's generator places
      rooms by trial and error (a pool of 4096 MultiRoom-N12-S10 layouts takes minutes:
      pass a smaller ``layouts``); ``benchmarks/minigrid_throughput.py`` reports the first
      pool's time, ``pool (s)``.

    The state of a copy is one row of bytes (:class:`~rewardlab.envs.batched_minigrid.layouts.Rows`,
    :attr:`state`): the grid's compact cell codes padded with walls, the contents of its
    boxes (where the task has boxes), the agent's position, direction and carried object;
    MiniGrid's ``step_count`` is the elapsed steps of the episode. :meth:`step` writes it in
    place, so that a learner calls :meth:`step` rather than a carried step
    (:func:`~rewardlab.envs.core.carried_steps`), and ``compile=True`` compiles its
    arithmetic, :meth:`step_values`, which gives the same values as the eager code on every
    step.

    Example::

        >>> import torch
        >>> from rewardlab import envs
        >>> env = envs.make("MiniGrid-DoorKey-8x8-v0", num_envs=4, seed=0, layouts=16)
        >>> obs, info = env.reset()
        >>> obs.shape
        torch.Size([4, 147])
        >>> obs, reward, terminated, truncated, info = env.step(torch.full((4,), 2))

    :param num_envs: how many copies to run
    :param env_id: the id of a MiniGrid task, e.g. ``"MiniGrid-KeyCorridorS3R3-v0"``, or of a
        user's ``MiniGridEnv`` subclass (``"my_module:MiniGrid-MyTask-v0"``), whose own
        ``_gen_grid`` makes the layouts
    :param layouts: how many layouts the pool holds, at least 1
    :param reuse: how many episodes a layout starts, on average, before it is replaced; at
        least 1, ``None`` for a fixed pool
    :param max_episode_steps: MiniGrid's ``max_steps`` (the time limit and the reward's
        denominator); ``None`` keeps the id's own
    :param success_fn: ``success_fn(events) -> bool (num_envs,)``, whether each copy's step
        succeeded (and so ends its episode); ``None``: MiniGrid's own. Tensor math of
        ``events`` only, for ``compile=True`` (a function that reads a tensor's value in
        Python runs eagerly, with one warning)
    :param reward_fn: ``reward_fn(events, success) -> float (num_envs,)``, the reward;
        ``None``: MiniGrid's own. With one, a task whose class has a ``_reward`` of its
        own is batched too (the function replaces it)
    :param kwargs: ``device``, ``seed``, ``compile`` and ``validate_actions`` of
        :class:`rewardlab.envs.BatchedEnv`; the others go to ``gymnasium.make`` (the task's
        own arguments, e.g. a user's ``room_size``)
    :raises ImportError: minigrid is not installed
    :raises ValueError: an id Gymnasium does not know, or a bad ``layouts``
    :raises NotBatchable: a task whose step, reward, view or objects this env does not
        reproduce (:func:`~rewardlab.envs.batched_minigrid.layouts.success_rule`)
    """

    state_dtype = torch.uint8
    metadata = {**BatchedEnv.metadata, "render_fps": 10}

    def __init__(
        self,
        num_envs: int,
        env_id: str = "MiniGrid-DoorKey-8x8-v0",
        layouts: int = 4096,
        max_episode_steps: int | None = None,
        reuse: int | None = 4,
        success_fn: Callable[[StepEvents], torch.Tensor] | None = None,
        reward_fn: Callable[[StepEvents, torch.Tensor], torch.Tensor] | None = None,
        **kwargs: Any,
    ):
        if isinstance(layouts, bool) or not isinstance(layouts, int | np.integer) or layouts < 1:
            raise ValueError(f"layouts must be a positive int (the size of the layout pool), got {layouts!r}")
        if reuse is not None and (isinstance(reuse, bool) or not isinstance(reuse, int | np.integer) or reuse < 1):
            raise ValueError(
                f"reuse must be a positive int (episodes per layout before it is replaced) or None "
                f"for a fixed pool, got {reuse!r}"
            )
        for name, function in (("success_fn", success_fn), ("reward_fn", reward_fn)):
            if function is not None and not callable(function):
                raise TypeError(
                    f"{name} must be a function of the step's StepEvents, got {function!r}"
                )
        try:
            import minigrid  # noqa: F401  (registers the MiniGrid ids with Gymnasium)
        except ImportError as error:
            raise ImportError(
                "MiniGrid envs need the minigrid package: pip install 'rewardlab[minigrid]'"
            ) from error
        self.gymnasium_id = env_id
        # what BatchedEnv does not take is the task's own (a user's room_size)
        make_kwargs = {
            name: kwargs.pop(name) for name in list(kwargs) if name not in _BATCHED_ARGUMENTS
        }
        if max_episode_steps is not None:
            make_kwargs["max_steps"] = int(max_episode_steps)
        try:
            source = gymnasium.make(env_id, **make_kwargs).unwrapped
        except gymnasium.error.Error as error:
            raise ValueError(f"env_id={env_id!r} is not a MiniGrid id Gymnasium knows: {error}") from error
        if not is_minigrid(source):
            raise NotBatchable(f"env_id={env_id!r} is not a MiniGrid task (no MiniGridEnv)")
        if source.agent_view_size != VIEW:
            raise NotBatchable(f"its view is {source.agent_view_size} cells wide, not {VIEW}")
        note_once(mission_note(source, env_id), stacklevel=3)
        #: the name of the task's ``MiniGridEnv`` class (a user's own, for one)
        self.task_class = type(source).__name__
        self.see_through_walls = bool(source.see_through_walls)
        self.success = success_rule(source, reward_replaced=reward_fn is not None)
        #: the success and reward rules (MiniGrid's own unless a user's were given)
        self.success_fn = minigrid_success if success_fn is None else success_fn
        self.reward_fn = minigrid_reward if reward_fn is None else reward_fn
        self._rules_traceable = success_fn is None and reward_fn is None
        self._seed_stream = np.random.default_rng(kwargs.get("seed"))
        #: the MiniGrid seed of each layout in the pool
        self.layout_seeds = self._seed_stream.integers(0, FIRST_POOL_SEEDS, size=int(layouts))
        # the layouts are read from the grid: the view MiniGrid's reset computes (most of a
        # reset's cost; a pure function of the grid, success_rule checked it is MiniGrid's) is
        # not needed
        source.gen_obs = dict
        full = Rows(source.width, source.height, boxes=True)
        pool = self._make_layouts(source, self.layout_seeds, full)
        boxes = bool(np.any(FULL_CODES[pool[:, : full.cells]] & 15 == BOX))
        self.rows = Rows(source.width, source.height, boxes)
        self._full_rows = full
        self._source = source  # the maker thread's generator from here on
        pool = self._compact(pool)
        super().__init__(
            num_envs,
            WholeNumberBox(0.0, 255.0, (VIEW * VIEW * 3,), dtype=np.float32),
            spaces.Discrete(7),
            max_episode_steps=int(source.max_steps),
            **kwargs,
        )
        self.max_steps = int(source.max_steps)
        self.state_dim = self.rows.dim
        device = self.device
        offsets = view_offsets()
        width = self.rows.padded_width
        self.view_steps = torch.as_tensor(offsets[0] + offsets[1] * width, device=device).T.contiguous()
        ahead = np.array([(1, 0), (0, 1), (-1, 0), (0, -1)])  # MiniGrid's DIR_TO_VEC
        self.dx = torch.as_tensor(ahead[:, 0], device=device)
        self.dy = torch.as_tensor(ahead[:, 1], device=device)
        self.visibility = torch.as_tensor(_visibility_table(), device=device)
        self.row_shifts = torch.arange(VIEW, dtype=torch.uint8, device=device).view(1, VIEW, 1)
        self.row_weights = 1 << self.row_shifts  # bit vx of a row's mask
        self.front_cell = torch.arange(VIEW * VIEW, device=device) == AGENT_CELL - 1
        self.full_codes = torch.as_tensor(FULL_CODES, device=device)
        self.compact_codes = torch.as_tensor(COMPACT_CODES, device=device)
        # what the view needs of each compact code: whether it hides what lies behind, and
        # MiniGrid's (object, colour, state) triple
        codes = self.full_codes
        kinds, door_states = codes & 15, codes >> STATE_SHIFT & 3
        self.see_behind = (~((kinds == WALL) | ((kinds == DOOR) & (door_states != OPEN)))).to(torch.uint8)
        self.decoded = torch.stack(
            [codes & 15, codes >> COLOUR_SHIFT & 7, codes >> STATE_SHIFT & 3], dim=1
        ).float()
        self._no_target = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self._layouts = torch.as_tensor(pool, device=device)
        self._layout_obs = self.observe(self._layouts)
        #: episodes a layout starts on average before it is replaced (None: a fixed pool)
        self.reuse = None if reuse is None else int(reuse)
        self._refresh_chunk = min(REFRESH_CHUNK, int(layouts))
        self._starts = 0  # episode starts since the last refresh
        self._oldest = 0  # the first slot of the next refresh
        self._maker: ThreadPoolExecutor | None = None
        self._next_chunk: Future | None = None
        if self.reuse is not None:
            self._maker = ThreadPoolExecutor(1, thread_name_prefix="minigrid-layouts")
            self._next_chunk = self._make_chunk(source)

    def _make_layouts(self, source: Any, seeds: np.ndarray, rows: Rows) -> np.ndarray:
        """State rows ``(len(seeds), rows.dim)`` as MiniGrid makes them, one per seed.

        :param source: the unwrapped MiniGrid env that generates them
        :param seeds: MiniGrid reset seeds
        :param rows: the layout of the rows
        """
        encoded = []
        for layout_seed in seeds:
            source.reset(seed=int(layout_seed))
            encoded.append(encode_layout(source, rows, target_of(source, self.success)))
        return np.stack(encoded)

    def _compact(self, pool: np.ndarray) -> np.ndarray:
        """Full rows (with a contents plane) as this env's rows: without boxes, the contents
        plane and the carried box's row are left out."""
        full = self._full_rows
        if self.rows.boxes:
            return pool
        return pool[:, np.r_[0 : full.cells, full.agent_x : full.carried_contents]]

    def _make_chunk(self, source: Any) -> Future:
        """Start making the next refresh's layouts in the maker thread, from the next seeds of
        the env's stream (drawn here, so that the stream does not depend on the thread)."""
        self._next_seeds = self._seed_stream.integers(FIRST_POOL_SEEDS, 2**62, size=self._refresh_chunk)
        return self._maker.submit(self._make_layouts, source, self._next_seeds, self._full_rows)

    def _refresh(self, started: int) -> None:
        """Count ``started`` episode starts; each ``reuse * chunk`` of them, put the chunk made
        ahead in the place of the pool's oldest layouts and start making the next.

        A layout with a box, in a pool that has none (so no contents plane), keeps its old slot.
        """
        self._starts += started
        if self.reuse is None or self._starts < self.reuse * self._refresh_chunk:
            return
        self._starts -= self.reuse * self._refresh_chunk
        if not self._next_chunk.done():
            # the swap waits, so that a run stays deterministic: the user can make it rarer
            note_once(
                f"{self.gymnasium_id}: the step waits for MiniGrid to make new layouts ({self.reuse} "
                f"episode starts a layout, reuse={self.reuse}); pass a larger reuse, or reuse=None "
                "for a fixed pool (a smaller layouts= makes it sooner)",
                stacklevel=4,  # the line that stepped, above step's threads wrapper (envs.core)
            )
        chunk, seeds = self._next_chunk.result(), self._next_seeds  # made ahead, while stepping
        self._next_chunk = self._make_chunk(self._source)
        full = self._full_rows
        fits = self.rows.boxes | ~np.any(FULL_CODES[chunk[:, : full.cells]] & 15 == BOX, axis=1)
        size = self._layouts.shape[0]
        slots = torch.as_tensor((self._oldest + np.arange(len(chunk))) % size, device=self.device)
        self._oldest = (self._oldest + len(chunk)) % size
        new = torch.as_tensor(self._compact(chunk), device=self.device)
        keep = torch.as_tensor(fits, device=self.device)
        slots, new = slots[keep], new[keep]
        self._layouts[slots] = new
        self._layout_obs[slots] = self.observe(new)
        self.layout_seeds[slots.cpu().numpy()] = seeds[fits]

    # ------------------------------------------------------------- the contract
    @property
    def state(self) -> torch.Tensor:
        """The current state as ``(num_envs, state_dim)`` uint8, one row per env laid out as
        :attr:`rows` says. The env's own tensor: read it, do not write to it."""
        if self._state is None:
            raise RuntimeError(f"{self} has no state yet: call reset() first")
        return self._state

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Start a new episode in every copy, each on a layout drawn from the pool.

        :param seed: reseed the env's generator first (``None`` continues its stream)
        :param options: not used (MiniGrid's reset takes none)
        :return: ``(obs, info)`` with obs float32 ``(num_envs, 147)``
        """
        if seed is not None:
            self.generator.manual_seed(seed)
        picks = self._pick_layouts(self.num_envs)
        self._state = self._layouts[picks]
        self._elapsed = torch.zeros(self.num_envs, dtype=torch.int32, device=self.device)
        self._last_actions = None
        return self._layout_obs[picks], {}

    def step(self, actions: Actions) -> StepReturn:
        """Advance every copy by one step; copies whose episode ends start a new one on a
        layout from the pool in the same call.

        The state is written in place: a step changes the cell in front of each agent and
        the agent's own values, so its cost does not grow with the grid. With
        ``compile=True`` the arithmetic (:meth:`step_values`) runs compiled.

        :param actions: ``(num_envs,)`` integers in ``0..6``, a tensor or numpy array
        :return: ``(obs, reward, terminated, truncated, info)``; ``info["final_obs"]`` holds
            the last observation of the episodes that ended and ``info["reward_components"]``
            the reward by name (``"extrinsic"``)
        """
        actions = self._as_action_tensor(actions)
        if self._state is None:
            raise RuntimeError(f"{self} has no state yet: call reset() first")
        if self.validate_actions:
            smallest, largest = torch.aminmax(actions)
            if smallest < 0 or largest > DONE:
                self._raise_out_of_range(actions, 0, DONE)
        if self.compile and not self._rules_traceable:
            self._check_rules_trace(actions)
        step_values = self._compiled_step(self.step_values, (self._state, self._elapsed, actions)) or self.step_values
        rows, state = self.rows, self._state
        front, cell, inside, agent, reward, terminated, obs = step_values(state, self._elapsed, actions)
        state.scatter_(1, front, cell)
        if rows.boxes:
            state.scatter_(1, front + rows.contents, inside)
        state[:, rows.agent_x :] = agent
        self._elapsed += 1
        truncated = self._elapsed >= self.max_episode_steps
        ended = (terminated | truncated).nonzero().squeeze(1)
        final_obs = obs
        if ended.numel():
            picks = self._pick_layouts(ended.numel())
            state[ended] = self._layouts[picks]
            self._elapsed[ended] = 0
            obs = obs.clone()
            obs[ended] = self._layout_obs[picks]
            self._refresh(ended.numel())
        self._last_actions = actions
        info = {"final_obs": final_obs, "reward_components": {"extrinsic": reward}}
        return obs, reward, terminated, truncated, info

    def _check_rules_trace(self, actions: torch.Tensor) -> None:
        """Trace a user's success and reward functions on fake tensors, once: one that reads a
        tensor's value in Python would be compiled with the branch the first step took, so it
        runs eagerly instead (``compile`` turns False), with one warning."""
        from torch.fx.experimental.proxy_tensor import make_fx

        flag, code = torch.zeros_like(actions, dtype=torch.bool), torch.ones_like(actions)
        example = (actions, flag, flag, code, code, flag, code, code)

        def rules(*fields: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            events = StepEvents(*fields, max_steps=self.max_steps)
            success = self.success_fn(events)
            return success, self.reward_fn(events, success)

        try:
            make_fx(rules, tracing_mode="fake")(*example)
        except Exception as error:  # whatever a user's function raises when traced
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            warnings.warn(
                f"compile=True: success_fn/reward_fn cannot be traced ({type(error).__name__}: "
                f"{reason}); the step runs eagerly. Write them as tensor math on the events, "
                "without Python reading a tensor's value (if, .item(), bool())",
                stacklevel=3,
            )
            self.compile = False
        self._rules_traceable = True

    def _pick_layouts(self, count: int) -> torch.Tensor:
        """``count`` indices into the layout pool, drawn with the env's generator."""
        return torch.randint(
            self._layouts.shape[0], (count,), generator=self.generator, device=self.device
        )

    # ----------------------------------------------------------------- the task
    def step_values(
        self, state: torch.Tensor, elapsed: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        """One step of ``MiniGridEnv.step`` (and the task's success rule) for every copy, as a
        pure function: what changes and the observation after it. The rules work on full
        codes; the state holds compact ones (:mod:`~rewardlab.envs.batched_minigrid.layouts`).

        The success and the reward are :attr:`success_fn` and :attr:`reward_fn` of the
        step's :class:`StepEvents`, checked here (shape, dtype, device) at each call.

        :param state: uint8 ``(num_envs, state_dim)``
        :param elapsed: int32 ``(num_envs,)``, MiniGrid's ``step_count`` before the step
        :param actions: int64 ``(num_envs,)`` in ``0..6``
        :return: ``(front, cell, inside, agent, reward, terminated, obs)``: the column of
            the cell in front of each agent ``(num_envs, 1)`` and its new code and new box
            contents (uint8 ``(num_envs, 1)``; ``inside`` is empty where the task has no
            boxes), the new values from ``rows.agent_x`` on (uint8 ``(num_envs, k)``), the
            float32 reward, the bool termination and the float32 ``(num_envs, 147)`` view
        """
        rows = self.rows
        x, y, direction, carrying = state[:, rows.agent_x : rows.carrying + 1].long().unbind(1)
        carrying = lookup(self.full_codes, carrying)
        step_count = elapsed.long() + 1

        dx, dy = lookup(self.dx, direction), lookup(self.dy, direction)
        front = ((y + PAD + dy) * rows.padded_width + x + PAD + dx).unsqueeze(1)
        cell = lookup(self.full_codes, state.gather(1, front).squeeze(1).long())
        kind = cell & 15
        door_state = cell >> STATE_SHIFT & 3

        turn = (actions == RIGHT).long() - (actions == LEFT).long()
        direction = (direction + turn) & 3

        forward = actions == FORWARD
        passable = (kind == EMPTY) | (kind == FLOOR) | (kind == GOAL) | (kind == LAVA)
        passable = passable | ((kind == DOOR) & (door_state == OPEN))
        moves = forward & passable
        x = x + dx * moves
        y = y + dy * moves
        goal = forward & (kind == GOAL)
        lava = forward & (kind == LAVA)
        terminated = goal | lava

        hand_empty = carrying == NOTHING
        picks = (actions == PICKUP) & ((kind == KEY) | (kind == BALL) | (kind == BOX)) & hand_empty
        drops = (actions == DROP) & (kind == EMPTY) & ~hand_empty
        toggles = actions == TOGGLE
        # a locked door opens with a key of its colour; an unlocked one flips open <-> closed
        key_fits = ((carrying & 15) == KEY) & ((carrying ^ cell) >> COLOUR_SHIFT & 7 == 0)
        door = toggles & (kind == DOOR)
        unlocks = door & (door_state == LOCKED) & key_fits
        flips = door & (door_state != LOCKED)
        opened = unlocks | (door_state == CLOSED)
        door_cell = (cell & ~(3 << STATE_SHIFT)) | (~opened).long() << STATE_SHIFT  # OPEN 0, CLOSED 1

        new_cell = torch.where(unlocks | flips, door_cell, cell)
        new_cell = torch.where(picks, NOTHING, torch.where(drops, carrying, new_cell))
        agent = [x, y, direction]
        if rows.boxes:
            opens_box = toggles & (kind == BOX)
            inside = lookup(self.full_codes, state.gather(1, front + rows.contents).squeeze(1).long())
            carried_contents = lookup(self.full_codes, state[:, rows.carried_contents].long())
            new_cell = torch.where(opens_box, inside, new_cell)
            new_inside = torch.where(picks | opens_box, NOTHING, inside)
            new_inside = torch.where(drops, carried_contents, new_inside)
            carried_contents = torch.where(picks, inside, torch.where(drops, NOTHING, carried_contents))
        else:
            new_inside = cell[:0]
        carrying = torch.where(picks, cell, torch.where(drops, NOTHING, carrying))
        agent.append(lookup(self.compact_codes, carrying))
        if rows.boxes:
            agent.append(lookup(self.compact_codes, carried_contents))

        target_done = self._no_target
        if self.success == "pickup":
            target_done = (actions == PICKUP) & (carrying >> TARGET_SHIFT & 1 == 1)
        elif self.success == "open":
            opened_target = (new_cell >> TARGET_SHIFT & 1 == 1) & (new_cell >> STATE_SHIFT & 3 == OPEN)
            target_done = door & opened_target
        events = StepEvents(
            actions, goal, lava, cell, new_cell, target_done, carrying, step_count, self.max_steps
        )
        success = self.success_fn(events)
        _check_rule_output(success, "success_fn", goal, floating=False)
        reward = self.reward_fn(events, success)
        _check_rule_output(reward, "reward_fn", goal, floating=True)
        reward = reward.to(torch.float32)

        # the view after the step: the cells as they were but the one in front, which only
        # pickup, drop and toggle change, and they neither move nor turn the agent
        seen = ((y + PAD) * rows.padded_width + x + PAD).unsqueeze(1) + lookup(self.view_steps, direction)
        changed = self.front_cell & (actions >= PICKUP).unsqueeze(1)
        new_cell = lookup(self.compact_codes, new_cell).to(torch.uint8).unsqueeze(1)
        new_inside = lookup(self.compact_codes, new_inside).to(torch.uint8).unsqueeze(1)
        agent = torch.stack(agent, dim=1).to(torch.uint8)
        cells = torch.where(changed, new_cell, state.gather(1, seen)).int()
        obs = self._image(cells, agent[:, rows.carrying - rows.agent_x])
        return front, new_cell, new_inside, agent, reward, terminated | success, obs

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """MiniGrid's ``gen_obs()["image"]`` of every copy, flattened: ``(n, 147)`` float32.

        :param state: uint8 ``(n, state_dim)``
        """
        rows = self.rows
        x, y, direction, carrying = state[:, rows.agent_x : rows.carrying + 1].long().unbind(1)
        # the cell under each view cell (vx * 7 + vy); the padding shows MiniGrid's outer walls
        agent = (y + PAD) * rows.padded_width + x + PAD
        cells = state.gather(1, agent.unsqueeze(1) + lookup(self.view_steps, direction)).int()
        return self._image(cells, carrying)

    def _image(self, cells: torch.Tensor, carrying: torch.Tensor) -> torch.Tensor:
        """The flat view from the compact codes under it (``(n, 49)``, int32) and the carried ones."""
        cells = self._hide_occluded(cells)
        cells[:, AGENT_CELL] = carrying  # a tensor of this function's own
        # embedding is the fastest row look-up on CPU
        return torch.nn.functional.embedding(cells.long(), self.decoded).view(-1, VIEW * VIEW * 3)

    def _hide_occluded(self, cells: torch.Tensor) -> torch.Tensor:
        """MiniGrid's ``process_vis``: walls and closed doors hide what lies behind them
        (code 0, ``unseen``), unless the task sees through walls (``Empty``).

        :param cells: int32 ``(n, 49)`` compact codes of the view, cell ``vx * 7 + vy``
        """
        if self.see_through_walls:
            return cells
        # one 7-bit mask per view row (vy), bit vx, shifted to the table's see_behind bits
        see = lookup(self.see_behind, cells).view(-1, VIEW, VIEW)
        see_bits = (see * self.row_weights).sum(1, dtype=torch.uint8).long() << VIEW
        marked = torch.full_like(see_bits[:, 0], 1 << (VIEW // 2))  # the agent's cell
        visible_rows = [marked] * VIEW
        for row in reversed(range(VIEW)):
            entry = lookup(self.visibility, marked | see_bits[:, row])
            visible_rows[row] = entry
            marked = entry >> VIEW
        # (n, vy) row masks to (n, vx, vy) cells
        visible_bits = (torch.stack(visible_rows, dim=1) & (1 << VIEW) - 1).to(torch.uint8)
        visible = (visible_bits.unsqueeze(1) >> self.row_shifts) & 1
        return cells * visible.view(-1, VIEW * VIEW)

    def write_gymnasium_state(self, gymnasium_env: gymnasium.Env, index: int) -> None:
        """Put copy ``index``'s grid, agent and carried object into an unwrapped MiniGrid env.

        :param gymnasium_env: e.g. ``gymnasium.make(env_id).unwrapped``, after reset
        :param index: which copy to copy
        """
        decode_layout(self.state[index].cpu().numpy(), self.rows, gymnasium_env, int(self._elapsed[index]))

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
        self._state[index] = torch.as_tensor(column, device=self.device)
        self._elapsed[index] = int(gymnasium_env.step_count)

    def close(self) -> None:
        """Stop making layouts (the thread ends here: a process that forks after closing its
        envs, as the search's fork server does, holds no thread of theirs), and release the
        renderer."""
        if self._maker is not None:
            self._maker.shutdown(wait=True, cancel_futures=True)
            self._maker = None
        super().close()

    def __repr__(self) -> str:
        return f"BatchedMiniGridEnv({self.spec_id}, num_envs={self.num_envs}, device={self.device})"
