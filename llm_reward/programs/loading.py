"""``best_reward.py``: a search's best program as a file, and :func:`load_reward` to use it.

The file is the program's source exactly as it was evaluated, under a comment header that
names the env (``# rewardlab-env: CartPole-v1``), the task and the scores. A program found
under a description file (``--describe``) carries that description as one JSON line
(``# rewardlab-description: {...}``): its variables are the file's names, and every loader
uses it. Loading runs the
static checks again and then the program in this process: load files you trust (your
search's output), as with any Python code you run.

    import gymnasium as gym
    from rewardlab import envs
    from rewardlab import llm_reward

    reward = llm_reward.load_reward("runs/search/best_reward.py")
    env = reward.wrap(gym.make("CartPole-v1"), trusted=True)          # a Gymnasium wrapper
    batched = reward.wrap(envs.make("CartPole-v1", 16), trusted=True)  # a batched-env wrapper

or from the command line: ``rewardlab train --env CartPole-v1 --reward-program best_reward.py``.
Both keep the env's own reward as ``info["reward_components"]["extrinsic"]`` and add the
program's components as ``program/<name>``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium
import numpy as np
import torch

from rewardlab.common.components import with_components
from rewardlab.envs.core import Batched
from rewardlab.envs.description_files import description_data, description_from_data
from rewardlab.envs.descriptions import EnvDescription, describe
from rewardlab.envs.gymnasium_env import env_module
from rewardlab.llm_reward.programs.checks import MAX_SOURCE_CHARS
from rewardlab.llm_reward.programs.components import COMPONENT_PREFIX
from rewardlab.llm_reward.programs.program import RewardFunction
from rewardlab.llm_reward.programs.source import RewardProgram
from rewardlab.llm_reward.programs.wrapper import ProgramReward

__all__ = ["GymnasiumProgramReward", "LoadedReward", "load_reward", "reward_file_text"]

ENV_MARKER = "# rewardlab-env:"
# the marker on a line of its own
_ENV_LINE = re.compile(rf"^{re.escape(ENV_MARKER)}[ \t]*(\S+)[ \t\r]*$", re.MULTILINE)
DESCRIPTION_MARKER = "# rewardlab-description:"
_DESCRIPTION_LINE = re.compile(rf"^{re.escape(DESCRIPTION_MARKER)}(.*)$", re.MULTILINE)


def reward_file_text(source: str, env_id: str, header: list[str]) -> str:
    """The text of a reward file: a comment header naming the env, then the program.

    :param source: the program's source (kept as it is).
    :param env_id: the env it was written for.
    :param header: more comment lines (without ``#``): task, scores, how to use it.

    The description file in use for ``env_id`` (if any) is written as one JSON line, so that
    the program's variables mean the same wherever it is loaded.
    """
    lines = [f"{ENV_MARKER} {env_id}"]
    data = description_data(env_id)
    if data is not None:  # json.dumps escapes newlines: the data stays one comment line
        lines.append(f"{DESCRIPTION_MARKER} {json.dumps(data, sort_keys=True)}")
    lines += [*(f"# {line}".rstrip() for line in header), ""]
    return "\n".join(lines) + "\n" + source.lstrip("\n")


class GymnasiumProgramReward(gymnasium.Wrapper):
    r"""Replace a Gymnasium env's reward with a reward program's.

    The program sees the transition as a batch of one: the observations before and after
    the action (Gymnasium returns the true last observation when an episode ends), the
    action and ``terminated``. ``info["reward_components"]`` keeps the env's reward as
    ``"extrinsic"`` and adds the program's components as ``"program/<name>"`` (floats).

    Example::

        >>> import gymnasium as gym
        >>> from rewardlab import llm_reward
        >>> from rewardlab.llm_reward.programs.program import RewardFunction
        >>> program = llm_reward.RewardProgram.from_source(
        ...     "def compute_reward(next_theta):\n"
        ...     "    upright = 1 - (next_theta / 0.21) ** 2\n"
        ...     "    return upright, {'upright': upright}\n")
        >>> function = RewardFunction(program, llm_reward.describe("CartPole-v1"))
        >>> env = GymnasiumProgramReward(gym.make("CartPole-v1"), function)
        >>> obs, info = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step(1)
        >>> sorted(info["reward_components"])
        ['extrinsic', 'program/upright']

    :param env: a Gymnasium env whose observations the program's description reads (the
        same layout as the batched env of that id).
    :param reward_function: the loaded program.
    """

    def __init__(self, env: gymnasium.Env, reward_function: RewardFunction):
        super().__init__(env)
        self.reward_function = reward_function
        self._obs: torch.Tensor | None = None
        # a Dict/Tuple observation reaches the program flat, as its id's batched env lays it out
        space = env.observation_space
        structured = isinstance(space, gymnasium.spaces.Dict | gymnasium.spaces.Tuple)
        self._space = space if structured else None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env and remember the first observation.

        :param seed: the seed, or ``None``.
        :param options: reset options, or ``None``.
        """
        obs, info = self.env.reset(seed=seed, options=options)
        self._obs = _batch(obs, self._space)
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env and reward the transition with the program.

        :param action: the action.
        :raises rewardlab.llm_reward.ProgramError: the program failed on this transition.
        """
        if self._obs is None:
            raise RuntimeError("GymnasiumProgramReward.step was called before reset()")
        obs, reward, terminated, truncated, info = self.env.step(action)
        next_obs = _batch(obs, self._space)
        action_batch = torch.as_tensor(np.asarray(action))[None]
        if action_batch.dtype.is_floating_point:
            action_batch = action_batch.float()
        program_reward, components = self.reward_function(
            self._obs, action_batch, next_obs, torch.tensor([bool(terminated)]),
            torch.tensor([float(reward)]),
        )
        self._obs = next_obs
        info = dict(info)
        info["reward_components"] = with_components(
            info.get("reward_components"), float(reward),
            {COMPONENT_PREFIX + name: float(value[0]) for name, value in components.items()},
            "wrap the program reward only once",
        )
        return obs, float(program_reward[0]), terminated, truncated, info


def _batch(obs: Any, space: gymnasium.spaces.Space | None = None) -> torch.Tensor:
    if space is not None:
        obs = gymnasium.spaces.flatten(space, obs)
    return torch.as_tensor(np.asarray(obs, dtype=np.float32))[None]


@dataclass(frozen=True)
class LoadedReward:
    """A reward program read from a file, checked, for one env.

    :param program: the checked program.
    :param env_id: the env it is for.
    :param path: the file it came from.
    :param description_data: the description file's data the program was written under
        (:func:`rewardlab.envs.description_files.load_description`), ``None`` for the env's
        built-in or generic description.
    """

    program: RewardProgram
    env_id: str
    path: Path
    description_data: Mapping[str, Any] | None = None

    @property
    def description(self) -> EnvDescription:
        """The env's description (the program's variables)."""
        if self.description_data is not None:
            return description_from_data(self.description_data)
        return describe(self.env_id)

    def reward_function(self, trusted: bool = False) -> RewardFunction:
        """The program loaded in this process, callable on batched transitions.

        :param trusted: must be True: the program then runs here, with this process's
            rights, so only for a program you wrote or reviewed.
        :raises PermissionError: ``trusted`` is not True.
        """
        _require_trust(trusted, self.path)
        return RewardFunction(self.program, self.description)

    def wrap(self, env: Any, trusted: bool = False) -> Any:
        """``env`` with the program's reward, run in this process: a batched-env wrapper for
        rewardlab's batched envs (``rewardlab.envs.make``), a Gymnasium wrapper for a
        Gymnasium env.

        A program an LLM wrote is hostile until shown otherwise: train on it isolated with
        ``rewardlab train --reward-program FILE`` or :func:`rewardlab.llm_reward.evaluate`;
        wrap an env with it only once you have read it.

        :param env: the env.
        :param trusted: must be True (see above).
        :raises PermissionError: ``trusted`` is not True.
        :raises TypeError: another kind of env (for Gymnasium vector envs, wrap each env).
        """
        _require_trust(trusted, self.path)
        if isinstance(env, Batched):
            return ProgramReward(env, self.reward_function(trusted))
        if isinstance(env, gymnasium.Env):
            return GymnasiumProgramReward(env, self.reward_function(trusted))
        raise TypeError(
            f"cannot wrap a {type(env).__name__}: pass a rewardlab batched env "
            "(rewardlab.envs.make) or a Gymnasium env (for a Gymnasium vector env, wrap each env "
            "with wrappers=[reward.wrap])"
        )


def _require_trust(trusted: bool, path: Path) -> None:
    if trusted is not True:
        raise PermissionError(
            f"{path} would run in this process, outside the sandbox: pass trusted=True only for "
            "a program you wrote or reviewed; to train on an LLM's program use `rewardlab train "
            "--reward-program FILE` or rewardlab.llm_reward.evaluate, which run it isolated"
        )


def load_reward(
    path: str | os.PathLike[str],
    env_id: str | None = None,
    description: Mapping[str, Any] | None = None,
) -> LoadedReward:
    """Read a reward program file (e.g. a search's ``best_reward.py``) and check it.

    :param path: the file.
    :param env_id: the env; default: the file's ``# rewardlab-env:`` line, unless that names a
        ``module:Env-v0`` id: a file's words never import a module, only the caller's do.
    :param description: a description file's data (``load_description(file, env_id)[1]``) for
        a program written under it; default: the file's ``# rewardlab-description:`` line,
        else the env's own description.
    :raises ValueError: the file is missing, not text, names no env (or a ``module:Env-v0``
        one) and ``env_id`` is not given, names another env than ``env_id``, or carries a
        malformed description.
    :raises llm_reward.CheckError: the program fails the static checks for the env.
    """
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as file:  # no more than a program may hold
            source = file.read(MAX_SOURCE_CHARS + 1)
    except OSError as error:
        why = error.strerror or error
        raise ValueError(f"cannot read the reward program {path}: {why}") from None
    except UnicodeDecodeError:
        raise ValueError(f"cannot read the reward program {path}: it is not a UTF-8 text "
                         "file") from None
    if len(source) > MAX_SOURCE_CHARS:
        raise ValueError(f"the reward program {path} has more than {MAX_SOURCE_CHARS:,} "
                         "characters, its header included; a reward file holds one program")
    match = _ENV_LINE.search(source)
    if match is not None and env_id is not None and match.group(1) != env_id:
        raise ValueError(f"{path} was written for {match.group(1)}, not {env_id}")
    if env_id is None:
        if match is None:
            raise ValueError(
                f"{path} does not say which env it is for (no '{ENV_MARKER} ENV_ID' line); pass "
                "env_id"
            )
        env_id = match.group(1)
        if env_module(env_id) is not None:
            raise ValueError(
                f"{path} names the env {env_id!r}, which would import the module "
                f"{env_module(env_id)!r}: a file never makes rewardlab import code; if you trust "
                f"that module, name the env yourself (--env {env_id!r}, or load_reward(path, "
                f"env_id={env_id!r}))"
            )
    if description is None:
        description = _carried_description(source, path, env_id)
    program = RewardProgram.from_source(source)
    loaded = LoadedReward(program, env_id, path, description)
    program.check(loaded.description)
    return loaded


def _carried_description(source: str, path: Path, env_id: str) -> dict[str, Any] | None:
    """The description a reward file carries on its ``# rewardlab-description:`` line, checked.

    Only the file's leading comment block counts: a line of that form in the program itself
    (which an LLM wrote) is not the description it was written under.
    """
    lines = source.splitlines()
    code_start = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    header = "\n".join(lines[:code_start])
    match = _DESCRIPTION_LINE.search(header)
    if match is None:
        return None
    try:
        data = json.loads(match.group(1))
        if not isinstance(data, dict) or data.get("env_id") != env_id:
            described = data.get("env_id") if isinstance(data, dict) else data
            raise ValueError(f"it describes {described!r}, not {env_id}")
        description_from_data(data)  # checks every value, builds every reader and the rules
    except (ValueError, KeyError, TypeError, RecursionError) as error:  # JSON nested past its limit
        raise ValueError(
            f"{path}: its '{DESCRIPTION_MARKER}' line is not a description of {env_id} ({error}); "
            "delete the line and pass the description file with --describe"
        ) from None
    return data
