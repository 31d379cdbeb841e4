"""Text codecs: an observation as words for an LLM, and its answer back as an action.

A codec is what :class:`rewardlab.agents.LLMPolicy` needs of an environment (BALROG style): the task
in words, one observation in words, a named action vocabulary (or the bounds of a
continuous action) and a parser that turns the answer into an action, or ``None`` when the
answer names no valid action (the policy then falls back to a default and counts it).

- Classic control (``CartPole-v1``, ``MountainCar-v0``, ``MountainCarContinuous-v0``,
  ``Acrobot-v1``, ``Pendulum-v1``): the variables, meanings and units of the same env
  description the reward search uses (:func:`rewardlab.llm_reward.describe`);
- ``DeepSea-v0`` and ``FruitCollection-v0``: the grid position and the fruits in words;
- MiniGrid: the mission and every visible object of the agent's 7 x 7 view, named with
  MiniGrid's own object, colour and door-state names, as steps forward and left/right.

Example::

    >>> from rewardlab.agents.llm_policy import codec_for
    >>> codec = codec_for("CartPole-v1")
    >>> codec.action_names
    ('push_left', 'push_right')
    >>> codec.parse_action("I will push_right.")
    1
    >>> codec.parse_action("jump") is None
    True
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rewardlab.envs.descriptions import EnvDescription, describe

__all__ = [
    "CODEC_ENVS",
    "ContinuousActions",
    "NamedActions",
    "TextCodec",
    "classic_codec",
    "codec_for",
    "deepsea_codec",
    "fruit_codec",
    "minigrid_codec",
]

_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class NamedActions:
    """A discrete action vocabulary: action ``i`` is called ``names[i]``.

    An answer is valid when, after lower-casing and turning spaces and hyphens into
    underscores, it is one of the names, or contains exactly one of them as a word
    (``"Action: push_left"``); anything else is invalid.

    :param names: one identifier-like name per action, e.g. ``("push_left", "push_right")``.
    :param meanings: what each action does, in words (empty: the name says it).
    :param default: the name of the fallback action for invalid answers.
    """

    names: tuple[str, ...]
    meanings: tuple[str, ...] = ()
    default: str = ""

    def __post_init__(self) -> None:
        if not self.names or len(set(self.names)) != len(self.names):
            raise ValueError(f"names must be distinct and not empty, got {self.names!r}")
        if self.meanings and len(self.meanings) != len(self.names):
            raise ValueError(
                f"meanings has {len(self.meanings)} entries for {len(self.names)} names"
            )
        if self.default and self.default not in self.names:
            raise ValueError(f"default={self.default!r} is not one of {self.names}")

    @property
    def default_action(self) -> int:
        """The index of the fallback action (the first one when no default is named)."""
        return self.names.index(self.default) if self.default else 0

    def instructions(self) -> str:
        """The action list and the answer format, for the prompt."""
        rows = [
            f"- {name}: {meaning}" if meaning else f"- {name}"
            for name, meaning in zip(self.names, self.meanings or [""] * len(self.names))
        ]
        return "Actions:\n" + "\n".join(rows) + (
            f"\nAnswer with exactly one action name (e.g. {self.names[0]}) and nothing else."
        )

    def parse(self, text: str) -> int | None:
        """The action an answer names, ``None`` if it names none or several.

        :param text: the LLM's answer.
        """
        normal = re.sub(r"[\s\-]+", "_", text.strip().lower()).strip("_.`'\"*")
        if normal in self.names:
            return self.names.index(normal)
        lower = text.lower()
        found = [i for i, pattern in enumerate(self._patterns) if pattern.search(lower)]
        return found[0] if len(found) == 1 else None

    @property
    def _patterns(self) -> list[re.Pattern[str]]:
        # Each name as a whole word whose parts may be joined by "_", "-" or spaces.
        return [
            re.compile(r"(?<![a-z0-9_])" + r"[\s_\-]+".join(map(re.escape, name.split("_"))) + r"(?![a-z0-9_])")
            for name in self.names
        ]

    def to_text(self, action: Any) -> str:
        """The name of ``action`` (an index).

        :param action: an int or a 0-d array.
        """
        return self.names[int(action)]


@dataclass(frozen=True)
class ContinuousActions:
    """A continuous action of ``len(low)`` numbers, clipped to ``[low, high]``.

    An answer is valid when it contains at least as many numbers as the action has
    dimensions; the last ones are taken (the action usually ends an answer), so
    ``"torque: 1.5"`` and ``"[0.2, -0.4]"`` both parse.

    :param name: what the numbers are, e.g. ``"torque"``.
    :param low: the lower bounds, one per dimension.
    :param high: the upper bounds.
    :param meaning: what the values do, in words.
    :param default: the fallback action (default: zeros clipped to the bounds).
    """

    name: str
    low: tuple[float, ...]
    high: tuple[float, ...]
    meaning: str = ""
    default: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not self.low or len(self.low) != len(self.high) or any(
            lo > hi for lo, hi in zip(self.low, self.high)
        ):
            raise ValueError(f"bounds must be matching, ordered tuples, got {self.low}, {self.high}")

    @property
    def default_action(self) -> np.ndarray:
        """The fallback action, ``(dim,)`` float32."""
        default = self.default or (0.0,) * len(self.low)
        return self._clip(np.asarray(default, dtype=np.float64))

    def instructions(self) -> str:
        """The action's bounds and the answer format, for the prompt."""
        bounds = ", ".join(f"[{lo:g}, {hi:g}]" for lo, hi in zip(self.low, self.high))
        what = f"{self.name}: {self.meaning}" if self.meaning else self.name
        example = ", ".join("0.0" for _ in self.low)
        count = "one number" if len(self.low) == 1 else f"a list of {len(self.low)} numbers"
        return (
            f"Action: {what}; range {bounds} (values outside are clipped).\n"
            f"Answer with {count} (e.g. {example}) and nothing else."
        )

    def parse(self, text: str) -> np.ndarray | None:
        """The action in an answer, clipped to the bounds; ``None`` without enough numbers.

        :param text: the LLM's answer.
        """
        numbers = [float(match) for match in _NUMBER.findall(text)]
        if len(numbers) < len(self.low):
            return None
        values = np.asarray(numbers[len(numbers) - len(self.low) :], dtype=np.float64)
        if not np.all(np.isfinite(values)):
            return None
        return self._clip(values)

    def to_text(self, action: Any) -> str:
        """``action`` as numbers.

        :param action: an array of ``dim`` numbers (or one number).
        """
        values = np.asarray(action, dtype=np.float64).reshape(-1)
        return ", ".join(f"{value:.3g}" for value in values)

    def _clip(self, values: np.ndarray) -> np.ndarray:
        return np.clip(values, self.low, self.high).astype(np.float32)


ActionVocabulary = NamedActions | ContinuousActions


@dataclass(frozen=True)
class TextCodec:
    """An environment in words: the task, each observation, and the actions.

    :param env_id: the env it describes.
    :param task: the task and the observation's variables, for the system prompt.
    :param observation_shape: the shape of one env's observation (a batch adds a first axis).
    :param render: one observation (``observation_shape``, numpy) as text.
    :param actions: the action vocabulary.
    """

    env_id: str
    task: str
    observation_shape: tuple[int, ...]
    render: Callable[[np.ndarray], str]
    actions: ActionVocabulary

    @property
    def action_names(self) -> tuple[str, ...] | None:
        """The names of the discrete actions, ``None`` for a continuous action."""
        return self.actions.names if isinstance(self.actions, NamedActions) else None

    @property
    def default_action(self) -> Any:
        """The fallback action for an invalid answer."""
        return self.actions.default_action

    def system_text(self) -> str:
        """The task, the observation's variables and the answer format."""
        return f"{self.task}\n\n{self.actions.instructions()}"

    def observation_text(self, observation: np.ndarray) -> str:
        """One observation in words.

        :param observation: ``observation_shape``.
        """
        return self.render(np.asarray(observation))

    def parse_action(self, text: str) -> Any:
        """The action an answer names, ``None`` when it is not a valid action.

        :param text: the LLM's answer.
        """
        return self.actions.parse(text)

    def action_text(self, action: Any) -> str:
        """An action as the LLM would name it.

        :param action: an action of this env.
        """
        return self.actions.to_text(action)


# Discrete action names of the classic-control tasks, in the env's order.
_CLASSIC_ACTIONS: dict[str, NamedActions | ContinuousActions] = {
    "CartPole-v1": NamedActions(
        ("push_left", "push_right"), ("push the cart left", "push the cart right")
    ),
    "MountainCar-v0": NamedActions(
        ("accelerate_left", "coast", "accelerate_right"),
        ("accelerate to the left", "don't accelerate", "accelerate to the right"),
        default="coast",
    ),
    "Acrobot-v1": NamedActions(
        ("torque_negative", "no_torque", "torque_positive"),
        ("apply torque -1 on the joint between the links", "apply no torque",
         "apply torque +1 on the joint between the links"),
        default="no_torque",
    ),  # fmt: skip
    "MountainCarContinuous-v0": ContinuousActions(
        "force", (-1.0,), (1.0,), "engine force, negative = left, positive = right"
    ),
    "Pendulum-v1": ContinuousActions(
        "torque", (-2.0,), (2.0,), "torque at the pivot; a positive torque increases theta_dot"
    ),
}

_OBSERVATION_WIDTH = {
    "CartPole-v1": 4, "MountainCar-v0": 2, "MountainCarContinuous-v0": 2, "Acrobot-v1": 6,
    "Pendulum-v1": 3,
}  # fmt: skip


def classic_codec(env_id: str) -> TextCodec:
    """The codec of a classic-control task, from its reward-search description.

    Each observation lists every state variable of :func:`rewardlab.llm_reward.describe` (derived ones
    such as Acrobot's ``tip_height`` included) with its value and unit.

    :param env_id: one of ``CartPole-v1``, ``MountainCar-v0``, ``MountainCarContinuous-v0``,
        ``Acrobot-v1``, ``Pendulum-v1``.
    :raises ValueError: another id.
    """
    if env_id not in _CLASSIC_ACTIONS:
        raise ValueError(f"env_id={env_id!r} is not a classic-control task; known: {sorted(_CLASSIC_ACTIONS)}")
    description = describe(env_id)
    return TextCodec(
        env_id, _description_task(description), (_OBSERVATION_WIDTH[env_id],), _classic_render(description),
        _CLASSIC_ACTIONS[env_id],
    )  # fmt: skip


def _description_task(description: EnvDescription, actions: str = "") -> str:
    """The system prompt's task from a description: summary, goal, actions, the variables."""
    variables = "\n".join(
        f"- {variable.name}: {variable.meaning}" + (f" [{variable.units}]" if variable.units else "")
        for variable in description.state
    )
    return (
        f"You control {description.env_id}: {description.summary}\nGoal: {description.success_metric}\n"
        + (f"Actions: {actions}\n" if actions else "") + f"\nEach observation gives:\n{variables}"
    )


def _classic_render(description: EnvDescription) -> Callable[[np.ndarray], str]:
    def render(observation: np.ndarray) -> str:
        batch = torch.as_tensor(observation, dtype=torch.float32).reshape(1, -1)
        values = description.state_tensors(batch)
        return ", ".join(
            f"{variable.name} = {float(values[variable.name][0]):.4g}"
            + (f" {variable.units}" if variable.units else "")
            for variable in description.state
        )

    return render


def deepsea_codec(size: int = 10, randomize_actions: bool = True) -> TextCodec:
    """The codec of ``DeepSea-v0``: the agent's row and column in words.

    With ``randomize_actions`` (the env's default) which action moves right differs from
    cell to cell and is hidden, as in bsuite, so the actions are named ``action_0`` and
    ``action_1`` and the policy must learn their meaning from its history; without it they
    are ``left`` and ``right``.

    :param size: the side of the grid, as given to the env.
    :param randomize_actions: as given to the env.
    """
    names = ("action_0", "action_1") if randomize_actions else ("left", "right")
    meanings = (
        ("moves one column left or right, depending on the cell",) * 2
        if randomize_actions else ("move one column left", "move one column right")
    )  # fmt: skip
    task = (
        f"You descend a {size} x {size} grid (DeepSea): you start in the top-left cell and fall "
        "one row with every step, moving one column left or right, until you leave the bottom "
        f"row after {size} steps. Moving right costs {0.01 / size:.4g}; moving right from the "
        "last column on the bottom row finds a treasure worth 1. Rows and columns count from 0."
    )

    def render(observation: np.ndarray) -> str:
        row, column = divmod(int(np.argmax(observation)), size)
        return f"row {row} of {size - 1}, column {column} of {size - 1}"

    return TextCodec("DeepSea-v0", task, (size * size,), render, NamedActions(names, meanings))


def fruit_codec(
    size: int = 10, fruit_positions: Sequence[tuple[int, int]] | None = None
) -> TextCodec:
    """The codec of ``FruitCollection-v0``: the agent's cell and the fruits left, in words.

    :param size: the side of the grid, as given to the env.
    :param fruit_positions: the possible fruit cells, as given to the env (default: the
        env's :data:`rewardlab.envs.fruit.FRUIT_POSITIONS`).
    """
    from rewardlab.envs.fruit import FRUIT_POSITIONS

    positions = [tuple(p) for p in (fruit_positions or FRUIT_POSITIONS)]
    task = (
        f"You walk a {size} x {size} grid and eat fruits: +1 for each fruit, by stepping onto "
        "its cell. The episode ends when every fruit is eaten. Row 0 is the top, column 0 the "
        "left; moving into the border leaves you where you are."
    )

    def render(observation: np.ndarray) -> str:
        row, column = divmod(int(np.argmax(observation[: size * size])), size)
        present = observation[size * size :] > 0.5
        fruits = [p for p, here in zip(positions, present) if here]
        listed = "; ".join(
            f"row {r}, column {c} ({_offset(r - row, c - column)})" for r, c in fruits
        )
        return f"you are at row {row}, column {column}. Fruits left: {listed or 'none'}"

    actions = NamedActions(
        ("up", "right", "down", "left"),
        ("row - 1", "column + 1", "row + 1", "column - 1"),
    )
    return TextCodec("FruitCollection-v0", task, (size * size + len(positions),), render, actions)


def _offset(rows: int, columns: int) -> str:
    parts = []
    if rows:
        parts.append(f"{abs(rows)} {'down' if rows > 0 else 'up'}")
    if columns:
        parts.append(f"{abs(columns)} {'right' if columns > 0 else 'left'}")
    return ", ".join(parts) or "here"


# MiniGrid's egocentric view: cell (x, y) of the 7 x 7 image, the agent at (3, 6) facing -y.
_VIEW = 7
_AGENT_X, _AGENT_Y = 3, 6


def minigrid_codec(env_id: str, mission: str | None = None) -> TextCodec:
    """The codec of a MiniGrid task seen through :func:`rewardlab.envs.minigrid.make_minigrid`.

    Observations are the agent's ``7 x 7 x 3`` view (``obs="image"``) or its flat ``(147,)``
    form (``obs="flat"``); each visible object is listed with MiniGrid's names
    (``"a locked yellow door"``) and where it is (``"2 steps forward, 1 step left"``),
    with what the agent carries.

    :param env_id: a MiniGrid id.
    :param mission: the mission text (default: read from a freshly made env; tasks whose
        mission changes per episode should pass it in per run).
    :raises ImportError: minigrid is not installed.
    """
    from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT, STATE_TO_IDX

    from rewardlab.envs.minigrid import make_minigrid

    if mission is None:
        env = make_minigrid(env_id, seed=0)
        mission = str(env.unwrapped.mission)
        env.close()
    states = {index: name for name, index in STATE_TO_IDX.items()}
    task = (
        f"You are an agent in a MiniGrid world ({env_id}). Mission: {mission}. You see a 7 x 7 "
        "square in front of you (walls block the view); positions are given as steps forward "
        "and steps left or right of you. Reaching the goal quickly gives the reward."
    )

    def render(observation: np.ndarray) -> str:
        view = np.asarray(observation).reshape(_VIEW, _VIEW, 3).astype(np.int64)
        seen = []
        for y in range(_VIEW):
            for x in range(_VIEW):
                kind = IDX_TO_OBJECT.get(int(view[x, y, 0]), "unseen")
                if kind in ("unseen", "empty", "floor", "agent") or (x, y) == (_AGENT_X, _AGENT_Y):
                    continue
                seen.append((abs(x - _AGENT_X) + _AGENT_Y - y, _minigrid_object(
                    view[x, y], IDX_TO_OBJECT, IDX_TO_COLOR, states
                ) + " " + _ego_offset(_AGENT_Y - y, x - _AGENT_X)))
        seen.sort(key=lambda item: item[0])
        carried = view[_AGENT_X, _AGENT_Y]
        carrying = IDX_TO_OBJECT.get(int(carried[0]), "empty")
        lines = ["You see: " + ("; ".join(text for _, text in seen) if seen else "nothing")]
        if carrying not in ("empty", "unseen", "agent"):
            lines.append("You carry " + _minigrid_object(carried, IDX_TO_OBJECT, IDX_TO_COLOR, states))
        return ". ".join(lines)

    actions = NamedActions(
        ("turn_left", "turn_right", "go_forward", "pick_up", "drop", "toggle", "done"),
        ("turn 90 degrees left", "turn 90 degrees right", "move one step forward",
         "pick up the object in front of you", "drop what you carry in front of you",
         "open, close or unlock (with the key carried) the door in front of you",
         "do nothing"),
        default="done",
    )  # fmt: skip
    return TextCodec(env_id, task, (_VIEW * _VIEW * 3,), render, actions)


def _minigrid_object(
    cell: np.ndarray, objects: dict[int, str], colours: dict[int, str], states: dict[int, str]
) -> str:
    kind = objects.get(int(cell[0]), "unknown object")
    if kind in ("wall", "goal", "lava"):
        return f"a {kind}"
    colour = colours.get(int(cell[1]), "")
    state = f"{states.get(int(cell[2]), '')} " if kind == "door" else ""
    return f"a {state}{colour} {kind}".replace("  ", " ")


def _ego_offset(forward: int, right: int) -> str:
    parts = []
    if forward:
        parts.append(f"{forward} step{'s' if forward > 1 else ''} forward")
    if right:
        side = "right" if right > 0 else "left"
        parts.append(f"{abs(right)} step{'s' if abs(right) > 1 else ''} {side}")
    return ", ".join(parts)


CODEC_ENVS = (*_CLASSIC_ACTIONS, "DeepSea-v0", "FruitCollection-v0", "MiniGrid-*", "any other Gymnasium id")


def _user_minigrid(env_id: str) -> bool:
    """Whether a ``"module:Name-v0"`` id is a user's ``MiniGridEnv`` (its module imported here)."""
    from rewardlab.envs.gymnasium_env import env_module, import_env_module
    from rewardlab.envs.minigrid import is_minigrid_id

    if env_module(env_id) is None:
        return False
    import_env_module(env_id)
    return is_minigrid_id(env_id)


def generic_codec(env_id: str) -> TextCodec:
    """The codec of any other env, from its description (the spaces', or a file's registered
    with :func:`rewardlab.envs.description_files.use_description`) and its action space.

    Discrete actions are named ``action_0 .. action_{n-1}`` (the description's action meaning
    says what they do); a ``Box`` action is a list of numbers clipped to its bounds.

    :param env_id: any id :func:`rewardlab.envs.make` can build.
    :raises ValueError: no env can be made for the id.
    """
    from gymnasium import spaces

    from rewardlab import envs

    description = describe(env_id)
    env = envs.make(env_id, num_envs=1)
    try:
        observation_shape = tuple(env.single_observation_space.shape)
        space = env.single_action_space
    finally:
        env.close()
    actions: ActionVocabulary
    if isinstance(space, spaces.Discrete):
        actions = NamedActions(tuple(f"action_{i}" for i in range(int(space.n))))
        offset = int(space.start)
        if offset:
            raise ValueError(f"{env_id}: a Discrete action space starting at {offset} has no generic codec")
    else:
        actions = ContinuousActions("action", tuple(float(v) for v in np.ravel(space.low)),
                                    tuple(float(v) for v in np.ravel(space.high)), description.action.meaning)
    task = _description_task(description, description.action.meaning)
    return TextCodec(env_id, task, observation_shape, _classic_render(description), actions)


def codec_for(env_id: str, **options: Any) -> TextCodec:
    """The codec of ``env_id``.

    :param env_id: one of :data:`CODEC_ENVS` (``MiniGrid-*``: any MiniGrid id).
    :param options: the env's own options the text depends on: ``size`` and
        ``randomize_actions`` (DeepSea), ``size`` and ``fruit_positions``
        (FruitCollection), ``mission`` (MiniGrid).
    :raises ValueError: an env without a codec.
    """
    if env_id in _CLASSIC_ACTIONS:
        return classic_codec(env_id)
    if env_id == "DeepSea-v0":
        return deepsea_codec(**options)
    if env_id == "FruitCollection-v0":
        return fruit_codec(**options)
    if env_id.startswith("MiniGrid-") or _user_minigrid(env_id):
        return minigrid_codec(env_id, **options)
    if options:
        raise ValueError(f"codec options {sorted(options)} are for DeepSea, FruitCollection and MiniGrid, not {env_id}")
    try:
        return generic_codec(env_id)
    except ValueError as error:
        raise ValueError(
            f"no text codec for env_id={env_id!r} ({error}); known: {', '.join(CODEC_ENVS)}. Build one with "
            "rewardlab.agents.llm_policy.TextCodec(env_id, task, observation_shape, render, actions)"
        ) from error
