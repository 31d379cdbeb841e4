"""MuJoCo Warp as a backend of the batched MuJoCo envs: every simulation runs in GPU kernels.

:class:`WarpBackend` keeps the simulations in one ``mujoco_warp.Data`` on the env's device
and exposes ``qpos``, ``qvel``, ``xpos`` and ``cfrc_ext`` as torch views of its Warp arrays
(``warp.to_torch``: no copies). A physics step, a reset and a forward pass are each one
captured graph, launched on torch's current stream, so torch code and Warp kernels stay in
order without the host waiting for the device.

Warp computes in float32, MuJoCo's C code in float64. The envs' numbers differ from the CPU
backend's (and Gymnasium's) from the first step by float32 rounding (about 1e-7 relative),
and the difference grows along an episode as the dynamics amplify it. HalfCheetah's
contacts amplify it fast (about 1e-3 after ten steps of random actions, of order one after
forty: two float64 runs started 1e-7 apart drift alike); Hopper's and Walker2d's stay within
1e-4 over 50 steps. The positions are float32 too: ``x_velocity`` is a difference of two
positions over ``dt``, so its rounding grows with the distance run (up to about 6e-4 m/s at
x = 500 m with HalfCheetah's ``dt = 0.05``).

MuJoCo Warp 4.0 also orients the friction directions of a capsule-plane contact differently
from MuJoCo when the capsule points within 30 degrees of the plane's normal (a fixed world
axis, where MuJoCo takes the capsule's axis). With the pyramidal friction cones of
Gymnasium's models that changes the friction forces: Ant's legs land that way, so Ant's
trajectories leave the CPU backend's at the first touchdown. The planar tasks are not
affected: for a capsule in the x-z plane both frames give the same friction pyramid.

Requires ``pip install 'rewardlab[mujoco-warp]'``.
"""

from __future__ import annotations

import numpy as np
import torch

# The most contacts MuJoCo's colliders report for a pair of these geom types (sphere-plane 1,
# capsule-plane 2, capsule-capsule 2); any other pair is allowed 8 (box-box's maximum).
_ROUND_GEOMS = ("mjGEOM_PLANE", "mjGEOM_SPHERE", "mjGEOM_CAPSULE")
_ROUND_PAIR_CONTACTS = 2
_OTHER_PAIR_CONTACTS = 8


class WarpBackend:
    """``num_envs`` simulations of ``model`` in MuJoCo Warp on ``device``.

    The tensors ``qpos``, ``qvel`` and ``xpos`` are float32 views of the Warp arrays. On a
    CUDA device the kernels run on the GPU. On the CPU device they run in Warp's CPU
    backend, one thread for all simulations: that is for tests (it compares this backend
    with :class:`~rewardlab.envs.mujoco.backends.CpuBatchBackend` on a machine without a GPU), not for
    speed.

    The first backend of a model compiles MuJoCo Warp's kernels (about a minute for the
    first task on a small CPU; Warp caches them on disk for later processes). Contacts and
    constraint rows are allocated for the most the model can reach (see :func:`_capacity`).

    :param model: the compiled ``MjModel``
    :param num_envs: how many simulations
    :param device: a CUDA device, or the CPU (Warp's CPU device)
    :param need_cfrc_ext: also run ``rne_postconstraint`` after every step, for
        :meth:`cfrc_ext` (Ant's contact forces)
    :raises ValueError: a device that is neither, or a model MuJoCo Warp cannot simulate
    """

    def __init__(
        self,
        model,
        num_envs: int,
        device: torch.device | str = "cuda",
        need_cfrc_ext: bool = False,
    ):
        import mujoco_warp
        import warp

        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if device.type not in ("cuda", "cpu"):
            raise ValueError(f"device={device} is neither a CUDA device nor the CPU")
        self._warp = warp
        self.device = device
        self.model = model
        self._need_cfrc_ext = need_cfrc_ext
        warp.init()
        self._warp_device = warp.device_from_torch(device)
        with warp.ScopedDevice(self._warp_device):
            try:
                self._model = mujoco_warp.put_model(model)
            except NotImplementedError as error:
                raise ValueError(
                    f"MuJoCo Warp cannot simulate this model ({error}); use backend='cpu'"
                ) from error
            pairs = self._model.nxn_geom_pair_filtered.numpy().reshape(-1, 2)
            nconmax, njmax = _capacity(model, pairs)
            self._data = mujoco_warp.make_data(model, nworld=num_envs, nconmax=nconmax, njmax=njmax)
            self._reset_mask = warp.ones(num_envs, dtype=bool)
        data = self._data
        self.qpos = warp.to_torch(data.qpos)
        self.qvel = warp.to_torch(data.qvel)
        self.xpos = warp.to_torch(data.xpos)
        self._ctrl = warp.to_torch(data.ctrl)
        self._cfrc_ext = warp.to_torch(data.cfrc_ext)
        self._resetting = warp.to_torch(self._reset_mask)
        self._torch_streams: dict[int, object] = {}

        def step() -> None:
            mujoco_warp.step(self._model, data)

        def rne_postconstraint() -> None:
            mujoco_warp.rne_postconstraint(self._model, data)

        def reset() -> None:
            mujoco_warp.reset_data(self._model, data, reset=self._reset_mask)

        def forward() -> None:
            mujoco_warp.forward(self._model, data)

        operations = [step, reset, forward] + [rne_postconstraint] * need_cfrc_ext
        with warp.ScopedDevice(self._warp_device):
            # Run each once before capturing it: the run builds and loads the kernels (a
            # capture cannot on older CUDA drivers) and leaves every world at qpos0.
            for operation in operations:
                operation()
            reset()
            forward()
            graphs = [self._capture(operation) for operation in operations]
            warp.synchronize_device(self._warp_device)
        self._step, self._reset, self._forward = graphs[:3]
        self._rne_postconstraint = graphs[3] if need_cfrc_ext else None

    def step(self, ctrl: torch.Tensor, nstep: int) -> None:
        self._ctrl.copy_(ctrl)
        stream = self._stream()
        for _ in range(nstep):
            self._warp.capture_launch(self._step, stream=stream)
        if self._rne_postconstraint is not None:
            # After the last step, as Gymnasium reads cfrc_ext: with RK4 (Ant) the data then
            # hold the last Runge-Kutta stage, as MjData does after mj_step.
            self._warp.capture_launch(self._rne_postconstraint, stream=stream)

    def reset(self, ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        stream = self._stream()
        everyone = len(ids) == len(self._resetting)
        self._resetting.zero_()
        self._resetting[ids] = True
        self._warp.capture_launch(self._reset, stream=stream)  # mj_resetData, zero warm start
        self.qpos[ids] = qpos.to(self.qpos.dtype)
        self.qvel[ids] = qvel.to(self.qvel.dtype)
        # mj_forward runs in every world; the others must keep what their last mj_step
        # left (xpos one substep behind, the step's contact forces), as on the CPU backend.
        kept = [] if everyone else [self.xpos] + [self._cfrc_ext] * self._need_cfrc_ext
        saved = [tensor.clone() for tensor in kept]
        self._warp.capture_launch(self._forward, stream=stream)
        if kept:
            others = ~self._resetting
            for tensor, before in zip(kept, saved, strict=True):
                tensor[others] = before[others]
        if self._need_cfrc_ext:
            # mj_resetData zeroes cfrc_ext and mj_forward does not compute it: Gymnasium's
            # first observation of an episode has no contact forces.
            self._cfrc_ext[ids] = 0.0

    def cfrc_ext(self) -> torch.Tensor:
        if not self._need_cfrc_ext:
            raise RuntimeError("this backend was made with need_cfrc_ext=False")
        return self._cfrc_ext

    def state(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        qpos = self.qpos[index].to("cpu", torch.float64).numpy()
        qvel = self.qvel[index].to("cpu", torch.float64).numpy()
        return qpos, qvel

    def _capture(self, operation):
        with self._warp.ScopedCapture(device=self._warp_device) as capture:
            operation()
        return capture.graph

    def _stream(self):
        """Warp's handle of torch's current stream, to launch on (None on the CPU)."""
        if self.device.type != "cuda":
            return None
        torch_stream = torch.cuda.current_stream(self.device)
        stream = self._torch_streams.get(torch_stream.cuda_stream)
        if stream is None:
            stream = self._warp.stream_from_torch(torch_stream)
            self._torch_streams[torch_stream.cuda_stream] = stream
        return stream


def _capacity(model, pairs: np.ndarray) -> tuple[int, int]:
    """``(nconmax, njmax)``: the contacts and constraint rows one world of ``model`` can reach.

    MuJoCo Warp allocates both per world up front and drops what does not fit (printing a
    warning); its defaults guess from the model's size. This counts instead: the contacts
    each geom pair of the broadphase (``pairs``, ``(n, 2)`` geom ids) can report, each
    taking the rows of its friction cone, plus a row per limited joint or tendon and per
    dof or tendon with friction loss, and the equality constraints' rows. For Ant (13 pairs
    with the floor) that is 26 contacts and 112 rows, where the defaults are 48 and 64: an
    Ant on its back with its legs on the floor would overflow them.
    """
    import mujoco

    round_types = [int(getattr(mujoco.mjtGeom, name)) for name in _ROUND_GEOMS]
    round_pair = np.isin(model.geom_type[pairs], round_types).all(axis=1)
    contacts = int(np.where(round_pair, _ROUND_PAIR_CONTACTS, _OTHER_PAIR_CONTACTS).sum())
    condim = max(int(model.geom_condim.max(initial=1)), int(model.pair_dim.max(initial=1)))
    elliptic = model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    rows_per_contact = condim if elliptic or condim == 1 else 2 * (condim - 1)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)  # equality constraints are always active: count their rows
    rows = (
        contacts * rows_per_contact
        + int(model.jnt_limited.sum())
        + int(model.tendon_limited.sum())
        + int((model.dof_frictionloss > 0).sum())
        + int((model.tendon_frictionloss > 0).sum())
        + int(data.ne)
    )
    return max(contacts, 1), max(rows, 1)
