"""MiniGrid's layouts as integer tensors: the cell codes of a grid and the pool of reset states.

A cell's *full code* packs MiniGrid's own encoding (object, colour and state index, as
``Grid.encode`` writes them) and one flag:

``code = object | colour << 4 | state << 7 | target << 9``

Code 1 (object ``empty``, colour 0, state 0) is an empty cell, exactly as MiniGrid encodes
``None``; it also stands for "carrying nothing" and "an empty box". A state holds each code
as one byte, its index in :data:`FULL_CODES` (the *compact code*: every object, colour,
door state and flag there is, 144 of them; compact 0 is ``unseen``), so that a state is
small enough for a step to find its cells in the processor's caches. ``target`` marks the one
object whose pickup (or opening, for a door) ends a mission-dependent task
(``UnlockPickup``'s box, ``KeyCorridor``'s and ``ObstructedMaze``'s ball, ``Unlock``'s door):
MiniGrid checks the object's identity (``self.carrying == self.obj``), and a flag on the
object is what follows it through pickups and drops.

:func:`encode_layout` reads a reset MiniGrid env into one state row;
:func:`decode_layout` writes a row back into a MiniGrid env (for rendering and parity
tests). The layouts themselves are made by MiniGrid's own generator (``env.reset(seed=s)``),
so their distribution is MiniGrid's.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

# MiniGrid's indices (minigrid.core.constants), repeated here so that the step needs no
# import of minigrid; tests check them against minigrid's own tables.
UNSEEN, EMPTY, WALL, FLOOR, DOOR, KEY, BALL, BOX, GOAL, LAVA = range(10)
OPEN, CLOSED, LOCKED = 0, 1, 2
GREY = 5
COLOUR_SHIFT, STATE_SHIFT, TARGET_SHIFT = 4, 7, 9
NOTHING = EMPTY  # the code of an empty cell, of an empty hand, of an empty box
WALL_CODE = WALL | GREY << COLOUR_SHIFT  # what MiniGrid shows outside the grid


def _full_codes() -> np.ndarray:
    codes = [
        kind | colour << COLOUR_SHIFT | state << STATE_SHIFT | target << TARGET_SHIFT
        for kind in range(LAVA + 1)
        for colour in range(6)
        for state in (range(3) if kind == DOOR else (0,))
        for target in (0, 1)
    ]
    return np.array(codes, dtype=np.int64)


#: the full code of each compact code (a state's byte); compact code 0 is ``unseen``
FULL_CODES = _full_codes()
#: the compact code of each full code (0 for codes no object has)
COMPACT_CODES = np.zeros(1 << (TARGET_SHIFT + 1), dtype=np.int64)
COMPACT_CODES[FULL_CODES] = np.arange(len(FULL_CODES))

class NotBatchable(ValueError):
    """A MiniGrid task whose dynamics the batched step does not reproduce (a ``step``, reward
    or view of its own, an object of its own): it runs through the Gymnasium adapter."""


#: the methods of ``MiniGridEnv`` that a task must leave as they are to be batched: the
#: batched step is MiniGrid's step, reward and view (``step`` may be one of
#: :data:`SUCCESS_RULES`' classes')
MINIGRID_DYNAMICS = ("step", "_reward", "reset", "gen_obs", "gen_obs_grid", "get_view_exts")

#: the success rule of each MiniGrid class whose step adds to ``MiniGridEnv.step``
#: (``"pickup"``: picking up the target object; ``"open"``: opening the target door)
SUCCESS_RULES = {
    "UnlockEnv": "open",
    "UnlockPickupEnv": "pickup",
    "BlockedUnlockPickupEnv": "pickup",
    "KeyCorridorEnv": "pickup",
    "ObstructedMazeEnv": "pickup",
}


_WORLD_OBJECTS = "minigrid.core.world_object"


def cell_code(obj: Any, target: Any = None) -> int:
    """The code of a MiniGrid ``WorldObj`` (``None``: an empty cell).

    :param obj: the object, or ``None``
    :param target: the task's target object (compared by identity, as MiniGrid does)
    """
    if obj is None:
        return NOTHING
    kind, colour, state = obj.encode()
    return kind | colour << COLOUR_SHIFT | state << STATE_SHIFT | int(obj is target) << TARGET_SHIFT


def compact_code(obj: Any, target: Any = None) -> int:
    """The compact code (a state's byte) of a MiniGrid ``WorldObj`` (``None``: an empty cell).

    :param obj: the object, or ``None``
    :param target: the task's target object (compared by identity, as MiniGrid does)
    :raises NotBatchable: an object no compact code stands for (MiniGrid's ``agent``), or of
        a class other than MiniGrid's own
    """
    code = cell_code(obj, target)
    compact = int(COMPACT_CODES[code])
    if FULL_CODES[compact] != code:
        raise NotBatchable(
            f"{obj!r} (MiniGrid encoding {obj.encode()}) has no place in a batched MiniGrid grid"
        )
    if obj is not None and type(obj).__module__ != _WORLD_OBJECTS:
        # an object class of the task's own may move, open or block differently
        raise NotBatchable(
            f"its layouts hold a {type(obj).__name__}, not one of MiniGrid's objects"
        )
    return compact


def decode_code(code: int) -> Any:
    """The MiniGrid ``WorldObj`` of a full code (``None`` for an empty cell), without contents.

    :param code: a full cell code
    """
    from minigrid.core.world_object import WorldObj

    return WorldObj.decode(code & 15, code >> COLOUR_SHIFT & 7, code >> STATE_SHIFT & 3)


#: walls around the grid in a state, so that the agent's view (up to 6 cells ahead, 3 aside)
#: never leaves the state: MiniGrid shows a wall outside the grid, and so does the padding
PAD = 6


@dataclass(frozen=True)
class Rows:
    """Where each variable sits in a state row of ``Rows.dim`` bytes (one row per env): compact
    codes for the grid, the box contents and the carried object.

    The grid is held padded with :data:`PAD` walls on every side: cell ``(x, y)`` at
    ``(y + PAD) * padded_width + x + PAD``.

    :param width: the grid's width
    :param height: the grid's height
    :param boxes: whether the state holds a plane of box contents (and the carried box's)
    """

    width: int
    height: int
    boxes: bool

    @property
    def padded_width(self) -> int:
        """The width of the padded grid."""
        return self.width + 2 * PAD

    @property
    def cells(self) -> int:
        """How many cells the padded grid has."""
        return self.padded_width * (self.height + 2 * PAD)

    def cell(self, x: int, y: int) -> int:
        """The column of grid cell ``(x, y)``."""
        return (y + PAD) * self.padded_width + x + PAD

    @functools.cached_property
    def grid_columns(self) -> np.ndarray:
        """The column of each cell in MiniGrid's order (``y * width + x``), int64."""
        y, x = np.divmod(np.arange(self.width * self.height), self.width)
        return (y + PAD) * self.padded_width + x + PAD

    @property
    def contents(self) -> int:
        """The first column of the box-contents plane (cell ``(x, y)``'s box holds the code at
        ``contents + cell(x, y)``); only meaningful where :attr:`boxes`."""
        return self.cells

    @property
    def agent_x(self) -> int:
        """Column of the agent's x."""
        return self.cells * (2 if self.boxes else 1)

    @property
    def agent_y(self) -> int:
        """Column of the agent's y."""
        return self.agent_x + 1

    @property
    def direction(self) -> int:
        """Column of the agent's direction (0 right, 1 down, 2 left, 3 up)."""
        return self.agent_x + 2

    @property
    def carrying(self) -> int:
        """Column of the carried object's code."""
        return self.agent_x + 3

    @property
    def carried_contents(self) -> int:
        """Column of the carried box's contents (only where :attr:`boxes`)."""
        return self.agent_x + 4

    @property
    def dim(self) -> int:
        """How many values a state row has."""
        return self.agent_x + (5 if self.boxes else 4)


def success_rule(env: Any, reward_replaced: bool = False) -> str:
    """``"goal"``, ``"pickup"`` or ``"open"``: how an unwrapped MiniGrid env pays its reward,
    read from its class, which must leave :data:`MINIGRID_DYNAMICS` as MiniGrid has them
    (``step`` aside in the classes of :data:`SUCCESS_RULES`).

    :param env: an unwrapped MiniGrid env
    :param reward_replaced: the batched env pays a reward function of its own, so a
        ``_reward`` of the class's own is no obstacle
    :raises NotBatchable: its class changes the step, the reward or the view in a way the
        batched step does not know, naming the method
    """
    from minigrid.minigrid_env import MiniGridEnv

    rule = None
    for cls in type(env).__mro__:
        if cls is MiniGridEnv:
            return rule or "goal"
        minigrids = cls.__module__.startswith("minigrid.")
        if rule is None and minigrids and cls.__name__ in SUCCESS_RULES:
            rule = SUCCESS_RULES[cls.__name__]
            continue
        own = [
            name
            for name in MINIGRID_DYNAMICS
            if name in vars(cls)
            and (name != "step" or rule is None)
            and (name != "_reward" or not reward_replaced)
        ]
        if own:
            hint = ""
            if own[0] == "_reward":
                hint = (
                    "; pass reward_fn= (a function of the step's StepEvents) to batch it with "
                    "that reward"
                )
            raise NotBatchable(
                f"{cls.__name__} has a {own[0]} of its own, which the batched MiniGrid does not "
                f"reproduce{hint}"
            )
    raise NotBatchable(f"{type(env).__name__} is not a MiniGridEnv")


def target_of(env: Any, rule: str) -> Any:
    """The object a mission-dependent env's success is about (``None`` for ``"goal"``)."""
    if rule == "open":
        return env.door
    if rule == "pickup":
        return env.obj
    return None


def encode_layout(env: Any, rows: Rows, target: Any = None) -> np.ndarray:
    """One state row (uint8 ``(rows.dim,)``) of an unwrapped MiniGrid env as it stands (its
    ``step_count`` is the batched env's elapsed steps, not part of the row).

    :param env: an unwrapped MiniGrid env, after ``reset``
    :param rows: the state's layout
    :param target: the task's target object (see :func:`target_of`)
    :raises ValueError: the env's grid does not fit ``rows``, or a box sits in an env
        whose state has no contents plane
    """
    if (env.width, env.height) != (rows.width, rows.height):
        raise ValueError(
            f"a {env.width} x {env.height} MiniGrid layout does not fit a state of "
            f"{rows.width} x {rows.height} cells"
        )
    nothing = compact_code(None)
    values = np.full(rows.dim, nothing, dtype=np.uint8)
    values[: rows.cells] = COMPACT_CODES[WALL_CODE]
    columns = rows.grid_columns
    values[columns] = nothing
    for index, obj in enumerate(env.grid.grid):
        if obj is None:
            continue
        cell = columns[index]
        values[cell] = compact_code(obj, target)
        if obj.type == "box":
            if not rows.boxes:
                raise ValueError("a box in a layout whose state has no contents plane")
            values[rows.contents + cell] = compact_code(obj.contains, target)
    values[rows.agent_x], values[rows.agent_y] = (int(v) for v in env.agent_pos)
    values[rows.direction] = int(env.agent_dir)
    values[rows.carrying] = compact_code(env.carrying, target)
    if rows.boxes:
        values[rows.carried_contents] = compact_code(getattr(env.carrying, "contains", None), target)
    return values


def decode_layout(values: np.ndarray, rows: Rows, env: Any, step_count: int = 0) -> None:
    """Write a state row into an unwrapped MiniGrid env of the same size (reset before).

    The target flag is not kept: the env's own ``obj``/``door`` attribute is pointed at the
    flagged object where there is one.

    :param values: int ``(rows.dim,)``, one env's state row
    :param rows: the state's layout
    :param env: the unwrapped MiniGrid env to write into
    :param step_count: its ``step_count`` (the batched env's elapsed steps)
    """
    values = [int(FULL_CODES[v]) for v in values[: rows.agent_x]] + [int(v) for v in values[rows.agent_x :]]

    def decode_with_contents(code: int, contents: int | None) -> Any:
        obj = decode_code(code)
        if obj is not None and obj.type == "box" and contents is not None:
            obj.contains = decode_code(contents)
        if obj is not None and code >> TARGET_SHIFT & 1:
            for name in ("obj", "door"):
                if hasattr(env, name):
                    setattr(env, name, obj)
        return obj

    for index in range(rows.width * rows.height):
        x, y = index % rows.width, index // rows.width
        cell = rows.cell(x, y)
        contents = values[rows.contents + cell] if rows.boxes else None
        obj = decode_with_contents(values[cell], contents)
        env.grid.grid[index] = obj
        if obj is not None:
            obj.cur_pos = np.array((x, y))
    env.agent_pos = (values[rows.agent_x], values[rows.agent_y])
    env.agent_dir = values[rows.direction]
    carried_contents = int(FULL_CODES[values[rows.carried_contents]]) if rows.boxes else None
    env.carrying = decode_with_contents(int(FULL_CODES[values[rows.carrying]]), carried_contents)
    env.step_count = step_count


def row_visibility_table() -> np.ndarray:
    """MiniGrid's ``Grid.process_vis`` for one row of the 7-wide view, for every input.

    Entry ``seen | see_behind << 7`` (two 7-bit masks over the row's cells, bit ``i`` for
    column ``i``) holds ``visible | above << 7``: the row's visible cells once the row's
    rightward and leftward passes ran, and the cells of the row above that the passes mark.
    The rows of ``process_vis`` depend on each other only through ``above``, so seven look-ups
    replace its loops (the table is computed with its own loops, below).

    :return: int64 ``(2 ** 14,)``
    """
    width = 7
    table = np.zeros(1 << 14, dtype=np.int64)
    for entry in range(1 << 14):
        mask = [bool(entry >> i & 1) for i in range(width)]
        see = [bool(entry >> (width + i) & 1) for i in range(width)]
        above = [False] * width
        for i in range(width - 1):  # the same loops as process_vis, for one row j > 0
            if mask[i] and see[i]:
                mask[i + 1] = above[i + 1] = above[i] = True
        for i in reversed(range(1, width)):
            if mask[i] and see[i]:
                mask[i - 1] = above[i - 1] = above[i] = True
        table[entry] = sum(1 << i for i in range(width) if mask[i]) | sum(
            1 << (width + i) for i in range(width) if above[i]
        )
    return table
