"""Descriptions of MiniGrid tasks for reward programs: the agent's view, what is in front of it
and what it carries, named.

MiniGrid's view is made of labels: an object type, a colour and a door state per cell. The
description says so (each such variable is categorical: its values compare with ``==``,
``front_object == 5`` is a key, and ``front_object / 10`` means nothing), and derives the
indicators a reader of the task would reach for (``has_key``, ``door_open``, ``goal_visible``)
and one true magnitude, ``goal_distance``. The mission text is not described: the policy does
not see it, and the search's task says what to do. The batched ids get their family's
summary and success rule; any other MiniGrid env whose observation is the flat view (a
user's ``MiniGridEnv`` subclass) gets the same variables through
:func:`~rewardlab.envs.descriptions.register_describer`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch

from rewardlab.envs.batched_minigrid.env import BatchedMiniGridEnv
from rewardlab.envs.core import BatchedEnv
from rewardlab.envs.descriptions import (
    ActionVariable,
    EnvDescription,
    Reader,
    StateVariable,
    column,
    register_describer,
    register_description,
    success_if_terminated,
)

VIEW = 7
FRONT = (3, 5)  # the view cell in front of the agent, which stands at (3, 6) facing y = 0
AGENT = (3, 6)

#: what each family of tasks asks, by id prefix
TASKS = {
    "MiniGrid-Empty": "reach the green goal square of an empty room",
    "MiniGrid-FourRooms": "reach the green goal square in one of four rooms joined by gaps in the walls",
    "MiniGrid-DoorKey": "pick up the key, unlock the door of its colour (toggle it while carrying the "
    "key) and reach the green goal square behind it",
    "MiniGrid-UnlockPickup": "pick up the box in the locked room: fetch the key of the door's colour, "
    "unlock the door and pick up the box",
    "MiniGrid-BlockedUnlockPickup": "pick up the box in the locked room: move the ball that blocks the "
    "door (pick it up and drop it elsewhere), fetch the key of the door's colour, unlock the door and "
    "pick up the box",
    "MiniGrid-Unlock": "open the locked door: pick up the key of its colour and toggle the door",
    "MiniGrid-KeyCorridor": "pick up the ball behind a locked door; the key of that door lies in "
    "another room off the corridor, behind a closed door",
    "MiniGrid-MultiRoom": "reach the green goal square through a chain of rooms joined by closed "
    "doors (toggle a door to open it)",
    "MiniGrid-ObstructedMaze": "pick up the blue ball in a maze of rooms: doors may be locked (their "
    "keys may be hidden in boxes: toggle a box to open it) and blocked by balls (move them away)",
    "MiniGrid-LavaGap": "reach the green goal square through the gap in a wall of lava; stepping "
    "into lava ends the episode with no reward",
    "MiniGrid-LavaCrossing": "reach the green goal square across rivers of lava through their "
    "gaps; stepping into lava ends the episode with no reward",
    "MiniGrid-SimpleCrossing": "reach the green goal square through the gaps in walls",
}

#: MiniGrid's object, colour and door-state indices, named (value i is called names[i])
OBJECT_NAMES = ("unseen", "empty", "wall", "floor", "door", "key", "ball", "box", "goal", "lava")
COLOUR_NAMES = ("red", "green", "blue", "purple", "yellow", "grey")
OBJECTS = ", ".join(f"{index} {name}" for index, name in enumerate(OBJECT_NAMES))
COLOURS = ", ".join(f"{index} {name}" for index, name in enumerate(COLOUR_NAMES))
DOOR_STATES = "0 open, 1 closed, 2 locked"
#: ``front_state``: MiniGrid's door state shifted by one, so that 0 says no door is in front
#: (MiniGrid writes 0, a door's "open", for every object without a state)
FRONT_STATES = ("no door", "open", "closed", "locked")
DOOR, KEY, GOAL = OBJECT_NAMES.index("door"), OBJECT_NAMES.index("key"), OBJECT_NAMES.index("goal")
#: ``goal_distance`` where no goal is in view: one more than the farthest visible cell's 3 + 6
GOAL_UNSEEN = 10.0
NO_YES = ("no", "yes")
#: the ``MiniGridEnv`` class and the observation size of a view a description here reads
MINIGRID_MODULE = "minigrid.minigrid_env"
FLAT_VIEW = VIEW * VIEW * 3


def _view(obs: torch.Tensor) -> torch.Tensor:
    return obs.view(-1, VIEW, VIEW, 3)


def _cell(cell: tuple[int, int], channel: int) -> Callable[[torch.Tensor], torch.Tensor]:
    return column((cell[0] * VIEW + cell[1]) * 3 + channel)


def front_state(obs: torch.Tensor) -> torch.Tensor:
    """The state of the door in front (:data:`FRONT_STATES`): 0 where the front cell is no door.

    :param obs: flat views ``(N, 147)``.
    """
    front = _view(obs)[:, FRONT[0], FRONT[1]]
    return torch.where(front[:, 0] == DOOR, front[:, 2] + 1, torch.zeros_like(front[:, 2]))


def has_key(obs: torch.Tensor) -> torch.Tensor:
    """1 where the agent carries a key, else 0.

    :param obs: flat views ``(N, 147)``.
    """
    return (_view(obs)[:, AGENT[0], AGENT[1], 0] == KEY).float()


def door_open(obs: torch.Tensor) -> torch.Tensor:
    """1 where a door the agent sees (the one in front, or any other in view) is open, else 0.

    :param obs: flat views ``(N, 147)``.
    """
    view = _view(obs)
    return ((view[..., 0] == DOOR) & (view[..., 2] == 0)).flatten(1).any(dim=1).float()


def goal_visible(obs: torch.Tensor) -> torch.Tensor:
    """1 where a goal square is in view, else 0.

    :param obs: flat views ``(N, 147)``.
    """
    return (_view(obs)[..., 0] == GOAL).flatten(1).any(dim=1).float()


def goal_distance(obs: torch.Tensor) -> torch.Tensor:
    """Steps (``|dx| + |dy|``, walls ignored) from the agent to the nearest goal square in view;
    :data:`GOAL_UNSEEN` where none is.

    :param obs: flat views ``(N, 147)``.
    """
    goal = _view(obs)[..., 0] == GOAL  # (N, x, y)
    x = torch.arange(VIEW, device=obs.device).view(1, VIEW, 1)
    y = torch.arange(VIEW, device=obs.device).view(1, 1, VIEW)
    steps = ((x - AGENT[0]).abs() + (y - AGENT[1]).abs()).float().expand_as(goal)
    return torch.where(goal, steps, torch.full_like(steps, GOAL_UNSEEN)).flatten(1).amin(dim=1)


def view_variables() -> tuple[StateVariable, ...]:
    """The state variables of MiniGrid's egocentric view (``(N, 147)`` flat observations):
    the view itself, the cell in front and what the agent carries as categories, and the
    indicators and distance derived from them."""
    def categorical(name: str, meaning: str, names: tuple[str, ...], read: Reader) -> StateVariable:
        return StateVariable(name, meaning, low=0, high=len(names) - 1, read=read,
                             categories=names)

    return (
        StateVariable(
            "obs",
            "the agent's view as the policy sees it, flat, shape (N, 147): view (below) reshaped "
            "to (N, 147), cell (x, y) channel c at column (x * 7 + y) * 3 + c",
            low=0, high=10,
        ),
        StateVariable(
            "view",
            "the agent's egocentric 7 x 7 view, shape (N, 7, 7, 3): view[:, x, y] is the (object, "
            "colour, state) index triple of the cell x columns from the left and y rows from the "
            "top; the agent stands at x=3, y=6 facing towards y=0, so view[:, 3, 5] is the cell in "
            f"front of it and view[:, 3, 6] shows what it carries. Objects: {OBJECTS}; colours: "
            f"{COLOURS}; door states: {DOOR_STATES}. Cells hidden behind walls and closed doors "
            "are 0 (unseen). The agent's compass direction is not observed",
            low=0, high=10, read=_view,
        ),
        categorical("front_object", "the object in front of the agent", OBJECT_NAMES,
                    _cell(FRONT, 0)),
        categorical("front_colour", "its colour (red also where it has none)", COLOUR_NAMES,
                    _cell(FRONT, 1)),
        categorical("front_state", "the state of the door in front, 0 where the front is no door",
                    FRONT_STATES, front_state),
        categorical("carrying_object", "the object the agent carries (1 = nothing)",
                    ("", "nothing", "", "", "", "key", "ball", "box"), _cell(AGENT, 0)),
        categorical("carrying_colour", "its colour (red also when carrying nothing)", COLOUR_NAMES,
                    _cell(AGENT, 1)),
        categorical("has_key", "whether the agent carries a key", NO_YES, has_key),
        categorical("door_open", "whether a door in view (in front or anywhere visible) is open",
                    NO_YES, door_open),
        categorical("goal_visible", "whether a goal square is in view", NO_YES, goal_visible),
        StateVariable("goal_distance", "steps from the agent to the nearest goal square in view "
                      f"(|dx| + |dy|, walls ignored); {GOAL_UNSEEN:g} where no goal is in view, and at "
                      "the step onto the goal (the agent's own cell shows what it carries)",
                      low=0, high=GOAL_UNSEEN, read=goal_distance),
    )  # fmt: skip


ACTIONS = ActionVariable(
    "0 = turn left, 1 = turn right, 2 = move forward, 3 = pick up the object in front, "
    "4 = drop the carried object in front, 5 = toggle the object in front (open or close "
    "a door, unlock it while carrying the key of its colour, open a box), 6 = done (nothing)"
)


#: what every MiniGrid description says of the mission
_MISSION = ("The mission text is not observed and not described (the policy sees only the view): "
            "the task says what to do.")


def minigrid_description(env_id: str) -> EnvDescription:
    """The description of one batched MiniGrid task.

    :param env_id: a MiniGrid id with a family in :data:`TASKS`
    :raises ValueError: an id of no family here
    """
    # the longest prefix first: MiniGrid-UnlockPickup before MiniGrid-Unlock
    family = next((prefix for prefix in sorted(TASKS, key=len, reverse=True) if env_id.startswith(prefix)), None)
    if family is None:
        raise ValueError(f"env_id={env_id!r} is not one of the MiniGrid families {sorted(TASKS)}")
    lava = "Lava" in family
    return EnvDescription(
        env_id=env_id,
        summary=f"A MiniGrid gridworld: {TASKS[family]}. Success pays 1 - 0.9 * steps / max_steps "
        "and ends the episode; every other step pays 0, and the episode is truncated at max_steps. "
        + _MISSION,
        state=view_variables(),
        action=ACTIONS,
        success_metric="the env's return (1 - 0.9 * steps / max_steps on success, else 0)"
        + ("" if lava else " and the success rate"),
        # in lava tasks stepping into lava terminates too, which the last view cannot tell apart
        success=None if lava else success_if_terminated,
        terminated_meaning="the agent stepped into lava (no reward) or reached the goal (reward)"
        if lava else "the task was done (reward > 0)",
    )


def user_minigrid_description(env_id: str, env: BatchedEnv) -> EnvDescription | None:
    """The view's description for any MiniGrid env without one of its own (a user's
    ``MiniGridEnv`` subclass, ``module:MiniGrid-MyTask-v0``), or ``None`` when ``env`` is no
    MiniGrid env whose observation is the flat ``7 x 7 x 3`` view. Its reward and what ends its
    episodes are the user's, so its fitness is its return and no success rule is assumed.

    :param env_id: the id.
    :param env: one copy of its batched env.
    """
    if tuple(env.single_observation_space.shape or ()) != (FLAT_VIEW,):
        return None
    minigrid_env = sys.modules.get(MINIGRID_MODULE)  # imported by whatever made a MiniGrid env
    copies = getattr(env, "envs", None)  # the Gymnasium adapter's envs, one per copy
    unwrapped = copies[0].unwrapped if copies else None
    if isinstance(env, BatchedMiniGridEnv):
        what = f"A MiniGrid gridworld ({env.task_class})"
    elif minigrid_env is not None and isinstance(unwrapped, minigrid_env.MiniGridEnv):
        what = f"A MiniGrid gridworld ({type(unwrapped).__name__})"
    else:
        return None
    return EnvDescription(
        env_id=env_id,
        summary=f"{what}: the agent sees a 7 x 7 view ahead of it and acts on the "
        f"cell in front. {_MISSION}",
        state=view_variables(),
        action=ACTIONS,
        success_metric="the env's return (MiniGrid pays 1 - 0.9 * steps / max_steps at the goal, 0 "
        "otherwise, unless the env says else)",
        terminated_meaning="the episode reached a terminal state (in MiniGrid: the goal, or lava)",
    )


def register_minigrid_descriptions(env_ids: tuple[str, ...]) -> None:
    """Register :func:`minigrid_description` for each id.

    :param env_ids: MiniGrid ids
    """
    for env_id in env_ids:
        register_description(minigrid_description(env_id))
    register_describer(user_minigrid_description)
