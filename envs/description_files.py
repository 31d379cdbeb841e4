"""Descriptions of a user's env from a file (``--describe FILE``), and the env's source for prompts.

A description file (TOML, or JSON with the same keys) names what the observation holds, so
that reward programs get variables with meaning instead of ``obs_0 .. obs_k``::

    summary = "walk right along a corridor; the episode ends at the goal cell"
    success = "terminated"            # or "truncated", or "position >= 10" on the last state
    success_metric = "reaching the goal, then the return"        # optional
    terminated_meaning = "the agent reached the goal cell"        # optional

    [action]
    meaning = "0 = step left, 1 = step right"

    [[state]]
    name = "position"                 # the name the reward function receives
    index = 0                         # a column of the observation, or "0:3" for a slice
    meaning = "the agent's cell, 0 at the start"
    units = "cells"
    low = 0
    high = 10

The file is data, never code: it crosses to the sandboxed workers as JSON
(:func:`description_data`), where :func:`description_from_data` rebuilds it.
"""

from __future__ import annotations

import inspect
import json
import operator
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from rewardlab.common.toml import tomllib
from rewardlab.envs.descriptions import (
    ActionVariable,
    EnvDescription,
    StateVariable,
    SuccessRule,
    column,
    describe,
    register_description,
    success_if_terminated,
    success_if_truncated,
)

__all__ = ["description_data", "description_from_data", "env_source", "load_description", "use_description"]

TOP_KEYS = {"summary", "success", "success_metric", "terminated_meaning", "action", "state", "class_name"}
STATE_KEYS = {"name", "index", "meaning", "units", "low", "high"}
ACTION_KEYS = {"meaning"}
#: the most characters of an env's source a prompt shows
MAX_SOURCE_CHARS = 6000
_COMPARISONS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq}
_RULE = re.compile(r"^\s*([A-Za-z_]\w*)\s*(>=|<=|==|>|<)\s*(-?[\d.eE+-]+)\s*$")


def load_description(path: str | Path, env_id: str) -> tuple[EnvDescription, dict[str, Any]]:
    """Read a description file for ``env_id``, check it against the env's spaces.

    :param path: a ``.toml`` or ``.json`` file (format in the module docstring).
    :param env_id: the env it describes.
    :return: ``(description, data)``; ``data`` is the checked JSON form the workers rebuild
        it from (with the action's dtype and shape taken from the env).
    :raises ValueError: the file is missing or malformed, naming the key and what to write.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ValueError(f"--describe {path}: cannot read it ({error.strerror})") from None
    try:
        raw = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as error:
        kind = "JSON" if path.suffix == ".json" else "TOML"
        raise ValueError(f"--describe {path}: not valid {kind} ({error})") from None
    generic = describe(env_id)  # the spaces' view: the action, and how many columns there are
    from rewardlab.envs.registration import make

    env = make(env_id, num_envs=1)
    try:
        obs_shape = tuple(env.single_observation_space.shape)
    finally:
        env.close()
    data = _checked(raw, path, obs_shape)
    data["env_id"] = env_id
    data["action_dtype"] = generic.action.dtype
    data["action_shape"] = list(generic.action.shape)
    data.setdefault("action", {}).setdefault("meaning", generic.action.meaning)
    return description_from_data(data), data


def _checked(raw: Any, path: Path, obs_shape: tuple[int, ...]) -> dict[str, Any]:
    where = f"--describe {path}"
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: the file must hold a table of keys ({', '.join(sorted(TOP_KEYS))})")
    unknown = sorted(set(raw) - TOP_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; known: {sorted(TOP_KEYS)}")
    if not isinstance(raw.get("summary"), str) or not raw["summary"].strip():
        raise ValueError(f'{where}: needs summary = "the task and how its episodes end"')
    states = raw.get("state")
    if not isinstance(states, list) or not states:
        raise ValueError(f"{where}: needs at least one [[state]] table with name, index and meaning")
    columns = obs_shape[0] if len(obs_shape) == 1 else None
    for number, state in enumerate(states, 1):
        if not isinstance(state, dict):
            raise ValueError(f"{where}: state {number} must be a table")
        unknown = sorted(set(state) - STATE_KEYS)
        if unknown:
            raise ValueError(f"{where}: state {number} has unknown keys {unknown}; known: {sorted(STATE_KEYS)}")
        for key in ("name", "meaning"):
            if not isinstance(state.get(key), str) or not state[key]:
                raise ValueError(f"{where}: state {number} needs {key} = \"...\"")
        index = state.get("index")
        if index is not None:
            start, stop = _index_range(index, f"{where}: state {state['name']!r}")
            if columns is None:
                raise ValueError(f"{where}: state {state['name']!r} has an index, but the observation has "
                                 f"shape {obs_shape}; an index needs a flat observation")
            if not 0 <= start < stop <= columns:
                raise ValueError(f"{where}: state {state['name']!r} index {index!r} is outside the "
                                 f"observation's {columns} columns (0 .. {columns - 1})")
    action = raw.get("action", {})
    if not isinstance(action, dict) or sorted(set(action) - ACTION_KEYS):
        raise ValueError(f'{where}: [action] takes only meaning = "..."')
    _success_rule(raw.get("success", "none"), dict.fromkeys(state["name"] for state in states), where)
    return json.loads(json.dumps(raw))


def _index_range(index: Any, where: str) -> tuple[int, int]:
    if isinstance(index, int) and not isinstance(index, bool):
        return index, index + 1
    if isinstance(index, str) and re.fullmatch(r"\s*\d+\s*:\s*\d+\s*", index):
        start, stop = (int(part) for part in index.split(":"))
        return start, stop
    raise ValueError(f'{where}: index must be a column number (3) or a slice ("0:3"), got {index!r}')


def _slice_reader(start: int, stop: int) -> Any:
    def read(obs: torch.Tensor) -> torch.Tensor:
        return obs[:, start:stop]

    return read


def _success_rule(text: Any, readers: Mapping[str, Any], where: str) -> SuccessRule | None:
    """The success rule ``text`` names, over the state variables' ``readers`` (name -> reader).

    :raises ValueError: ``text`` is no rule, or compares a variable the file does not declare.
    """
    if text in ("none", None):
        return None
    if text == "terminated":
        return success_if_terminated
    if text == "truncated":
        return success_if_truncated
    match = _RULE.match(text) if isinstance(text, str) else None
    if match is None or match.group(1) not in readers:
        raise ValueError(
            f'{where}: success must be "terminated", "truncated", "none" or a comparison of a state '
            f'variable on the last state such as "{next(iter(readers))} >= 1.0", got {text!r}'
        )
    name, symbol, value = match.groups()
    read, compare, threshold = readers[name], _COMPARISONS[symbol], float(value)

    def success(final_obs: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
        return compare(read(final_obs).reshape(len(final_obs), -1)[:, 0], threshold)

    return success


def description_from_data(data: Mapping[str, Any]) -> EnvDescription:
    """The description that :func:`load_description` checked, from its JSON data."""
    states = []
    for state in data["state"]:
        index = state.get("index")
        read: Any = None
        if index is not None:
            start, stop = _index_range(index, state["name"])
            read = column(start) if stop == start + 1 else _slice_reader(start, stop)
        kwargs = {"read": read} if read is not None else {}
        states.append(StateVariable(
            state["name"], state["meaning"], units=state.get("units", ""),
            low=state.get("low"), high=state.get("high"), **kwargs,
        ))
    success_text = data.get("success", "none")
    success = _success_rule(success_text, {state.name: state.read for state in states}, "the description")
    metric = data.get("success_metric") or (
        f"the success rate ({success_text}), then the episode return" if success is not None
        else "the episode return (sum of the environment's own rewards)."
    )
    action = ActionVariable(data["action"]["meaning"], data.get("action_dtype", "int64"),
                            tuple(data.get("action_shape", ())))
    return EnvDescription(
        env_id=data["env_id"], summary=data["summary"].strip(), state=tuple(states), action=action,
        success_metric=metric, success=success, class_name=data.get("class_name", ""),
        terminated_meaning=data.get("terminated_meaning", "the episode reached a terminal state with this step"),
    )


_DATA: dict[str, dict[str, Any]] = {}


def use_description(data: Mapping[str, Any]) -> EnvDescription:
    """Register the description in ``data`` (from :func:`load_description`) for its env.

    :func:`describe` then returns it, here and, through :func:`description_data`, in the
    sandboxed workers that are given its data.
    """
    description = description_from_data(data)
    register_description(description, overwrite=True)
    _DATA[description.env_id] = dict(data)
    return description


def description_data(env_id: str) -> dict[str, Any] | None:
    """The data of the file description in use for ``env_id``; ``None`` for built-in and generic ones."""
    return _DATA.get(env_id)


def env_source(env_id: str, limit: int = MAX_SOURCE_CHARS) -> str:
    """The source of a Gymnasium env's class (its ``step`` and reward code), as Eureka shows it.

    :param env_id: a Gymnasium id (or ``"module:Env-v0"``).
    :param limit: the most characters; a longer class keeps its ``step`` method and as many
        of the others as fit.
    :return: the source, ``""`` when it cannot be read (a compiled env, or a batched one of ours).
    """
    from rewardlab.envs.gymnasium_env import make_one

    try:
        env = make_one(env_id)
    except Exception:
        return ""
    try:
        cls = type(env.unwrapped)
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return ""
    finally:
        env.close()
    if len(source) <= limit:
        return source
    step = getattr(cls, "step", None)
    try:
        step_source = inspect.getsource(step) if step is not None else ""
    except (OSError, TypeError):
        step_source = ""
    head = source[: max(0, limit - len(step_source) - 40)]
    return f"{head}\n    # ... (cut)\n{step_source}"[:limit]

