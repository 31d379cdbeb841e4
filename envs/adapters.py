"""Adapters that show a batched env to Gymnasium and Stable-Baselines3 tools, numpy at the boundary.

Wrap an env as Gymnasium's and SB3's vector wrappers are used: ``GymnasiumVectorEnv(env)``,
``SB3VecEnv(env)``, with ``env`` a batched env or any stack of batched wrappers (a shaped or
reward-program env stays shaped through the adapter). They sit above the batched-env
contract (``rewardlab.envs.core``), which knows nothing of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
import torch
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices

from rewardlab.envs.core import Batched


def _to_numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy()


def _numpy_components(info: dict[str, Any]) -> dict[str, np.ndarray]:
    return {name: _to_numpy(value) for name, value in info["reward_components"].items()}


class GymnasiumVectorEnv(gymnasium.vector.VectorEnv):
    """A batched env as a Gymnasium ``VectorEnv`` with same-step autoreset.

    Observations, rewards and flags are numpy arrays. The infos follow Gymnasium 1.x
    same-step vector envs: for the envs whose episode ended, ``info["final_obs"]`` (an
    object array, ``None`` elsewhere) and ``info["final_info"]``, each with its boolean
    mask ``info["_final_obs"]`` / ``info["_final_info"]``. ``info["reward_components"]``
    maps each name to a ``(num_envs,)`` float32 array.

    Example::

        >>> from rewardlab import envs
        >>> from rewardlab.envs.adapters import GymnasiumVectorEnv
        >>> vec = GymnasiumVectorEnv(envs.make("CartPole-v1", num_envs=8, seed=0))
        >>> obs, info = vec.reset()
        >>> obs, reward, terminated, truncated, info = vec.step(vec.action_space.sample())

    :param env: the batched env (or wrapper) to adapt
    """

    def __init__(self, env: Batched):
        self.env = env
        self.num_envs = env.num_envs
        self.single_observation_space = env.single_observation_space
        self.single_action_space = env.single_action_space
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self.metadata = dict(env.metadata)
        self.render_mode = env.render_mode
        self.spec = None

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every env.

        :param seed: a seed for the batched generator; of a list of seeds (one per env, as
            Gymnasium passes them) the first is used
        :param options: passed to the env's reset
        """
        if isinstance(seed, Sequence):
            seed = seed[0]
        obs, info = self.env.reset(seed=seed, options=options)
        return _to_numpy(obs), info

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env; ended envs are reset in the same call.

        :param actions: a batch of actions from ``action_space``
        """
        obs, reward, terminated, truncated, info = self.env.step(np.asarray(actions))
        terminated, truncated = _to_numpy(terminated), _to_numpy(truncated)
        done = terminated | truncated
        components = _numpy_components(info)
        every_env = np.ones(self.num_envs, dtype=np.bool_)
        vector_info: dict[str, Any] = {
            "reward_components": components,
            "_reward_components": every_env,
        }
        if done.any():
            final_obs = np.full(self.num_envs, None, dtype=object)
            final_obs_rows = _to_numpy(info["final_obs"])
            for index in np.flatnonzero(done):
                final_obs[index] = final_obs_rows[index]
            vector_info["final_obs"] = final_obs
            vector_info["_final_obs"] = done
            vector_info["final_info"] = {
                "reward_components": components,
                "_reward_components": done,
            }
            vector_info["_final_info"] = done
        return _to_numpy(obs), _to_numpy(reward), terminated, truncated, vector_info

    def render(self, index: int = 0) -> np.ndarray:
        """An RGB array of env ``index``.

        :param index: which env to draw
        """
        return self.env.render(index=index)

    def close_extras(self, **kwargs: Any) -> None:
        """Close the batched env."""
        self.env.close()

    def __repr__(self) -> str:
        return f"GymnasiumVectorEnv({self.env!r})"


class SB3VecEnv(VecEnv):
    """A batched env as a Stable-Baselines3 ``VecEnv``.

    As SB3 expects, ``step`` resets ended envs itself; ``infos[i]`` then holds
    ``"terminal_observation"`` and ``"TimeLimit.truncated"`` (truncated and not terminated),
    and always ``"reward_components"``, a dict ``name -> float`` for env ``i``.

    Example::

        >>> from rewardlab import envs
        >>> from rewardlab.envs.adapters import SB3VecEnv
        >>> from stable_baselines3 import PPO
        >>> venv = SB3VecEnv(envs.make("CartPole-v1", num_envs=8, seed=0))
        >>> model = PPO("MlpPolicy", venv).learn(10_000)

    :param env: the batched env (or wrapper) to adapt
    """

    def __init__(self, env: Batched):
        self.env = env
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)
        self._actions: np.ndarray | None = None

    def reset(self) -> np.ndarray:
        """Reset every env, with the seed and options set by ``seed()`` / ``set_options()``."""
        seed = self._seeds[0]
        options = self._options[0] or None
        obs, _ = self.env.reset(seed=seed, options=options)
        self._reset_seeds()
        self._reset_options()
        return _to_numpy(obs)

    def step_async(self, actions: np.ndarray) -> None:
        """Store the actions for :meth:`step_wait`.

        :param actions: ``(num_envs, ...)`` actions
        """
        self._actions = np.asarray(actions)

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Step every env with the stored actions."""
        obs, reward, terminated, truncated, info = self.env.step(self._actions)
        terminated, truncated = _to_numpy(terminated), _to_numpy(truncated)
        done = terminated | truncated
        components = _numpy_components(info)
        infos: list[dict[str, Any]] = [
            {"reward_components": {name: float(values[i]) for name, values in components.items()}}
            for i in range(self.num_envs)
        ]
        if done.any():
            final_obs = _to_numpy(info["final_obs"])
            for index in np.flatnonzero(done):
                infos[index]["terminal_observation"] = final_obs[index]
                infos[index]["TimeLimit.truncated"] = bool(
                    truncated[index] and not terminated[index]
                )
        return _to_numpy(obs), _to_numpy(reward), done, infos

    def close(self) -> None:
        """Close the batched env."""
        self.env.close()

    def get_images(self) -> list[np.ndarray]:
        """An RGB array of every env (for ``render``)."""
        return [self.env.render(index=index) for index in range(self.num_envs)]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The batched env's attribute, once per selected env.

        :param attr_name: the attribute
        :param indices: which envs
        """
        return [getattr(self.env, attr_name)] * len(self._get_indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set an attribute of the batched env (shared by every env).

        :param attr_name: the attribute
        :param value: its new value
        :param indices: must select every env, as the attribute is shared
        """
        if len(self._get_indices(indices)) != self.num_envs:
            raise ValueError(
                f"set_attr({attr_name!r}) on some envs only: the {self.num_envs} envs share "
                "one batched env, so attributes can only be set for all of them"
            )
        setattr(self.env, attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        """Call a method of the batched env once and return its result for each selected env.

        :param method_name: the method
        :param method_args: its positional arguments
        :param indices: which envs
        :param method_kwargs: its keyword arguments
        """
        result = getattr(self.env, method_name)(*method_args, **method_kwargs)
        return [result] * len(self._get_indices(indices))

    def env_is_wrapped(
        self, wrapper_class: type[gymnasium.Wrapper], indices: VecEnvIndices = None
    ) -> list[bool]:
        """Always ``False``: a batched env is never wrapped in a Gymnasium wrapper.

        :param wrapper_class: the Gymnasium wrapper class asked about
        :param indices: which envs
        """
        return [False] * len(self._get_indices(indices))
