"""Env descriptions: named state variables, the action and the success metric.

A description is what an LLM sees of an environment (Text2Reward style: a compact
Pythonic class with each variable's meaning, units and range, never the env's
source) and what turns observation batches into the named tensors a reward
program receives. A reward function may take, as keyword arguments:

- every state variable of the current state (e.g. ``x``, ``theta``);
- the same variables for the state after the action, prefixed ``next_`` (``next_x``);
  at an episode's end this is the true last state, never the reset state;
- ``action``: the actions taken, ``(N,)`` for discrete and one-dimensional actions,
  ``(N, *shape)`` otherwise;
- ``terminated``: bool ``(N,)``, True where the step ended the episode in a terminal
  state (not by the time limit); sparse task rewards often need it.

Example::

    >>> from rewardlab import envs
    >>> description = envs.describe("CartPole-v1")
    >>> description.variables[:4]
    ('x', 'x_dot', 'theta', 'theta_dot')
    >>> print(description.to_prompt())  # doctest: +SKIP

Descriptions of the shipped classic-control tasks are built in; other issues add theirs
with :func:`register_description`. Any other Gymnasium id gets a generic description
derived from its spaces: ``obs_0 .. obs_k`` for a flat ``Box``, and the keys of a ``Dict``
observation (``pos_0, pos_1, vel_0, ...``, in the sorted order Gymnasium flattens them in).
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from gymnasium import spaces

from rewardlab.envs.core import BatchedEnv
from rewardlab.envs.gymnasium_env import ObservationPart
from rewardlab.envs.registration import check_id, make

__all__ = [
    "ActionVariable",
    "EnvDescription",
    "StateVariable",
    "column",
    "describe",
    "register_describer",
    "register_description",
    "registered_descriptions",
    "success_if_terminated",
    "success_if_truncated",
]

NEXT_PREFIX = "next_"
ACTION = "action"
TERMINATED = "terminated"
ENV_REWARD = "env_reward"

# Above this many observation dimensions a generic description gives the whole
# observation as one variable instead of one name per dimension.
GENERIC_MAX_COLUMNS = 32

Reader = Callable[[torch.Tensor], torch.Tensor]
SuccessRule = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
#: how far observations ``(N, *obs_shape)`` are toward success: ``(N,)`` in [0, 1], 1 where it holds
PartialRule = Callable[[torch.Tensor], torch.Tensor]


def column(index: int) -> Reader:
    """A reader of one column of a flat observation batch: ``column(2)(obs) is obs[:, 2]``.

    :param index: the observation dimension.
    """

    def read(obs: torch.Tensor) -> torch.Tensor:
        return obs[:, index]

    return read


def _whole(obs: torch.Tensor) -> torch.Tensor:
    return obs


@dataclass(frozen=True)
class StateVariable:
    """One named state variable a reward program may use.

    :param name: a Python identifier, e.g. ``"theta"``.
    :param meaning: what it is, in words an LLM understands.
    :param units: its unit (``"m"``, ``"rad/s"``), empty when it has none.
    :param low: the smallest value it takes, ``None`` if unbounded.
    :param high: the largest value it takes, ``None`` if unbounded.
    :param read: maps an observation batch ``(N, *obs_shape)`` to this variable's ``(N,)``
        (or ``(N, ...)``) tensor; e.g. :class:`column`.
    :param dtype: the dtype of what ``read`` returns, for the description's text.
    :param categories: the names of a categorical variable's values, value ``i`` named
        ``categories[i]`` (MiniGrid's object types): the values are labels, to compare with
        ``==``, not magnitudes to scale or subtract; two categories (``("no", "yes")``) make an
        indicator. Empty for a number.
    """

    name: str
    meaning: str
    units: str = ""
    low: float | None = None
    high: float | None = None
    read: Reader = _whole
    dtype: str = "float32"
    categories: tuple[str, ...] = ()

    @property
    def categorical(self) -> bool:
        """Whether the values are labels (:attr:`categories`), not magnitudes."""
        return bool(self.categories)


@dataclass(frozen=True)
class ActionVariable:
    """The ``action`` argument of a reward program.

    :param meaning: what the values mean, e.g. ``"0 = push left, 1 = push right"``.
    :param dtype: ``"int64"`` for discrete actions, ``"float32"`` for continuous ones.
    :param shape: the shape of one env's action as the program gets it; ``()`` gives
        ``(N,)``. Batched actions of shape ``(N, 1)`` are flattened to ``(N,)`` when
        ``shape`` is ``()``.
    """

    meaning: str
    dtype: str = "int64"
    shape: tuple[int, ...] = ()


def success_if_terminated(
    final_obs: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor
) -> torch.Tensor:
    """Success rule of goal tasks: the episode ended in a terminal (goal) state.

    :param final_obs: the last observations of the episodes that ended, ``(M, *obs_shape)``.
    :param terminated: bool ``(M,)``.
    :param truncated: bool ``(M,)``.
    """
    return terminated


def success_if_truncated(
    final_obs: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor
) -> torch.Tensor:
    """Success rule of survival tasks: the episode lasted until the time limit.

    :param final_obs: the last observations of the episodes that ended, ``(M, *obs_shape)``.
    :param terminated: bool ``(M,)``.
    :param truncated: bool ``(M,)``.
    """
    return truncated & ~terminated


@dataclass(frozen=True)
class EnvDescription:
    """What a reward program may know about one environment.

    :param env_id: the env id, as given to ``rewardlab.envs.make``.
    :param summary: the task and how its episodes end, in a sentence or two.
    :param state: the state variables, in the order the prompt lists them.
    :param action: the ``action`` argument.
    :param success_metric: how the task is scored, in words (the fitness that searches
        maximise: the env's own return, and the success rate where ``success`` is given).
    :param success: which finished episodes count as successes, from their last
        observation and done flags; ``None`` when the task only has a return.
    :param partial_success: how far an observed state is toward success, in [0, 1] (1 where
        the success rule holds), for tasks whose return is the success flag alone: an episode's
        best is what early stopping compares at a rung, where most candidates' success rates
        are still 0 (:mod:`rewardlab.llm_reward.training.stopping`). ``None``: the return is
        graded enough.
    :param terminated_meaning: what ``terminated`` means for this task.
    :param class_name: the class name in the prompt; derived from ``env_id`` if empty.
    """

    env_id: str
    summary: str
    state: tuple[StateVariable, ...]
    action: ActionVariable
    success_metric: str
    success: SuccessRule | None = None
    partial_success: PartialRule | None = None
    terminated_meaning: str = "the episode reached a terminal state with this step"
    class_name: str = ""

    def __post_init__(self) -> None:
        names = [variable.name for variable in self.state]
        for name in names:
            if not name.isidentifier() or name.startswith("_"):
                raise ValueError(
                    f"state variable name {name!r} of {self.env_id} must be a Python identifier "
                    "that does not start with '_'"
                )
            if name.startswith(NEXT_PREFIX) or name in (ACTION, TERMINATED, ENV_REWARD):
                raise ValueError(
                    f"state variable name {name!r} of {self.env_id} clashes with the names the "
                    f"description adds ('{NEXT_PREFIX}*', '{ACTION}', '{TERMINATED}', '{ENV_REWARD}')"
                )
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"state variable names of {self.env_id} repeat: {duplicates}")

    @property
    def state_names(self) -> tuple[str, ...]:
        """The names of the state variables, in order."""
        return tuple(variable.name for variable in self.state)

    @property
    def variables(self) -> tuple[str, ...]:
        """Every name a reward function may take: the state, ``next_`` state, ``action``,
        ``terminated`` and ``env_reward`` (the env's own reward for the step)."""
        names = self.state_names
        return (*names, *(NEXT_PREFIX + name for name in names), ACTION, TERMINATED, ENV_REWARD)

    @property
    def prompt_class_name(self) -> str:
        """The class name the prompt uses (``class_name`` or one made from ``env_id``)."""
        if self.class_name:
            return self.class_name
        base = re.sub(r"-v\d+$", "", self.env_id.rpartition(":")[2])
        return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9A-Za-z]+", base) if part)

    def to_prompt(self) -> str:
        """The description as compact Python text for an LLM prompt."""
        intro = (
            f"{self.env_id}: {self.summary} Every attribute is a torch tensor with one row per "
            "env (batch size N). A reward function takes any of them as keyword arguments; each "
            f"state variable is also given for the state after the action, prefixed "
            f"`{NEXT_PREFIX}` (e.g. `{NEXT_PREFIX}{self.state[0].name}`)."
        )
        lines = [f"class {self.prompt_class_name}:"]
        lines += textwrap.wrap(intro, 92, initial_indent='    """', subsequent_indent="    ")
        lines += ['    """', ""]
        action = self.action
        # a one-dimensional action has no action axis: models sum over dim=-1 as for vectors
        action_shape = ("(N,), one number per env (no action axis to sum over)" if not action.shape
                        else f"(N, {', '.join(map(str, action.shape))})")
        rows = [(variable.name, _variable_comment(variable)) for variable in self.state]
        rows.append((ACTION, f"{action.dtype} {action_shape}: {action.meaning}"))
        rows.append((TERMINATED, f"bool (N,): {self.terminated_meaning}"))
        rows.append((ENV_REWARD, "float32 (N,): the reward the env itself pays for this step"))
        width = max(len(name) for name, _ in rows) + len(": Tensor")
        lines += [f"    {name + ': Tensor':<{width}}  # {comment}" for name, comment in rows]
        lines.append("")
        lines += textwrap.wrap(
            f"Success metric: {self.success_metric}", 92, initial_indent="    # ",
            subsequent_indent="    # ",
        )
        first = self.state[0].name
        lines += [
            "",
            "",
            f"def compute_reward({first}: Tensor, {NEXT_PREFIX}{first}: Tensor, {ACTION}: Tensor"
            ") -> tuple[Tensor, dict[str, Tensor]]:",
            '    """Take any of the variables above as arguments; return the reward (N,) and its',
            "    named components, each (N,). Every argument is a batch: a tensor of N values, one",
            "    per env (N, k for vector actions), so use torch ops on whole batches (torch.where",
            "    instead of `if`, torch.maximum instead of max) and never reduce over the envs.",
            "    Only math, numpy and torch may be imported.",
            '    """',
        ]
        return "\n".join(lines)

    def state_tensors(self, obs: torch.Tensor, names: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
        """The named state variables of an observation batch.

        :param obs: ``(N, *obs_shape)``.
        :param names: which variables (all when ``None``).
        """
        wanted = self.state if names is None else [self._state_variable(name) for name in names]
        return {variable.name: variable.read(obs) for variable in wanted}

    def reward_inputs(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        next_obs: torch.Tensor,
        terminated: torch.Tensor,
        names: Sequence[str] | None = None,
        env_reward: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """The keyword arguments of a reward function for one batched step.

        :param obs: the observations before the step, ``(N, *obs_shape)``.
        :param action: the actions, ``(N,)`` or ``(N, *shape)``.
        :param next_obs: the observations after the step (the true last ones where an
            episode ended), ``(N, *obs_shape)``.
        :param terminated: bool ``(N,)``.
        :param names: which of :attr:`variables` to compute (all when ``None``, ``env_reward``
            only when given).
        :param env_reward: the env's own reward for the step, ``(N,)``.
        :raises ValueError: a name this description does not declare, or ``env_reward``
            asked for without it.
        """
        if names is None:
            names = tuple(name for name in self.variables if name != ENV_REWARD or env_reward is not None)
        inputs: dict[str, torch.Tensor] = {}
        for name in names:
            if name == ACTION:
                inputs[name] = action.reshape(len(action), *self.action.shape)
            elif name == TERMINATED:
                inputs[name] = terminated
            elif name == ENV_REWARD:
                if env_reward is None:
                    raise ValueError(
                        f"the reward function takes {ENV_REWARD}, the env's own reward, which is not "
                        "known here (scoring stored transitions without their rewards)"
                    )
                inputs[name] = torch.as_tensor(env_reward, device=obs.device).float().reshape(len(obs))
            elif name.startswith(NEXT_PREFIX) and name[len(NEXT_PREFIX):] in self.state_names:
                inputs[name] = self._state_variable(name[len(NEXT_PREFIX):]).read(next_obs)
            else:
                inputs[name] = self._state_variable(name).read(obs)
        return inputs

    def _state_variable(self, name: str) -> StateVariable:
        for variable in self.state:
            if variable.name == name:
                return variable
        raise ValueError(
            f"{name!r} is not a variable of {self.env_id}; it declares: {', '.join(self.variables)}"
        )


def _number(value: float) -> str:
    if value == math.pi:
        return "pi"
    if value == -math.pi:
        return "-pi"
    return f"{value:.4g}"


def _variable_comment(variable: StateVariable) -> str:
    parts = [variable.meaning]
    if variable.categorical:
        named = ", ".join(f"{value} {name}" for value, name in enumerate(variable.categories) if name)
        kind = "indicator" if len(variable.categories) == 2 else "categorical, compare with ==; a label"
        parts.append(f"{kind} ({named}), not a magnitude")
        return ", ".join(parts)
    if variable.units:
        parts.append(variable.units)
    if variable.low is None and variable.high is None:
        parts.append("unbounded")
    else:
        low = "-inf" if variable.low is None else _number(variable.low)
        high = "inf" if variable.high is None else _number(variable.high)
        parts.append(f"range [{low}, {high}]")
    if variable.dtype != "float32":
        parts.append(variable.dtype)
    return ", ".join(parts)


_REGISTRY: dict[str, EnvDescription] = {}


def register_description(description: EnvDescription, overwrite: bool = False) -> None:
    """Make ``description`` the one :func:`describe` returns for its ``env_id``.

    :param description: the description.
    :param overwrite: replace a description already registered for the same id.
    :raises ValueError: the id has a description and ``overwrite`` is False.
    """
    if description.env_id in _REGISTRY and not overwrite:
        raise ValueError(
            f"a description of {description.env_id!r} is already registered; pass overwrite=True "
            "to replace it"
        )
    _REGISTRY[description.env_id] = description


def registered_descriptions() -> list[str]:
    """The env ids with a registered (not generic) description, sorted."""
    return sorted(_REGISTRY)


_GENERIC: dict[str, EnvDescription] = {}
#: what describes an id without a registered description from its made env, before its spaces do
Describer = Callable[[str, BatchedEnv], EnvDescription | None]
_DESCRIBERS: list[Describer] = []


def register_describer(describer: Describer) -> None:
    """Let ``describer`` describe ids that have no registered description: it gets the id and
    one made copy of its env (``num_envs=1``) and returns a description, or ``None`` when the
    env is none of its kind (a family of envs known by what they are, not by their ids: any
    ``MiniGridEnv``). Describers are asked in the order they were registered.

    :param describer: ``describer(env_id, env) -> EnvDescription | None``.
    """
    if describer not in _DESCRIBERS:
        _DESCRIBERS.append(describer)


def describe(env_id: str) -> EnvDescription:
    """The description of ``env_id``: the registered one, a describer's
    (:func:`register_describer`: any MiniGrid env's view), or one derived from its spaces.

    A derived description names the observation's dimensions ``obs_0 .. obs_k`` (or one
    ``obs`` for large or non-flat observations) and scores the task by its return.

    :param env_id: a batched env id (``rewardlab.envs.registered()``) or any Gymnasium id.
    :raises ValueError: the id is neither registered here, nor in ``envs``, nor in Gymnasium.
    """
    if env_id in _REGISTRY:
        return _REGISTRY[env_id]
    if env_id not in _GENERIC:
        _GENERIC[env_id] = _made_description(env_id)
    return _GENERIC[env_id]


def _made_description(env_id: str) -> EnvDescription:
    """The description of ``env_id`` made from one copy of its env: a describer's
    (:func:`register_describer`), else one derived from its spaces."""
    try:
        check_id(env_id)
    except ValueError as error:
        raise ValueError(
            f"env_id={env_id!r} has no description, and no env can be made for it ({error}); "
            "register one with rewardlab.envs.register_description"
        ) from error
    # An id that exists but whose env is not made says why as it is: a description can neither
    # change its spaces (actions the batched envs do not take) nor give its constructor arguments.
    env = make(env_id, num_envs=1)
    try:
        for describer in _DESCRIBERS:
            description = describer(env_id, env)
            if description is not None:
                return description
        return _generic_description(env_id, env)
    finally:
        env.close()


def _generic_description(env_id: str, env: BatchedEnv) -> EnvDescription:
    observation_space, action_space = env.single_observation_space, env.single_action_space
    discrete = getattr(env, "discrete_observations", None)
    parts: list[ObservationPart] | None = getattr(env, "observation_parts", None)
    summary = "a Gymnasium environment described only by its spaces."
    if discrete is not None:
        state: tuple[StateVariable, ...] = (
            StateVariable("obs", "the observation (a state index)", low=0.0, high=float(discrete - 1),
                          read=_index_of_one_hot, dtype="int64"),
        )
    elif parts is not None:
        state = tuple(variable for part in parts for variable in _part_state(part))
        summary = (
            "a Gymnasium environment described only by its spaces; its observation's parts are "
            f"{', '.join(part.name for part in parts)} (a Dict's keys, in the sorted order Gymnasium "
            "flattens them in)."
        )
    else:
        state = _generic_state(observation_space)
    return EnvDescription(
        env_id=env_id,
        summary=summary,
        state=state,
        action=_generic_action(action_space),
        success_metric="the episode return (sum of the environment's own rewards).",
    )


def _index_of_one_hot(obs: torch.Tensor) -> torch.Tensor:
    # a Discrete observation reaches the batched env one-hot (see GymnasiumBatchedEnv)
    return obs.argmax(dim=-1)


def _bound(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _generic_state(space: spaces.Space) -> tuple[StateVariable, ...]:
    if isinstance(space, spaces.Box) and len(space.shape) == 1 and space.shape[0] <= GENERIC_MAX_COLUMNS:
        return tuple(
            StateVariable(
                f"obs_{i}", f"observation dimension {i}", low=_bound(space.low[i]),
                high=_bound(space.high[i]), read=column(i),
            )
            for i in range(space.shape[0])
        )
    shape = getattr(space, "shape", None)
    return (StateVariable("obs", f"the whole observation, shape (N, {', '.join(map(str, shape or ()))})"),)


def _columns(start: int, stop: int) -> Reader:
    def read(obs: torch.Tensor) -> torch.Tensor:
        return obs[:, start:stop]

    return read


def _one_hot_index(start: int, stop: int) -> Reader:
    def read(obs: torch.Tensor) -> torch.Tensor:
        return obs[:, start:stop].argmax(dim=-1)

    return read


def _part_state(part: ObservationPart) -> tuple[StateVariable, ...]:
    """The variables of one part of a Dict/Tuple observation (an ``ObservationPart``): one per
    column (``pos_0, pos_1``), one for a single value or a ``Discrete`` part (its index), one
    ``(N, k)`` slice for a part of more than :data:`GENERIC_MAX_COLUMNS` columns."""
    name, start, stop, space = part.name, part.start, part.stop, part.space
    width = stop - start
    if isinstance(space, spaces.Discrete):
        return (StateVariable(name, f"the observation's {name!r} (an index, one-hot in the flat observation)",
                              low=float(space.start), high=float(space.start + space.n - 1),
                              read=_one_hot_index(start, stop), dtype="int64"),)
    low = np.ravel(getattr(space, "low", np.full(width, -np.inf)))
    high = np.ravel(getattr(space, "high", np.full(width, np.inf)))
    if isinstance(space, spaces.MultiBinary):
        low, high = np.zeros(width), np.ones(width)
    if width == 1:
        return (StateVariable(name, f"the observation's {name!r}", low=_bound(low[0]), high=_bound(high[0]),
                              read=column(start)),)
    if width > GENERIC_MAX_COLUMNS:
        return (StateVariable(name, f"the observation's {name!r}, shape (N, {width})", read=_columns(start, stop)),)
    return tuple(
        StateVariable(f"{name}_{i}", f"the observation's {name!r}, component {i}", low=_bound(low[i]),
                      high=_bound(high[i]), read=column(start + i))
        for i in range(width)
    )


def _generic_action(space: spaces.Space) -> ActionVariable:
    if isinstance(space, spaces.Discrete):
        return ActionVariable(
            f"one of {space.n} discrete actions, {space.start} .. {space.start + space.n - 1}",
            "int64",
        )
    if isinstance(space, spaces.Box):
        shape = () if space.shape in ((), (1,)) else tuple(space.shape)
        low, high = np.min(space.low), np.max(space.high)
        return ActionVariable(f"continuous action in [{low:.4g}, {high:.4g}]", "float32", shape)
    return ActionVariable(f"an action of the space {space}", "int64", tuple(space.shape or ()))


def _angle(cos_index: int, sin_index: int) -> Reader:
    def read(obs: torch.Tensor) -> torch.Tensor:
        return torch.atan2(obs[:, sin_index], obs[:, cos_index])

    return read


def _acrobot_tip_height(obs: torch.Tensor) -> torch.Tensor:
    cos1, sin1, cos2, sin2 = obs[:, 0], obs[:, 1], obs[:, 2], obs[:, 3]
    return -cos1 - (cos1 * cos2 - sin1 * sin2)


_CARTPOLE_THETA_LIMIT = 12 * 2 * math.pi / 360

_BUILT_IN: Mapping[str, EnvDescription] = {
    "CartPole-v1": EnvDescription(
        env_id="CartPole-v1",
        summary=(
            "push a cart left or right along a track to keep a pole hinged on it upright. "
            f"The episode ends when |theta| > {_CARTPOLE_THETA_LIMIT:.4f} rad (12 degrees) or "
            "|x| > 2.4 m, or after 500 steps."
        ),
        state=(
            StateVariable("x", "cart position (0 = track centre)", "m", -4.8, 4.8, column(0)),
            StateVariable("x_dot", "cart velocity", "m/s", None, None, column(1)),
            StateVariable("theta", "pole angle from upright, positive to the right", "rad",
                          -2 * _CARTPOLE_THETA_LIMIT, 2 * _CARTPOLE_THETA_LIMIT, column(2)),
            StateVariable("theta_dot", "pole angular velocity", "rad/s", None, None, column(3)),
        ),
        action=ActionVariable("0 = push the cart left, 1 = push it right (force 10 N)"),
        success_metric=(
            "episode length = episode return (+1 per step while the pole is up, 500 at most); "
            "an episode that lasts 500 steps is a success."
        ),
        success=success_if_truncated,
        terminated_meaning="the pole fell or the cart left the track with this step",
    ),
    "MountainCar-v0": EnvDescription(
        env_id="MountainCar-v0",
        summary=(
            "an underpowered car in a valley must rock back and forth to reach the flag on the "
            "right hill (position >= 0.5). The environment gives -1 per step; the episode ends at "
            "the flag or after 200 steps."
        ),
        state=(
            StateVariable("position", "car position along the track (valley bottom near -0.52, "
                          "goal at 0.5)", "", -1.2, 0.6, column(0)),
            StateVariable("velocity", "car velocity, positive to the right", "", -0.07, 0.07, column(1)),
        ),
        action=ActionVariable("0 = accelerate left, 1 = don't accelerate, 2 = accelerate right"),
        success_metric=(
            "reaching the goal (position >= 0.5) in as few steps as possible: the success rate "
            "and the episode return (-1 per step, -200 when the goal is never reached)."
        ),
        success=success_if_terminated,
        terminated_meaning="the car reached the goal (position >= 0.5) with this step",
    ),
    "MountainCarContinuous-v0": EnvDescription(
        env_id="MountainCarContinuous-v0",
        summary=(
            "an underpowered car in a valley must rock back and forth to reach the flag on the "
            "right hill (position >= 0.45). The environment gives +100 at the flag and "
            "-0.1 * force**2 every step; the episode ends at the flag or after 999 steps."
        ),
        state=(
            StateVariable("position", "car position along the track (valley bottom near -0.52, "
                          "goal at 0.45)", "", -1.2, 0.6, column(0)),
            StateVariable("velocity", "car velocity, positive to the right", "", -0.07, 0.07, column(1)),
        ),
        action=ActionVariable("engine force, negative = left, positive = right; range [-1, 1]",
                              "float32"),
        success_metric=(
            "reaching the goal (position >= 0.45) with little force: the success rate and the "
            "episode return (100 at the goal minus 0.1 * sum of force**2)."
        ),
        success=success_if_terminated,
        terminated_meaning="the car reached the goal (position >= 0.45) with this step",
    ),
    "Acrobot-v1": EnvDescription(
        env_id="Acrobot-v1",
        summary=(
            "two links hang from a fixed joint; apply torque at the joint between them to swing "
            "the free end (tip) above the line one link length above the fixed joint "
            "(tip_height > 1). The environment gives -1 per step until then; the episode ends "
            "there or after 500 steps."
        ),
        state=(
            StateVariable("cos_theta1", "cosine of the first link's angle", "", -1.0, 1.0, column(0)),
            StateVariable("sin_theta1", "sine of the first link's angle", "", -1.0, 1.0, column(1)),
            StateVariable("cos_theta2", "cosine of the second link's angle relative to the first",
                          "", -1.0, 1.0, column(2)),
            StateVariable("sin_theta2", "sine of the second link's angle relative to the first",
                          "", -1.0, 1.0, column(3)),
            StateVariable("theta1_dot", "angular velocity of the first link", "rad/s",
                          -4 * math.pi, 4 * math.pi, column(4)),
            StateVariable("theta2_dot", "angular velocity of the second link relative to the first",
                          "rad/s", -9 * math.pi, 9 * math.pi, column(5)),
            StateVariable("theta1", "first link's angle, 0 = hanging straight down", "rad",
                          -math.pi, math.pi, _angle(0, 1)),
            StateVariable("theta2", "second link's angle relative to the first, 0 = in line",
                          "rad", -math.pi, math.pi, _angle(2, 3)),
            StateVariable("tip_height", "height of the tip above the fixed joint, "
                          "-cos(theta1) - cos(theta1 + theta2)", "link lengths", -2.0, 2.0,
                          _acrobot_tip_height),
        ),
        action=ActionVariable("torque on the joint between the links: 0 = -1, 1 = 0, 2 = +1"),
        success_metric=(
            "the episode return (-1 per step until the tip passes tip_height > 1, so higher is "
            "faster; -500 when it never does) and the rate of reaching it."
        ),
        success=success_if_terminated,
        terminated_meaning="the tip rose above tip_height > 1 with this step",
    ),
    "Pendulum-v1": EnvDescription(
        env_id="Pendulum-v1",
        summary=(
            "swing a pendulum up from a random angle and keep it upright with a limited torque. "
            "The environment gives -(theta**2 + 0.1 * theta_dot**2 + 0.001 * torque**2) for the "
            "state before each step; episodes last 200 steps and never terminate early."
        ),
        state=(
            StateVariable("cos_theta", "cosine of the pendulum angle", "", -1.0, 1.0, column(0)),
            StateVariable("sin_theta", "sine of the pendulum angle", "", -1.0, 1.0, column(1)),
            StateVariable("theta_dot", "angular velocity", "rad/s", -8.0, 8.0, column(2)),
            StateVariable("theta", "pendulum angle, 0 = upright", "rad", -math.pi, math.pi,
                          _angle(0, 1)),
        ),
        action=ActionVariable("torque applied at the pivot, range [-2, 2] (clipped)", "float32"),
        success_metric=(
            "the episode return (sum of the environment's rewards over 200 steps; 0 is the best "
            "possible, about -150 means swung up and balanced)."
        ),
        terminated_meaning="always False (Pendulum episodes only end at the time limit)",
    ),
}

_REGISTRY.update(_BUILT_IN)
