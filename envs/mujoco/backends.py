"""Physics backends of the batched MuJoCo envs: many simulations of one model, stepped together.

A backend owns the simulations and exposes their state as torch tensors; the task math in
:mod:`rewardlab.envs.mujoco.core` and :mod:`rewardlab.envs.mujoco.tasks` reads those tensors and never touches
MuJoCo itself, so every backend runs the same tasks.

- :class:`CpuBatchBackend`: MuJoCo's own ``mujoco.batch.Batch``, a C thread pool over the
  simulations. Its results are bit-identical to stepping one ``MjData`` per simulation, so
  the envs match Gymnasium's to the last bit.
- :class:`rewardlab.envs.mujoco.warp_backend.WarpBackend`: MuJoCo Warp (the ``mujoco-warp`` extra), the
  simulations as GPU kernels in float32; made by :func:`make_backend` for ``backend="warp"``.
  On a CPU device it runs on Warp's single-threaded CPU device, for tests only. MuJoCo Warp
  4.0 builds capsule-plane contact frames differently from MuJoCo C, so Ant's trajectories
  leave the CPU backend's at the first touchdown; the planar tasks agree to float32 rounding.
"""

from __future__ import annotations

import warnings
from typing import Protocol

import numpy as np
import torch

BACKENDS = ("auto", "cpu", "warp")


class Backend(Protocol):
    """What a task needs from the simulations; every tensor is live and float64 or float32.

    ``qpos`` ``(num_envs, nq)`` and ``qvel`` ``(num_envs, nv)`` hold the current state,
    ``xpos`` ``(num_envs, nbody, 3)`` the bodies' positions as ``MjData.xpos`` has them after
    ``mj_step`` (one substep behind the state).
    """

    device: torch.device
    qpos: torch.Tensor
    qvel: torch.Tensor
    xpos: torch.Tensor

    def step(self, ctrl: torch.Tensor, nstep: int) -> None:
        """Write ``ctrl`` ``(num_envs, nu)`` and run ``nstep`` calls of ``mj_step`` in every simulation."""

    def reset(self, ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Reset the simulations ``ids`` (sorted int64) to ``qpos``/``qvel``, then run ``mj_forward``."""

    def cfrc_ext(self) -> torch.Tensor:
        """``MjData.cfrc_ext`` ``(num_envs, nbody, 6)`` as ``mj_rnePostConstraint`` computes it after the step."""

    def state(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Simulation ``index``'s ``(qpos, qvel)`` as float64 numpy arrays."""


def _live_tensor(array: np.ndarray) -> torch.Tensor:
    """A torch view of a numpy array that MuJoCo keeps writing into (read-only outputs included)."""
    with warnings.catch_warnings():
        # Bound outputs are flagged read-only because a write would be lost; the tensor is
        # only ever read, so sharing their memory is safe.
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


class CpuBatchBackend:
    """``num_envs`` simulations of ``model`` on ``mujoco.batch.Batch``'s thread pool.

    :param model: the compiled ``MjModel``
    :param num_envs: how many simulations
    :param nthread: threads of the pool, the caller's included; 0 takes every CPU
    :param need_cfrc_ext: keep one ``MjData`` per simulation so that :meth:`cfrc_ext` can run
        ``mj_rnePostConstraint`` on each, as Gymnasium does after every step (Ant's contact
        forces). Its cost shows in Ant's row of ``benchmarks/mujoco_throughput.py``.
    """

    def __init__(self, model, num_envs: int, nthread: int = 0, need_cfrc_ext: bool = False):
        import mujoco
        from mujoco.batch import Batch

        self._mujoco = mujoco
        self.model = model
        self.device = torch.device("cpu")
        self.batch = Batch(model, nsim=num_envs, nthread=nthread, persistent=need_cfrc_ext)
        self._qpos = self.batch.bind("qpos")
        self._qvel = self.batch.bind("qvel")
        self._ctrl = self.batch.bind("ctrl")
        self.qpos = _live_tensor(self._qpos)
        self.qvel = _live_tensor(self._qvel)
        self.xpos = _live_tensor(self.batch.bind("xpos"))
        self._need_cfrc_ext = need_cfrc_ext
        if need_cfrc_ext:
            self._ncon = self.batch.bind("ncon")
            self._scratch = mujoco.MjData(model)
            self._cfrc_ext = torch.zeros((num_envs, model.nbody, 6), dtype=torch.float64)
            self._cfrc_ext_stale = False

    def step(self, ctrl: torch.Tensor, nstep: int) -> None:
        self._ctrl[...] = ctrl.numpy()
        self.batch.step(nstep=nstep)
        if self._need_cfrc_ext:
            self._cfrc_ext_stale = True

    def reset(self, ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        rows = ids.numpy()
        if self._need_cfrc_ext:
            self.cfrc_ext()  # the other simulations' forces, before their MjData is reused
        self.batch.reset(rows, stage=self._mujoco.mjtStage.mjSTAGE_NONE.value)
        self._qpos[rows] = qpos.numpy()
        self._qvel[rows] = qvel.numpy()
        self.batch.forward(rows)
        if self._need_cfrc_ext:
            # mj_resetData zeroes cfrc_ext and mj_forward does not compute it: Gymnasium's
            # first observation of an episode has no contact forces.
            self._cfrc_ext[ids] = 0.0

    def cfrc_ext(self) -> torch.Tensor:
        if not self._need_cfrc_ext:
            raise RuntimeError("this backend was made with need_cfrc_ext=False")
        # Ant integrates with RK4, so MjData after mj_step holds the last Runge-Kutta stage;
        # Gymnasium runs mj_rnePostConstraint on exactly that data. A sensor-triggered
        # computation would use the first stage instead, so each simulation's MjData is
        # read back and the function run on it. Without contacts it yields zeros.
        out = self._cfrc_ext
        if not self._cfrc_ext_stale:
            return out
        self._cfrc_ext_stale = False
        in_contact = np.flatnonzero(self._ncon)
        out[self._ncon == 0] = 0.0
        scratch = self._scratch
        for sim in in_contact:
            self.batch.get_data(int(sim), scratch)
            self._mujoco.mj_rnePostConstraint(self.model, scratch)
            out[sim] = torch.from_numpy(scratch.cfrc_ext)
        return out

    def state(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return self._qpos[index].copy(), self._qvel[index].copy()


def make_backend(
    name: str,
    model,
    num_envs: int,
    device: torch.device,
    nthread: int = 0,
    need_cfrc_ext: bool = False,
) -> Backend:
    """The backend ``name`` for ``num_envs`` simulations of ``model``.

    :param name: ``"cpu"`` (``mujoco.batch``), ``"warp"`` (MuJoCo Warp) or ``"auto"``: Warp
        when ``device`` is a CUDA device and ``mujoco_warp`` is installed, else ``"cpu"``
    :param model: the compiled ``MjModel``
    :param num_envs: how many simulations
    :param device: the env's device; the CPU backend moves its tensors there
    :param nthread: threads of the CPU backend (0: every CPU)
    :param need_cfrc_ext: the task reads contact forces (:meth:`Backend.cfrc_ext`)
    :raises ValueError: an unknown name, or Warp asked for without ``mujoco-warp``
    """
    if name not in BACKENDS:
        raise ValueError(f"backend={name!r} is not one of {BACKENDS}")
    if name == "auto":
        name = "warp" if device.type == "cuda" and _warp_installed() else "cpu"
    if name == "warp":
        if not _warp_installed():
            raise ValueError(
                "backend='warp' needs MuJoCo Warp: pip install 'rewardlab[mujoco-warp]' "
                "(or use backend='cpu')"
            )
        from rewardlab.envs.mujoco.warp_backend import WarpBackend

        return WarpBackend(model, num_envs, device=device, need_cfrc_ext=need_cfrc_ext)
    return CpuBatchBackend(model, num_envs, nthread=nthread, need_cfrc_ext=need_cfrc_ext)


def _warp_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("mujoco_warp") is not None
