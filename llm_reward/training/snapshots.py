"""Policies as plain data: what a sandboxed worker ships, and how the caller measures it.

The worker never measures its own fitness: at each checkpoint it ships the policy's
weights and observation statistics as JSON data (:func:`policy_snapshot`), and the caller,
a process that never loaded the reward program, rebuilds the policy from that untrusted
data (:func:`load_snapshot`, which reads only arrays of the exact names, dtypes and shapes
a fresh model has) and plays it on the env's own reward (:func:`measure_snapshot`).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import torch

from rewardlab import envs
from rewardlab.agents.evaluation import play_episodes
from rewardlab.agents.ppo import PPO
from rewardlab.envs.descriptions import EnvDescription

__all__ = ["Measured", "evaluate_policy", "load_snapshot", "measure_snapshot", "policy_snapshot"]

MAX_SNAPSHOT_VALUES = 20_000_000
_DTYPES = {"float32": torch.float32, "float64": torch.float64}
#: what a policy's evaluation episodes measured: (mean true return, success rate, partial success)
Measured = tuple[float, float | None, float | None]


def policy_snapshot(model: PPO) -> dict[str, Any]:
    """The policy's weights and observation statistics as JSON data: for each tensor its
    dtype, shape and little-endian bytes in base64.

    :param model: the model whose acting parts to ship (actor, critic, ``obs_rms``).
    """
    tensors = {**{f"policy.{k}": v for k, v in model.policy.state_dict().items()},
               **{f"obs_rms.{k}": v for k, v in model.obs_rms.state_dict().items()}}
    return {
        name: {"dtype": str(tensor.dtype).removeprefix("torch."), "shape": list(tensor.shape),
               "data": base64.b64encode(tensor.detach().cpu().contiguous().numpy().tobytes()).decode()}
        for name, tensor in tensors.items()
    }


def measure_snapshot(
    snapshot: Any,
    description: EnvDescription,
    ppo_kwargs: Mapping[str, Any],
    episodes: int,
    device: str | torch.device,
    seed: int,
) -> Measured:
    """Mean true return, success rate and partial success of a shipped policy, as
    :func:`evaluate_policy` (the last two ``None`` where the env's description has no such rule).

    Runs in the caller, which never loaded the program: the snapshot is untrusted data,
    read only as arrays of the exact names, dtypes and shapes a fresh model has.

    :param snapshot: what :func:`policy_snapshot` returned in the worker.
    :param description: the env's description (its id and success rule).
    :param ppo_kwargs: the hyperparameters the worker trained with (they fix the shapes).
    :param episodes: evaluation episodes (envs in the batch).
    :param device: where to evaluate.
    :param seed: seed of the evaluation env.
    :raises ValueError: the snapshot is not the policy of such a model.
    """
    env = envs.make(description.env_id, num_envs=episodes, device=device, seed=seed)
    try:
        model = load_snapshot(snapshot, env, ppo_kwargs, seed)
        measured = play_episodes(model, env, seed=seed, success=description.success,
                                 partial=description.partial_success)
    finally:
        env.close()
    return measured.mean_return, measured.success_rate, measured.partial_success


def load_snapshot(snapshot: Any, env: Any, ppo_kwargs: Mapping[str, Any], seed: int = 0) -> PPO:
    """A fresh ``PPO`` on ``env`` with a shipped policy's weights and observation statistics.

    The snapshot is untrusted data: only arrays of the exact names, dtypes and shapes the
    fresh model has are read, and they must be finite.

    :param snapshot: what :func:`policy_snapshot` returned in the worker.
    :param env: the batched env the model acts in.
    :param ppo_kwargs: the hyperparameters the worker trained with (they fix the shapes).
    :param seed: seeds the fresh model (its action sampling).
    :raises ValueError: the snapshot is not the policy of such a model.
    """
    # the minibatch size plays no part in acting, and may not fit this env's batch; acting
    # is not what compile=True compiles
    model = PPO(env, seed=seed, device=env.device, **{**dict(ppo_kwargs), "batch_size": None, "compile": False})
    expected = {**{f"policy.{k}": v for k, v in model.policy.state_dict().items()},
                **{f"obs_rms.{k}": v for k, v in model.obs_rms.state_dict().items()}}
    if not isinstance(snapshot, dict) or set(snapshot) != set(expected):
        raise ValueError("the policy snapshot does not name the model's tensors")
    loaded = {name: _decode(snapshot[name], like) for name, like in expected.items()}
    model.policy.load_state_dict({k[len("policy."):]: v for k, v in loaded.items() if k.startswith("policy.")})
    model.obs_rms.load_state_dict({k[len("obs_rms."):]: v for k, v in loaded.items() if k.startswith("obs_rms.")})
    return model


def _decode(data: Any, like: torch.Tensor) -> torch.Tensor:
    if not isinstance(data, dict) or set(data) != {"dtype", "shape", "data"}:
        raise ValueError("a tensor of the snapshot is not {dtype, shape, data}")
    dtype = _DTYPES.get(data["dtype"])
    if dtype is None or dtype != like.dtype or data["shape"] != list(like.shape):
        raise ValueError(f"a tensor of the snapshot has dtype {data['dtype']!r} and shape {data['shape']!r}, "
                         f"not {like.dtype} {list(like.shape)}")
    if like.numel() > MAX_SNAPSHOT_VALUES or not isinstance(data["data"], str):
        raise ValueError("a tensor of the snapshot is too large or not base64 text")
    raw = base64.b64decode(data["data"], validate=True)
    if len(raw) != like.numel() * like.element_size():
        raise ValueError("a tensor of the snapshot has the wrong number of bytes")
    tensor = torch.frombuffer(bytearray(raw), dtype=dtype).reshape(like.shape).clone()
    if not bool(torch.isfinite(tensor).all()):
        raise ValueError("a tensor of the snapshot holds NaN or infinite values")
    return tensor.to(like.device)


def evaluate_policy(
    model: PPO,
    description: EnvDescription,
    episodes: int,
    device: str | torch.device,
    seed: int,
) -> tuple[float, float | None]:
    """Mean true return (and success rate) of ``episodes`` deterministic episodes.

    Runs one episode in each of ``episodes`` copies of the env, from the same start states
    for the same ``seed``.

    :param model: the trained policy.
    :param description: the env's description (its id and success rule).
    :param episodes: how many episodes (envs in the batch).
    :param device: the model's device.
    :param seed: seed of the evaluation env.
    :return: ``(mean_return, success_rate or None)``.
    """
    env = envs.make(description.env_id, num_envs=episodes, device=device, seed=seed)
    try:
        measured = play_episodes(model, env, seed=seed, success=description.success)
    finally:
        env.close()
    return measured.mean_return, measured.success_rate
