"""What every rewardlab learner shares, written once (the role of SB3's ``BaseAlgorithm``).

:class:`Learner` owns ``predict`` (one observation or a batch, numpy or torch, returned in
the form given), ``save`` and ``load`` (a ``torch.save`` archive of plain data and tensors,
read back with ``weights_only=True``) and the checks of an env against the model (its kind,
device and spaces). A learner writes what is its own: how it acts on a batch
(``_act``), what it saves beyond the shared entries (``_saved_state``) and how it is
rebuilt from them (``_restore``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import gymnasium
import numpy as np
import torch
from torch import nn

from rewardlab.agents.common import check_batched, read_saved
from rewardlab.common.threads import ThreadsSetting

__all__ = ["Learner", "clipped_gradient_step", "predict_in_form", "same_space"]

L = TypeVar("L", bound="Learner")


def same_space(a: gymnasium.spaces.Space, b: gymnasium.spaces.Space) -> bool:
    """Whether a model made for space ``a`` can act in ``b``: Discrete with as many actions,
    or Boxes (a subclass such as ``WholeNumberBox`` included) or another kind of space alike
    with the same shape."""
    if isinstance(a, gymnasium.spaces.Discrete):
        return isinstance(b, gymnasium.spaces.Discrete) and int(a.n) == int(b.n)
    if isinstance(a, gymnasium.spaces.Box):
        return isinstance(b, gymnasium.spaces.Box) and tuple(a.shape) == tuple(b.shape)
    return type(a) is type(b) and tuple(a.shape) == tuple(b.shape)


def clipped_gradient_step(
    optimizer: torch.optim.Optimizer, loss: torch.Tensor, max_grad_norm: float
) -> None:
    """One gradient step as CleanRL and SB3 write it: ``loss.backward()``, the gradients'
    global norm clipped to ``max_grad_norm`` (``clip_grad_norm_``), ``optimizer.step()``.

    :param optimizer: the optimiser of the parameters ``loss`` depends on.
    :param loss: the 0-d loss to minimise.
    :param max_grad_norm: the largest global gradient norm (``math.inf``: no clipping).
    """
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    nn.utils.clip_grad_norm_(parameters, max_grad_norm, foreach=True)
    optimizer.step()


def predict_in_form(
    observation: np.ndarray | torch.Tensor,
    obs_shape: tuple[int, ...],
    act: Callable[[torch.Tensor], torch.Tensor],
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> np.ndarray | torch.Tensor:
    """``predict``'s contract, for every policy (the learners, the LLM policy): one
    observation or a batch, numpy or torch, the actions returned in the form given (numpy in,
    numpy out on the CPU; a tensor in, a tensor out).

    :param observation: ``obs_shape`` or ``(B, *obs_shape)``.
    :param obs_shape: one observation's shape.
    :param act: the actions of a batch ``(B, *obs_shape)``, a tensor with a first dim of ``B``.
    :param device: where the batch goes before ``act`` (``None``: where it is).
    :param dtype: the batch's dtype for ``act`` (``None``: as given).
    :raises ValueError: the observation is neither one observation nor a batch of them.
    """
    as_numpy = not isinstance(observation, torch.Tensor)
    obs = torch.as_tensor(np.asarray(observation) if as_numpy else observation)
    if device is not None or dtype is not None:
        obs = obs.to(device=device, dtype=dtype)
    single = tuple(obs.shape) == tuple(obs_shape)
    if single:
        obs = obs.unsqueeze(0)
    if tuple(obs.shape[1:]) != tuple(obs_shape):
        raise ValueError(f"observation has shape {tuple(obs.shape)}; expected {tuple(obs_shape)} or "
                         f"(batch, *{tuple(obs_shape)})")
    actions = act(obs)
    if single:
        actions = actions[0]
    return actions.cpu().numpy() if as_numpy else actions


class Learner(ThreadsSetting):
    """The base of rewardlab's own learners (``PPO``, ``HRA``).

    A learner's ``learn`` runs at its ``threads`` torch threads (1 by default on a CPU, None
    for torch's own setting) and gives the caller back its own count when it returns.

    A subclass sets the class attributes below and, once built, ``observation_space``,
    ``action_space``, ``device``, ``seed``, ``config`` (a ``LearnerConfig``),
    ``num_timesteps``, ``_n_updates`` and ``tensorboard_log``.
    """

    #: the learner's name, in messages
    learner: ClassVar[str]
    #: the SB3 algorithm to use on a plain ``gymnasium.Env`` instead, in messages
    sb3_alternative: ClassVar[str]
    #: the ``"format"`` entry of the files ``save`` writes
    file_format: ClassVar[str]

    observation_space: gymnasium.spaces.Box
    action_space: gymnasium.spaces.Space
    device: torch.device
    seed: int
    config: Any
    num_timesteps: int
    _n_updates: int
    tensorboard_log: str | os.PathLike[str] | None

    # ------------------------------------------------------------------ acting
    def _act(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        """Actions for a batch of observations ``(B, *obs_shape)`` (float32, on the model's
        device, gradients off), within the action space.

        :param obs: the batch.
        :param deterministic: the learner's best action instead of an exploring one.
        """
        raise NotImplementedError

    def predict(
        self,
        observation: np.ndarray | torch.Tensor,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
    ) -> tuple[np.ndarray | torch.Tensor, Any]:
        """Actions for one observation or a batch, returned in the form given (SB3's signature).

        Numpy in, numpy out (on the CPU); a tensor in, a tensor out on the model's device.
        Random choices (``deterministic=False``) use torch's global generator, not the
        training stream.

        :param observation: ``obs_shape`` or ``(B, *obs_shape)``.
        :param state: ignored (no recurrent state); returned as is.
        :param episode_start: ignored; accepted for SB3's ``evaluate_policy``.
        :param deterministic: the learner's best action instead of an exploring one.
        :return: ``(actions, state)``.
        """
        del episode_start
        with torch.no_grad():
            actions = predict_in_form(observation, tuple(self.observation_space.shape),
                                      lambda obs: self._act(obs, deterministic), self.device, torch.float32)
        return actions, state

    # ------------------------------------------------------------------ envs
    def check_env(self, env: Any) -> None:
        """Raise unless the model can train in ``env``: a batched env on the model's device
        whose spaces are the model's.

        :param env: a batched env.
        :raises TypeError: not a batched env.
        :raises ValueError: another device or other spaces, naming both.
        """
        check_batched(env, self.learner, self.sb3_alternative)
        if torch.device(env.device) != self.device:
            raise ValueError(
                f"the env lives on {env.device} but the model on {self.device}; load the "
                "model with device=env.device or make the env on the model's device"
            )
        for kind, mine, theirs in (
            ("observation", self.observation_space, env.single_observation_space),
            ("action", self.action_space, env.single_action_space),
        ):
            if not same_space(mine, theirs):
                raise ValueError(f"the env's {kind} space {theirs} differs from the model's {mine}")

    def set_env(self, env: Any) -> None:
        """Attach a batched env to train in (:meth:`check_env` first).

        :param env: a batched env.
        """
        raise NotImplementedError

    def _check_learn(self, total_timesteps: Any, callback: Any) -> None:
        """``learn``'s checks of its arguments and of the env, the same for every learner."""
        if not isinstance(total_timesteps, int | np.integer) or total_timesteps < 1:
            raise ValueError(f"total_timesteps must be a positive integer, got {total_timesteps!r}")
        if callback is not None and not callable(callback):
            raise TypeError(
                f"callback must be a function callback(locals_dict) -> bool | None, got "
                f"{type(callback).__name__}"
            )
        if getattr(self, "env", None) is None:
            raise ValueError(
                f"this model has no env: pass env= to {self.learner}.load or call set_env(env)"
            )

    # ------------------------------------------------------------------ files
    def _saved_state(self) -> dict[str, Any]:
        """What ``save`` writes beyond the seed, hyperparameters and counters: plain data
        and tensors."""
        raise NotImplementedError

    def _restore(self, data: dict[str, Any], device: torch.device | str, **extras: Any) -> None:
        """Build this (unbuilt) model from a saved file's ``data`` on ``device``.

        :param data: what ``save`` wrote.
        :param device: where to put the model.
        :param extras: what ``load`` was given that the file does not hold.
        """
        raise NotImplementedError

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the model to ``path`` (a ``torch.save`` archive of plain data and tensors).

        :param path: file to write.
        """
        torch.save(
            {
                "format": self.file_format,
                "seed": self.seed,
                "hyperparameters": self.config.to_dict(),
                **self._saved_state(),
                "value_heads": self._value_head_names(),
                "intrinsic": getattr(getattr(self, "intrinsic", None), "name", None),
                "num_timesteps": self.num_timesteps,
                "n_updates": self._n_updates,
            },
            path,
        )

    def _value_head_names(self) -> list[str]:
        """The critic's heads by the reward component each predicts, in output order."""
        return [str(getattr(head, "component", head)) for head in getattr(self, "heads", ())]

    @classmethod
    def load(
        cls: type[L],
        path: str | os.PathLike[str],
        env: Any = None,
        device: torch.device | str | None = None,
        **extras: Any,
    ) -> L:
        """Load a model written by ``save``.

        :param path: the file.
        :param env: a batched env to continue training in (optional for ``predict``).
        :param device: where to put the model (default: the env's device, else the CPU).
        :param extras: what the file does not hold and the learner takes again (PPO:
            ``intrinsic``, ``reward_fn``; HRA: ``reward_components``).
        :raises ValueError: the file is not one this learner's ``save`` wrote, or it was saved
            with other value heads (an intrinsic module's) than ``extras`` make, naming them.
        """
        data, device = read_saved(path, cls.file_format, cls.learner, env, device)
        model = cls.__new__(cls)
        try:
            model._restore(data, device, **extras)
        except RuntimeError:  # the saved networks do not fit the ones built
            saved, built = data.get("value_heads"), model._value_head_names()
            if saved == built or (saved is None and "intrinsic" in extras):
                raise
            # files saved before the heads were named say nothing of them: the sizes differ
            heads = f"has the value heads {saved}" if saved else "has other value heads"
            trained_with = data.get("intrinsic") or "episodic"
            raise ValueError(
                f"{os.fspath(path)} {heads}, not the {built} this load builds: it trained with a bonus; "
                f"pass its intrinsic module again, e.g. {cls.learner}.load(path, env, "
                f"intrinsic=rewardlab.intrinsic.make({trained_with!r}, obs_space, action_space))"
            ) from None
        model.tensorboard_log = None
        model.num_timesteps = data["num_timesteps"]
        model._n_updates = data["n_updates"]
        if env is not None:
            model.set_env(env)
        return model
