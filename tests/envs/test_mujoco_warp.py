"""The Warp backend against the CPU backend: same states, reward terms and ends, to float32 rounding.

MuJoCo Warp runs here on Warp's CPU device (and on CUDA too where there is one). Its first
use compiles its kernels, a minute or two on a small machine (Warp caches them on disk, so
later runs take seconds): the tests run only with ``REWARDLAB_WARP_TESTS=1`` and
``mujoco-warp`` installed (``pip install 'rewardlab[mujoco-warp]'``).

Warp computes in float32, the CPU backend in float64, so the two agree to about 1e-6 at
first and drift apart as the dynamics amplify the rounding. Each task is compared over a
horizon where that drift stays far below the tolerance (measured over several seeds; the
seeds here are fixed, because about once in 10^4 env steps a contact that starts within
rounding of its threshold sends one episode its own way):

- Hopper, Walker2d and InvertedPendulum: 50 steps, terminations and resets included (the
  drift stays below 1e-4);
- HalfCheetah: 5 steps. Its contacts amplify any difference about a hundredfold within a
  few steps (two float64 runs 1e-7 apart are 1e-4 apart after 10 steps), so after the
  first hard contacts the float32 run is a different trajectory;
- Ant: 8 steps of free fall, lifted 1 m so that no leg touches the floor. MuJoCo Warp 4.0
  orients the friction directions of a capsule-plane contact differently from MuJoCo when
  the capsule points within 30 degrees of the plane's normal (a fixed axis, where MuJoCo
  takes the capsule's axis); with the pyramidal friction cones of Gymnasium's models the
  contact forces differ, so Ant's trajectories part at the first such touchdown.
  :func:`test_backend_contact_forces_and_partial_resets` checks the contact forces on a
  sphere instead.
"""

import os

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco.batch")
pytest.importorskip("mujoco_warp")
pytestmark = pytest.mark.skipif(
    os.environ.get("REWARDLAB_WARP_TESTS") != "1",
    reason="compiles MuJoCo Warp's kernels (minutes the first time): set REWARDLAB_WARP_TESTS=1",
)

import mujoco  # noqa: E402

from rewardlab import envs  # noqa: E402
from rewardlab.envs.mujoco.backends import CpuBatchBackend  # noqa: E402
from rewardlab.envs.mujoco.warp_backend import WarpBackend  # noqa: E402

NUM_ENVS = 4
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
# (env id, steps compared, keyword arguments); the module docstring says why these horizons.
HORIZONS = [
    ("Hopper-v5", 50, {}),
    ("Walker2d-v5", 50, {}),
    ("InvertedPendulum-v5", 50, {}),
    ("HalfCheetah-v5", 5, {}),
    ("Ant-v5", 8, {"healthy_z_range": (0.2, 3.0)}),
]
TOLERANCE = {"rtol": 1e-3, "atol": 1e-3}  # the drift over these horizons stays below 1e-4


def _close(warp_value: torch.Tensor, cpu_value: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(
        warp_value.cpu(), cpu_value.cpu(), **TOLERANCE, msg=lambda message: f"{what}: {message}"
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("env_id", "steps", "kwargs"), HORIZONS)
def test_tracks_the_cpu_backend(env_id, steps, kwargs, device):
    warp_env = envs.make(env_id, num_envs=NUM_ENVS, seed=3, device=device, backend="warp", **kwargs)
    cpu_env = envs.make(
        env_id, num_envs=NUM_ENVS, seed=3, device=device, backend="cpu", nthread=1, **kwargs
    )
    assert type(warp_env.backend).__name__ == "WarpBackend"
    warp_obs, _ = warp_env.reset()
    cpu_obs, _ = cpu_env.reset()
    if env_id == "Ant-v5":
        qpos = cpu_env.qpos.clone()
        qpos[:, 2] += 1.0
        warp_obs = warp_env.set_state(qpos, cpu_env.qvel.clone())
        cpu_obs = cpu_env.set_state(qpos, cpu_env.qvel.clone())
    _close(warp_obs, cpu_obs, f"{env_id} first observation")
    assert warp_obs.device == warp_env.device and warp_obs.dtype == torch.float32
    generator = torch.Generator().manual_seed(0)
    high = torch.as_tensor(cpu_env.single_action_space.high)
    endings = 0
    for step in range(steps):
        # Actions beyond the range too: both clamp the controls, neither the control cost.
        draw = torch.rand((NUM_ENVS, *high.shape), generator=generator)
        actions = ((draw * 2.4 - 1.2) * high).to(device)
        warp_obs, _, warp_terminated, warp_truncated, warp_info = warp_env.step(actions)
        cpu_obs, _, cpu_terminated, cpu_truncated, cpu_info = cpu_env.step(actions)
        where = f"{env_id} step {step}"
        _close(warp_info["final_obs"], cpu_info["final_obs"], f"{where} observation")
        _close(warp_obs, cpu_obs, f"{where} observation after autoreset")
        for name, value in cpu_info["reward_components"].items():
            _close(warp_info["reward_components"][name], value, f"{where} {name}")
        assert torch.equal(warp_terminated, cpu_terminated), f"{where} terminated"
        assert torch.equal(warp_truncated, cpu_truncated), f"{where} truncated"
        endings += int(cpu_terminated.sum())
    if env_id in ("Hopper-v5", "Walker2d-v5", "InvertedPendulum-v5"):
        assert endings > 0, f"random actions should have ended some episodes of {env_id}"


BALL_AND_ARM = """
<mujoco>
  <option integrator="RK4" timestep="0.01"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body name="ball" pos="0 0 0.1">
      <freejoint/>
      <geom type="sphere" size="0.1" mass="1"/>
    </body>
    <body name="arm" pos="1 0 0.8">
      <joint name="hinge" type="hinge" axis="0 1 0" range="-1 1" limited="true"/>
      <geom type="box" size="0.05 0.05 0.3" pos="0 0 -0.3"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge" ctrlrange="-1 1" ctrllimited="true" gear="20"/></actuator>
</mujoco>
"""


def _forces_close(warp_backend: WarpBackend, cpu_backend: CpuBatchBackend, where: str) -> None:
    # The friction of a rolling ball converges only to the solver's tolerance: the forces
    # (about 10 N) agree to 0.02 N.
    torch.testing.assert_close(
        warp_backend.cfrc_ext().double().cpu(),
        cpu_backend.cfrc_ext(),
        rtol=1e-3,
        atol=2e-2,
        msg=lambda message: f"{where} cfrc_ext: {message}",
    )


@pytest.mark.parametrize("device", DEVICES)
def test_backend_contact_forces_and_partial_resets(device):
    """A ball dropped and rolling on the floor (RK4, like Ant) next to an actuated arm.

    After a reset of some simulations, the others keep what their last step left: ``xpos``
    one substep behind the state and the step's contact forces (the CPU backend forwards
    only the reset ones); the reset ones have no contact forces yet.
    """
    model = mujoco.MjModel.from_xml_string(BALL_AND_ARM)
    warp_backend = WarpBackend(model, NUM_ENVS, device=torch.device(device), need_cfrc_ext=True)
    cpu_backend = CpuBatchBackend(model, NUM_ENVS, nthread=1, need_cfrc_ext=True)
    qpos = torch.as_tensor(model.qpos0).repeat(NUM_ENVS, 1)
    qpos[:, 2] = torch.linspace(0.1, 0.15, NUM_ENVS, dtype=torch.float64)
    qvel = torch.zeros((NUM_ENVS, model.nv), dtype=torch.float64)
    qvel[:, 0] = torch.linspace(-1.0, 2.0, NUM_ENVS, dtype=torch.float64)
    everyone = torch.arange(NUM_ENVS)
    warp_backend.reset(everyone.to(device), qpos.to(device), qvel.to(device))
    cpu_backend.reset(everyone, qpos, qvel)
    generator = torch.Generator().manual_seed(0)
    in_contact = 0
    for step in range(20):
        ctrl = torch.rand((NUM_ENVS, 1), generator=generator, dtype=torch.float64) * 2.4 - 1.2
        warp_backend.step(ctrl.to(device), 5)
        cpu_backend.step(ctrl, 5)
        where = f"step {step}"
        _close(warp_backend.qpos.double(), cpu_backend.qpos, f"{where} qpos")
        _close(warp_backend.qvel.double(), cpu_backend.qvel, f"{where} qvel")
        _close(warp_backend.xpos.double(), cpu_backend.xpos, f"{where} xpos")
        _forces_close(warp_backend, cpu_backend, where)
        in_contact += int((cpu_backend.cfrc_ext().abs().sum(dim=(1, 2)) > 0).sum())
        if step == 10:
            some = torch.tensor([1, 3])
            warp_backend.reset(some.to(device), qpos[some].to(device), qvel[some].to(device))
            cpu_backend.reset(some, qpos[some], qvel[some])
            _close(warp_backend.xpos.double(), cpu_backend.xpos, "xpos after a partial reset")
            _forces_close(warp_backend, cpu_backend, "after a partial reset")
            assert not warp_backend.cfrc_ext()[some.to(device)].any()
    assert in_contact > 0, "the balls should have touched the floor"
    qpos, qvel = warp_backend.state(0)
    assert qpos.dtype == qvel.dtype == np.float64
    assert qpos.shape == (model.nq,) and qvel.shape == (model.nv,)
