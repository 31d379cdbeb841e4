"""Descriptions of the batched MiniGrid tasks for reward programs: the agent's view, what is in
front of it and what it carries, named."""

from __future__ import annotations

from collections.abc import Callable

import torch

from rewardlab.envs.descriptions import (
    ActionVariable,
    EnvDescription,
    StateVariable,
    column,
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

OBJECTS = "0 unseen, 1 empty, 2 wall, 3 floor, 4 door, 5 key, 6 ball, 7 box, 8 goal, 9 lava"
COLOURS = "0 red, 1 green, 2 blue, 3 purple, 4 yellow, 5 grey"
DOOR_STATES = "0 open, 1 closed, 2 locked"


def _view(obs: torch.Tensor) -> torch.Tensor:
    return obs.view(-1, VIEW, VIEW, 3)


def _cell(cell: tuple[int, int], channel: int) -> Callable[[torch.Tensor], torch.Tensor]:
    return column((cell[0] * VIEW + cell[1]) * 3 + channel)


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
    state = (
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
        StateVariable("front_object", f"the object in front of the agent ({OBJECTS})", low=0, high=9,
                      read=_cell(FRONT, 0)),
        StateVariable("front_colour", f"its colour ({COLOURS})", low=0, high=5, read=_cell(FRONT, 1)),
        StateVariable("front_state", f"its state if it is a door ({DOOR_STATES}), else 0", low=0, high=2,
                      read=_cell(FRONT, 2)),
        StateVariable("carrying_object", "the object the agent carries (1 = nothing, 5 key, 6 ball, 7 box)",
                      low=1, high=7, read=_cell(AGENT, 0)),
        StateVariable("carrying_colour", f"its colour ({COLOURS}; 0 when carrying nothing)", low=0, high=5,
                      read=_cell(AGENT, 1)),
    )  # fmt: skip
    return EnvDescription(
        env_id=env_id,
        summary=f"A MiniGrid gridworld: {TASKS[family]}. Success pays 1 - 0.9 * steps / max_steps "
        "and ends the episode; every other step pays 0, and the episode is truncated at max_steps.",
        state=state,
        action=ActionVariable(
            "0 = turn left, 1 = turn right, 2 = move forward, 3 = pick up the object in front, "
            "4 = drop the carried object in front, 5 = toggle the object in front (open or close "
            "a door, unlock it while carrying the key of its colour, open a box), 6 = done (nothing)"
        ),
        success_metric="the env's return (1 - 0.9 * steps / max_steps on success, else 0)"
        + ("" if lava else " and the success rate"),
        # in lava tasks stepping into lava terminates too, which the last view cannot tell apart
        success=None if lava else success_if_terminated,
        terminated_meaning="the agent stepped into lava (no reward) or reached the goal (reward)"
        if lava else "the task was done (reward > 0)",
    )


def register_minigrid_descriptions(env_ids: tuple[str, ...]) -> None:
    """Register :func:`minigrid_description` for each id.

    :param env_ids: MiniGrid ids
    """
    for env_id in env_ids:
        register_description(minigrid_description(env_id))
